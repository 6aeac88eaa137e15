"""semiseg: genome segmentation with a neural encoder and an exact semi-Markov CRF.

Importing the package needs only torch; the genome libraries are imported by the
modules that read and write genomic files, and triton only when a kernel first runs.
"""

__version__ = "0.1.0"


def read_prediction(path_or_prefix):
    """A segmentation written by ``semiseg annotate`` as a ``pyranges.PyRanges``:
    ``PREFIX`` (reads PREFIX.bed) or the path of a PREFIX.bed or PREFIX.gff3. See
    :func:`semiseg.genome.readback.read_prediction` for the columns."""
    from .genome.readback import read_prediction as read

    return read(path_or_prefix)
