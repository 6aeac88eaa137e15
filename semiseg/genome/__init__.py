"""Genomic files <-> numpy. Imports numpy, pyyaml and the bio libraries; never torch.

Conventions (everywhere in this package)
----------------------------------------
- Coordinates are 0-based half-open ``[start, end)`` in bp. GFF3 is 1-based closed only
  inside the GFF3 reader/writer.
- A *label array* is ``(T,) int64``, one label index per position (per bp, or per bin at
  ``resolution > 1``); ``-1`` = masked (unlabelled with no background label, or a ``gap`` row
  of a semiseg output read back) and must be ignored by the loss and by evaluation.
- Features are ``(T, F) float32``; posteriors ``(T, C) float32`` (C = number of labels),
  the boundary posterior ``(T,) float32``. At ``resolution = r`` bin ``i`` covers bp
  ``[start + i*r, min(start + (i+1)*r, end))``; ``T = ceil((end - start) / r)`` (the last
  bin may be partial). Binned features are the mean over the bin; binned labels are the
  majority label of the bin (ties -> lowest label index; masked only if the whole bin is).
- Chromosome sizes are a ``dict[str, int]`` in FASTA order (that order is the output
  order). Names are never renamed silently: a mismatch raises SemisegError listing both
  sides, unless an alias map ``{name_in_file: name_in_fasta}`` is given (an empty
  ``name_in_fasta`` drops that chromosome's lines on purpose, e.g. ``{"chrM": ""}``).
  Annotations must match fully; a track needs at least one matching chromosome (the
  others read as missing).
- Every user-input problem raises ``semiseg.errors.SemisegError`` with one line (file and
  line number where there is one). Writers never leave partial output.

sequence.py
-----------
``Fasta(paths)``: one plain or bgzip FASTA, or a list of them (one per chromosome is
  fine; names unique across files). pyfaidx for plain, pysam for bgzip. Builds the
  ``.fai``/``.gzi`` when missing (in the cache when the folder is read-only or the
  index no longer fits the FASTA; plain gzip is
  refused with a hint to bgzip). Context manager; ``.paths``.
  - ``.chrom_sizes -> dict[str, int]``
  - ``.fetch(chrom, start, end) -> str`` (original case)
  - ``.onehot(chrom, start, end, iupac="zero"|"fractional", softmask=False)
    -> (T, 4 or 5) float32``: columns A, C, G, T (+ 1.0 where lowercase if ``softmask``).
    N rows are all zero; other IUPAC codes zero, or split evenly (R = .5 A + .5 G) when
    ``iupac="fractional"``.
  - ``.n_runs(chrom, min_length=1) -> (R, 2) int64`` [start, end) runs of N (any case;
    scanned in 4 Mb chunks once per chromosome, cached).
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
  raw values (before transform), NaN where missing (absent chromosome, bigWig/bedGraph
  gaps, NaN). ``.chroms``: FASTA chromosomes it covers. SemisegError if no chromosome of
  the file matches ``chrom_sizes`` (both sides listed), a length differs, a bedGraph is
  unsorted/overlapping (file:line) or a BAM has no index in a read-only folder.
``TrackStats(names, mean, std, chroms)``: per-track mean/std after transform, computed
  with ``fit_track_stats(tracks, chroms)`` on training chromosomes; ``.to_dict()`` /
  ``TrackStats.from_dict(d)`` (plain lists/floats, for the checkpoint).
``transform(values, kind)``: "none", "log1p" (sign(x) * log(1 + |x|)), "arcsinh".
``read_track_sheet(path) -> {name: path or {path, transform, kind, mapq, strand}}``: a
  TSV of tracks (name, path[, transform, kind, mapq, strand]; optional header naming the
  columns; paths relative to the sheet), the layout of the config's ``inputs.tracks``.
``fit_track_stats(..., exclude=[(chrom, start, end)])`` leaves held-out regions out.

scheme.py, labels.py, gff.py
----------------------------
scheme.py holds the label schemes, labels.py the annotations and their readers, gff.py
the GFF3/GTF gene model that labels.py uses (imports point that way only).

``LabelScheme``: ``.names: list[str]``, ``.colors: list[(r, g, b)]``,
  ``.strands: list["+"|"-"|"."]``, ``.roles`` (CDS/UTR/intron/ncRNA or None),
  ``.aliases``, ``.gff_types``, ``.kind: "bed"|"gene_structure"``,
  ``.background: int|None`` (label index for unlabelled positions, None -> -1),
  ``.priority`` (overlap resolution), ``.min_intron`` (gene_structure), ``.index(name)``,
  ``len(scheme)``, ``.to_dict()`` / ``LabelScheme.from_dict(d)`` / ``LabelScheme.from_yaml(path)``.
``load_scheme(spec) -> LabelScheme``: a YAML path, a mapping (the YAML layout), or a built-in name:
  ``"gene_structure"`` = ``semiseg/genome/schemes/gene_structure.yaml`` (package data):
  labels ``intergenic, CDS+, CDS-, intron+, intron-, UTR+, UTR-, ncRNA+, ncRNA-``,
  background intergenic, min_intron 20, priority CDS > ncRNA > UTR > intron.
  (pyproject's package-data must list ``genome/schemes/*.yaml`` for wheels.)
  YAML layout (unknown keys are errors)::

      name: chromatin
      kind: bed                  # or gene_structure
      background: quiet          # or null: unlabelled -> -1
      labels:
        - {name: active, color: "255,0,0", strand: ".", aliases: [Tss, Enh]}
        - {name: quiet, color: [200, 200, 200]}
      priority: [active, quiet]  # highest first; default: label order
      # gene_structure only: role per label (CDS, UTR, intron, ncRNA), min_intron,
      # gff: {cds_types, exon_types, utr_types, intron_types, ncrna_types}
``Annotation(intervals {chrom: (starts, ends, labels)}, scheme, chrom_sizes)``:
  non-overlapping labelled intervals per chromosome (overlaps resolved by priority on
  construction; label -1 beats all).
  - ``.labels(chrom, start, end, resolution=1) -> (T,) int64`` (background or -1 where
    unlabelled)
  - ``.intervals(chrom) -> (starts, ends, labels)`` int64 arrays, sorted.
``read_annotation(path, scheme, chrom_sizes, alias=None) -> Annotation``: BED (name column
  -> label via the scheme's names/aliases; BED9 written by semiseg reads back, ``gap``
  -> -1; lines in any order) or GFF3/GTF (by extension). Gene-structure scheme:
  transcripts from CDS/exon/UTR/intron rows grouped by Parent (an mRNA, or the gene as
  in SGD) or GTF transcript_id; introns = gaps >= min_intron between a transcript's
  exonic blocks (or explicit intron rows); shorter gaps take the exon label (CDS
  between two CDS rows: Ty frameshifts); transcripts without CDS are ncRNA when their
  type/biotype is an RNA (ncrna_types, or ``*RNA`` but mRNA), else unlabelled
  (pseudogenic transcripts); childless ncRNA-type features are one exon. Non-gene
  schemes: one interval per row whose ``label=`` attribute (must be known) or type
  names a label; other rows ignored. ``gap`` rows -> -1.
  Also the reader of truth files for evaluation.
``read_bed_labels``, ``read_gff_labels``: the two halves of ``read_annotation``.
``is_gff(path)``; ``annotation_extents(path) -> {chrom: furthest end}`` and
``sizes_with_extras(path, sizes) -> (sizes + the annotation's other chromosomes, others)``:
  for reading a genome-wide annotation against a FASTA of some chromosomes.
``bed_rows(path)``: (line number, fields) of the data lines of a BED-like file (comments,
``track`` and ``browser`` lines skipped); ``open_text(path)`` opens plain or gzip text.
``read_gff_rows(path, chrom_sizes, alias=None) -> (rows, is_gtf)``,
``gff_transcripts(rows, is_gtf, scheme) -> list[Transcript]`` (``.cds``, ``.exons``,
  ``.utrs``, ``.introns``, ``.short_gaps``: (n, 2) int64; ``.coding``, ``.ncrna``,
  ``.strand``, ``.type``, ``.id``) and ``transcript_parts(t) -> [(start, end, role)]``:
  the gene model itself.

windows.py (the loader; training windows are train/data.py's)
--------------------------------------------------------------
``parse_region("chr1:1,000-2,000") -> ("chr1", 1000, 2000)`` (no range -> end -1).
``ChromSizes(path)``: a genome known by a chrom-sizes file or ``.fai`` alone, in place of a
  ``Fasta`` for models that read no sequence (``.chrom_sizes``; one-hot all zero, no N
  runs, ``fetch`` raises); ``GenomeData`` takes it and records it in ``config()``.
``read_holdout(spec, chrom_sizes)``: ``windows.holdout`` (a BED path, or a list of
  ``"chrom:start-end"`` / ``"chrom"``) -> merged (chrom, start, end);
  ``subtract_regions(regions, holes)``: regions with the holes cut out.
``GenomeData(fasta, tracks=(), annotation=None, resolution=1, iupac="zero",
  softmask=False, stats=None, alias=None)``: the fast loader.
  - ``.chrom_sizes``, ``.feature_names: list[str]``, ``.n_features``
  - ``.load(chrom, start, end) -> (features (T, F) float32, labels (T,) int64)``
    features = [A, C, G, T, (softmask), track_1..track_n (transformed, standardised,
    0 where missing), missing_1..missing_n (1.0 where missing)]; labels all -1 without
    an annotation. ``T = ceil((end - start) / resolution)``.
  - ``.fit_stats(chroms)`` -> TrackStats (also stored on the object)
  - ``.config() -> dict`` plain data (fasta paths, tracks, transforms, stats,
    resolution, iupac, softmask, feature_names) for the checkpoint;
    ``GenomeData.from_config(d, fasta=None, track_paths=None {name: path},
    annotation=None, alias=None)`` rebuilds the same features on other files.
  - ``.set_stats(stats)``, ``.close()``; context manager.

write.py
--------
``labels_to_segments(labels (T,) int, start=0, resolution=1, end=None) -> (S, 3) int64``
  rows ``[start, end, label]`` in bp, adjacent equal labels merged; ``end`` clips the
  last bin at the chromosome end.
``OutputWriter(prefix, scheme, chrom_sizes, resolution=1, formats=("bed", "gff3",
  "bigwig"), version="unknown" (annotate passes its own), model_hash=None, fasta=None,
  gap_min=100)``:
  context manager; everything goes to temporary names and is renamed on a clean
  ``close()``/exit (removed on error). With ``fasta``, N runs >= gap_min are ``gap``
  wherever ``add`` gets no ``gaps``. ``chrom_sizes`` is also the bigWig header.
  - ``.add(chrom, segments (S, 3) int64, posteriors=None (T, C) float32,
    boundary=None (T,) float32, gaps=None (R, 2) int64)`` once per chromosome, in
    ``chrom_sizes`` order; segments sorted and contiguous (a chromosome end to end, or
    one range of it; posteriors then start at ``segments[0, 0]``); label -1 -> ``gap``;
    gaps (may overlap) override segments. Argument errors are ValueError.
  BED9: score = round(1000 x mean posterior of the label over the segment's steps), 0
  without posteriors; strand = the label's; gap rows are black, strand ".".
  GFF3, gene_structure: runs of CDS/UTR (+ introns between) on one strand ->
  gene -> mRNA -> exon, CDS (phase), five/three_prime_UTR, intron; ncRNA runs ->
  ncRNA_gene -> ncRNA -> exon; lone introns and N gaps as single features; the background
  label is not written. Other schemes: one feature per segment (type = gff_type,
  ``label=NAME``). IDs ``CHROM:geneN``, ``CHROM:geneN.t1.cdsK`` ... (unique per row).
``write_outputs(prefix, scheme, chrom_sizes, segments {chrom: (S, 3)}, posteriors=None,
  boundary=None, **OutputWriter kwargs) -> list[str]``: all at once.
  Writes ``PREFIX.bed`` (BED9), ``PREFIX.browser.bed``, ``PREFIX.gff3``,
  ``PREFIX.posterior.LABEL.bw`` per label, ``PREFIX.boundary.bw``, and with
  "bedgraph" in formats ``PREFIX.posterior.LABEL.bedGraph`` / ``PREFIX.boundary.bedGraph``.
PREFIX.bed has no header line (pyranges, bedtools and IGV read it as it is); the
  provenance ``semiseg VERSION model=HASH scheme=NAME resolution=R`` is in the
  browser BED's track line (description) and in a GFF3 header comment.

readback.py
-----------
``read_prediction(prefix_or_path) -> pyranges.PyRanges``: PREFIX.bed (or a .bed/.gff3
  path) as a PyRanges, for notebooks.
``read_bigwig(path, chrom, start, end) -> (T,) float32`` (NaN where no data) and
  ``read_bedgraph(path, chrom_sizes, chrom, start, end)`` for round trips.
"""

from ._util import open_text
from .gff import Transcript, gff_transcripts, read_gff_rows, transcript_parts
from .labels import (
    Annotation,
    annotation_extents,
    bed_rows,
    is_gff,
    labels_to_segments,
    read_annotation,
    read_bed_labels,
    read_gff_labels,
    sizes_with_extras,
)
from .readback import read_bedgraph, read_bigwig, read_prediction
from .scheme import GAP, LabelScheme, load_scheme
from .sequence import Fasta, check_chroms, onehot, read_chrom_sizes
from .tracks import Track, TrackSpec, TrackStats, fit_track_stats, transform
from .windows import GenomeData, parse_region
from .write import OutputWriter, write_outputs

__all__ = [
    "GAP",
    "Annotation",
    "Fasta",
    "check_chroms",
    "GenomeData",
    "LabelScheme",
    "OutputWriter",
    "Track",
    "TrackSpec",
    "TrackStats",
    "Transcript",
    "annotation_extents",
    "bed_rows",
    "fit_track_stats",
    "gff_transcripts",
    "is_gff",
    "labels_to_segments",
    "load_scheme",
    "onehot",
    "open_text",
    "parse_region",
    "read_annotation",
    "read_bed_labels",
    "read_bedgraph",
    "read_bigwig",
    "read_chrom_sizes",
    "read_gff_labels",
    "read_gff_rows",
    "read_prediction",
    "sizes_with_extras",
    "transcript_parts",
    "transform",
    "write_outputs",
]
