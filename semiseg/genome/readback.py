"""semiseg's outputs read back: the segmentation as a PyRanges, posterior tracks as numpy.

For notebooks and round-trip tests; the commands themselves never read their outputs
this way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from ..errors import SemisegError


def prediction_path(path_or_prefix: str | os.PathLike) -> str:
    """The file `read_prediction` reads: the path itself when it names a .bed, .gff3 or
    .gff file, else PREFIX.bed."""
    path = os.fspath(path_or_prefix)
    if not path.lower().removesuffix(".gz").endswith((".bed", ".gff3", ".gff")):
        path = f"{path}.bed"
    if not os.path.isfile(path):
        raise SemisegError(f"prediction not found: {path}")
    return path


def read_prediction(path_or_prefix: str | os.PathLike):
    """A segmentation written by ``semiseg annotate`` as a ``pyranges.PyRanges``.

    Args:
        path_or_prefix: the annotation PREFIX (reads ``PREFIX.bed``), or the path of a
            ``PREFIX.bed`` or ``PREFIX.gff3``.

    From the BED: one row per segment with the columns Chromosome, Start, End (0-based
    half-open), Name (the label; ``gap`` for N runs and outside ``--regions``), Score
    (1000 x the mean posterior of the label), Strand, ThickStart, ThickEnd, ItemRGB.
    From the GFF3: the features with pyranges' GFF3 columns (Start 0-based, as
    everywhere in pyranges) and one column per attribute (ID, Parent, label, ...).
    """
    try:
        import pyranges
    except ImportError:
        raise SemisegError("reading an annotation as a PyRanges needs pyranges: "
                           "pip install 'semiseg[pyranges]'") from None

    path = prediction_path(path_or_prefix)
    if path.lower().removesuffix(".gz").endswith(".bed"):
        return pyranges.read_bed(path)
    return _unescaped(pyranges.read_gff3(path))


_GFF3_COLUMNS = {"Source", "Feature", "Start", "End", "Score", "Strand", "Frame"}


def _unescaped(gr):
    """A GFF3 read by pyranges with GFF3's percent escapes undone (pyranges keeps them):
    the sequence names (column 1) and the attribute values, so names such as
    ``chr,x&y`` (written ``chr%2Cx%26y``) read back as they are in the FASTA."""
    from urllib.parse import unquote

    import pandas as pd
    import pyranges

    df = gr.df
    if not len(df):
        return gr
    for col in df.columns:
        if col in _GFF3_COLUMNS:
            continue
        if col == "Chromosome" or not pd.api.types.is_numeric_dtype(df[col]):
            df[col] = df[col].map(lambda v: unquote(v) if isinstance(v, str) else v)
    return pyranges.PyRanges(df)


def read_bigwig(path: str | os.PathLike, chrom: str, start: int, end: int) -> np.ndarray:
    """``(end - start,) float32`` values of a bigWig, NaN where it has no data."""
    import pyBigWig

    bw = pyBigWig.open(os.fspath(path))
    if bw is None:
        raise SemisegError(f"{path} is not a bigWig file")
    try:
        if chrom not in bw.chroms():
            return np.full(end - start, np.nan, dtype=np.float32)
        v = np.asarray(bw.values(chrom, start, end, numpy=True), dtype=np.float32)
        # a bigWig without any entry answers with an empty array
        return v if len(v) == end - start else np.full(end - start, np.nan, np.float32)
    finally:
        bw.close()


def read_bedgraph(path: str | os.PathLike, chrom_sizes: Mapping[str, int], chrom: str,
                  start: int, end: int) -> np.ndarray:
    """``(end - start,) float32`` values of a bedGraph, NaN where it has no data."""
    from .tracks import Track, TrackSpec

    tr = Track(TrackSpec("bedgraph", os.fspath(path), "bedgraph"), chrom_sizes)
    return tr.values(chrom, start, end)
