"""The Triton source of the kernels (the package docstring of semiseg.crf.triton lists what
each module holds). Importing any of them imports triton."""
