"""Genomic files <-> numpy. Imports numpy, pyyaml and the bio libraries; never torch.

Conventions (everywhere in this package)
----------------------------------------
- Coordinates are 0-based half-open ``[start, end)`` in bp. GFF3 is 1-based closed only
  inside the GFF3 reader/writer.
- A *label array* is ``(T,) int64``, one label index per position (per bp, or per bin at
  ``resolution > 1``); ``-1`` = masked (unlabelled with no background label, or inside an
  N gap when asked) and must be ignored by the loss and by evaluation.
- Features are ``(T, F) float32``; posteriors ``(T, C) float32`` (C = number of labels),
  the boundary posterior ``(T,) float32``. At ``resolution = r`` bin ``i`` covers bp
  ``[start + i*r, min(start + (i+1)*r, end))``; ``T = ceil((end - start) / r)`` (the last
  bin may be partial). Binned features are the mean over the bin; binned labels are the
  majority label of the bin (ties -> lowest label index; masked only if the whole bin is).
- Chromosome sizes are a ``dict[str, int]`` in FASTA order (that order is the output
  order). Names are never renamed silently: a mismatch raises SemisegError listing both
  sides, unless an alias map ``{name_in_file: name_in_fasta}`` is given.
- Every user-input problem raises ``semiseg.errors.SemisegError`` with one line (file and
  line number where there is one). Writers never leave partial output.

sequence.py
-----------
``Fasta(path, alias=None)``: plain or bgzip FASTA (pyfaidx; pysam for bgzip). Builds the
  ``.fai`` when missing (SemisegError if the folder is read-only). Context manager.
  - ``.chrom_sizes -> dict[str, int]``
  - ``.fetch(chrom, start, end) -> str`` (original case)
  - ``.onehot(chrom, start, end, iupac="zero"|"fractional", softmask=False)
    -> (T, 4 or 5) float32``: columns A, C, G, T (+ 1.0 where lowercase if ``softmask``).
    N rows are all zero; other IUPAC codes zero, or split evenly (R = .5 A + .5 G) when
    ``iupac="fractional"``.
  - ``.n_runs(chrom, min_length=1) -> (R, 2) int64`` [start, end) runs of N (any case).
``onehot(seq: str, iupac="zero", softmask=False) -> (T, 4|5) float32`` (same, on a string).
``read_chrom_sizes(path) -> dict[str, int]`` (a two-column ``.sizes``/``.fai`` file).

tracks.py
---------
``TrackSpec(name, path, kind=None, transform="none"|"log1p"|"arcsinh", mapq=0,
  strand=None|"+"|"-")``: kind inferred from extension (.bw/.bigwig, .bedgraph/.bg[.gz],
  .bam); BAM coverage counts reads with MAPQ >= mapq, skips duplicates, secondary,
  QC-fail and unmapped reads; ``strand`` keeps reads of that strand only.
  ``.to_dict()`` / ``TrackSpec.from_dict(d)``.
``Track(spec, chrom_sizes, alias=None)``: ``.values(chrom, start, end) -> (T,) float32``
  raw values, NaN where missing (absent chromosome, bigWig/bedGraph gaps, NaN).
  Raises SemisegError if no chromosome of the file matches ``chrom_sizes``.
``TrackStats``: per-track mean/std after transform, computed with
  ``fit_track_stats(tracks, chroms)`` on training chromosomes; ``.to_dict()`` /
  ``TrackStats.from_dict(d)`` (plain lists/floats, for the checkpoint).

labels.py
---------
``LabelScheme``: ``.names: list[str]``, ``.colors: list[(r, g, b)]``,
  ``.strands: list["+"|"-"|"."]``, ``.kind: "bed"|"gene_structure"``,
  ``.background: int|None`` (label index for unlabelled positions, None -> -1),
  ``.priority`` (overlap resolution), ``.min_intron`` (gene_structure), ``.index(name)``,
  ``len(scheme)``, ``.to_dict()`` / ``LabelScheme.from_dict(d)`` / ``LabelScheme.from_yaml(path)``.
``load_scheme(path_or_name) -> LabelScheme``: a YAML path, or a built-in name:
  ``"gene_structure"`` = ``semiseg/genome/schemes/gene_structure.yaml`` (package data):
  labels ``intergenic, CDS+, CDS-, intron+, intron-, UTR+, UTR-, ncRNA+, ncRNA-``.
``Annotation``: non-overlapping labelled intervals per chromosome (priority applied).
  - ``.labels(chrom, start, end, resolution=1) -> (T,) int64`` (background or -1 where
    unlabelled)
  - ``.intervals(chrom) -> (starts, ends, labels)`` int64 arrays, sorted.
``read_annotation(path, scheme, chrom_sizes, alias=None) -> Annotation``: BED (name column
  -> label via the scheme's names/aliases; BED9 written by semiseg reads back, ``gap``
  -> -1) or GFF3/GTF (gene-structure scheme: genes/transcripts, CDS/exon/UTR rows, introns
  from gaps >= min_intron between a transcript's exons/CDS; non-gene schemes: one
  feature per interval, label from the ``label``/``Name`` attribute or the type).
  Also the reader of truth files for evaluation.

windows.py
----------
``Window(chrom, start, end, length)``: ``length = end - start`` real bp; windows are
  ``size`` bp except possibly the last of a chromosome/region (callers pad to ``size``).
``make_windows(chrom_sizes, size, overlap=0, chroms=None, regions=None, fasta=None)
  -> list[Window]``: ``regions`` = list of (chrom, start, end); windows entirely N are
  skipped when ``fasta`` is given.
``split_windows(windows, valid=..., test=..., by="chrom"|"region") -> dict[str, list[Window]]``
  with keys ``"train"``, ``"valid"``, ``"test"``.
``GenomeData(fasta, tracks=(), annotation=None, resolution=1, iupac="zero",
  softmask=False, stats=None, alias=None)``: the fast loader.
  - ``.chrom_sizes``, ``.feature_names: list[str]``, ``.n_features``
  - ``.load(chrom, start, end) -> (features (T, F) float32, labels (T,) int64)``
    features = [A, C, G, T, (softmask), track_1..track_n (transformed, standardised,
    0 where missing), missing_1..missing_n (1.0 where missing)]; labels all -1 without
    an annotation. ``T = ceil((end - start) / resolution)``.
  - ``.fit_stats(chroms)`` -> TrackStats (also stored on the object)
  - ``.config() -> dict`` plain data (tracks, transforms, stats, resolution, iupac,
    softmask) for the checkpoint; ``GenomeData.from_config(d, fasta, track_paths=None)``.

write.py
--------
``labels_to_segments(labels (T,) int, start=0, resolution=1, end=None) -> (S, 3) int64``
  rows ``[start, end, label]`` in bp, adjacent equal labels merged; ``end`` clips the
  last bin at the chromosome end.
``OutputWriter(prefix, scheme, chrom_sizes, resolution=1, formats=("bed", "gff3",
  "bigwig"), version=..., model_hash=..., gap_min=...)``: context manager; everything goes
  to temporary names and is renamed on a clean ``close()``/exit (removed on error).
  - ``.add(chrom, segments (S, 3) int64, posteriors=None (T, C) float32,
    boundary=None (T,) float32, gaps=None (R, 2) int64)`` once per chromosome, in
    ``chrom_sizes`` order; segments must cover the chromosome end to end.
  Writes ``PREFIX.bed`` (BED9), ``PREFIX.browser.bed``, ``PREFIX.gff3``,
  ``PREFIX.posterior.LABEL.bw`` per label, ``PREFIX.boundary.bw``, and with
  "bedgraph" in formats ``PREFIX.posterior.LABEL.bedGraph`` / ``PREFIX.boundary.bedGraph``.
``read_bigwig(path, chrom, start, end) -> (T,) float32`` (NaN where no data) and
  ``read_bedgraph(...)`` for round trips.
"""

from .labels import (
    GAP,
    Annotation,
    LabelScheme,
    Transcript,
    gff_transcripts,
    load_scheme,
    read_annotation,
    read_bed_labels,
    read_gff_labels,
    read_gff_rows,
    transcript_parts,
)
from .sequence import Fasta, onehot, read_chrom_sizes
from .tracks import Track, TrackSpec, TrackStats, fit_track_stats
from .windows import GenomeData, Window, make_windows, parse_region, split_windows
from .write import (
    OutputWriter,
    labels_to_segments,
    read_bedgraph,
    read_bigwig,
    write_outputs,
)

__all__ = [
    "GAP", "Annotation", "LabelScheme", "Transcript", "gff_transcripts", "load_scheme",
    "read_annotation", "read_bed_labels", "read_gff_labels", "read_gff_rows",
    "transcript_parts", "Fasta", "onehot", "read_chrom_sizes", "Track", "TrackSpec",
    "TrackStats", "fit_track_stats", "GenomeData", "Window", "make_windows", "parse_region",
    "split_windows", "OutputWriter", "labels_to_segments", "read_bedgraph", "read_bigwig",
    "write_outputs",
]
