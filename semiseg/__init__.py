"""semiseg: genome segmentation with a neural encoder and an exact semi-Markov CRF.

Importing the package needs only torch; the genome libraries are imported by the
modules that read and write genomic files, and triton only when a kernel first runs.
"""

__version__ = "0.1.0"
