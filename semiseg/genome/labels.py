"""Annotations (BED, GFF3, GTF) -> labelled intervals -> per-position label arrays.

A label array is ``(T,) int64``: a label index per position, ``-1`` where masked. Label
schemes live in scheme.py and the GFF3/GTF gene model in gff.py; both are re-exported
here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote

import numpy as np

from ..errors import SemisegError
from ._util import ChromMatcher, bin_majority, check_region, coords, open_text, overlapping, paint
from .gff import gff_transcripts, read_gff_rows, transcript_parts
from .scheme import BUILTIN_SCHEMES, GAP, ROLES, LabelScheme, load_scheme  # noqa: F401

_CHUNK = 1 << 22  # bp rasterised at a time

# --------------------------------------------------------------------------- annotation


class Annotation:
    """Labelled, non-overlapping, sorted intervals per chromosome.

    Args:
        intervals: chrom -> (starts, ends, labels) int64 arrays, possibly overlapping;
            overlaps are resolved by ``scheme.priority`` (label -1, masked, beats all).
        scheme: the label scheme.
        chrom_sizes: sizes of all chromosomes (chromosomes without intervals are all
            background / masked).
    """

    def __init__(self, intervals: Mapping[str, tuple], scheme: LabelScheme,
                 chrom_sizes: Mapping[str, int]):
        self.scheme = scheme
        self.chrom_sizes = dict(chrom_sizes)
        self.cleanup = None  # cleanup.Cleanup of training labels (read_gff_labels clean)
        rank = {-1: len(scheme) + 1}
        for r, lab in enumerate(reversed(scheme.priority)):
            rank[lab] = r
        self._iv: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for chrom, (s, e, lab) in intervals.items():
            self._iv[chrom] = _resolve(np.asarray(s, np.int64), np.asarray(e, np.int64),
                                       np.asarray(lab, np.int64), rank)

    @property
    def fill(self) -> int:
        """Label of unlabelled positions (background index, or -1)."""
        return -1 if self.scheme.background is None else self.scheme.background

    def intervals(self, chrom: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, labels) int64, sorted and non-overlapping; -1 = masked."""
        empty = np.zeros(0, np.int64)
        return self._iv.get(chrom, (empty, empty, empty))

    def labels(self, chrom: str, start: int = 0, end: int | None = None,
               resolution: int = 1) -> np.ndarray:
        """``(ceil((end-start)/resolution),) int64`` labels of ``[start, end)``."""
        if end is None:
            end = self.chrom_sizes.get(chrom, 0)
        check_region(self.chrom_sizes, chrom, start, end)
        if resolution < 1:
            raise ValueError(f"resolution must be >= 1, got {resolution}")
        # per bp in chunks (int16: schemes have far fewer labels), int64 per step
        chunk = max(1, _CHUNK // resolution) * resolution
        s, e, lab = self.intervals(chrom)
        parts = []
        for lo in range(start, end, chunk):
            hi = min(end, lo + chunk)
            out = np.full(hi - lo, self.fill, dtype=np.int16)
            sl = overlapping(s, e, lo, hi)
            paint(out, lo, s[sl], e[sl], lab[sl])
            parts.append(bin_majority(out, resolution, len(self.scheme)))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _resolve(s, e, lab, rank) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resolve overlaps by rank (higher wins) and merge touching equal labels."""
    keep = e > s
    s, e, lab = s[keep], e[keep], lab[keep]
    if len(s) == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    bounds = np.unique(np.concatenate([s, e]))
    si = np.searchsorted(bounds, s)
    ei = np.searchsorted(bounds, e)
    m = len(bounds) - 1
    best = np.full(m, -2, dtype=np.int64)  # -2: no interval
    for label in sorted(set(lab.tolist()), key=lambda x: rank[x]):
        sel = lab == label
        diff = np.bincount(si[sel], minlength=m + 1) - np.bincount(ei[sel], minlength=m + 1)
        best[np.cumsum(diff)[:m] > 0] = label
    starts, ends = bounds[:-1], bounds[1:]
    has = best != -2
    starts, ends, best = starts[has], ends[has], best[has]
    # merge runs of equal labels that touch
    new = np.ones(len(best), dtype=bool)
    new[1:] = (best[1:] != best[:-1]) | (starts[1:] != ends[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(best)) - 1
    return starts[first], ends[last], best[first]


# --------------------------------------------------------------------------- BED


def bed_rows(path: str | os.PathLike):
    """Yield (lineno, fields) of data lines of a BED-like file (tab or space separated)."""
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            fields = line.rstrip("\n\r").split("\t")
            if len(fields) < 3:
                fields = line.split()
            yield lineno, fields


def read_bed_labels(path: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                    alias: Mapping[str, str] | None = None) -> Annotation:
    """A BED file (>= 4 columns) whose name column holds label names or aliases.

    ``gap`` (as written by semiseg for N runs) reads as masked (-1). Lines in any order.
    """
    path = os.fspath(path)
    match = ChromMatcher(chrom_sizes, alias)
    lookup = scheme._lookup()
    lookup[GAP] = -1
    rows: dict[str, list[tuple[int, int, int]]] = {}
    unknown: dict[str, int] = {}
    n = 0
    for lineno, f in bed_rows(path):
        n += 1
        if len(f) < 4:
            raise SemisegError(
                f"{path}:{lineno}: expected at least 4 columns (chrom start end name), got {len(f)}"
            )
        chrom = match(f[0], lineno)
        if chrom is None:
            continue
        start, end = coords(path, lineno, f[1:3], chrom, chrom_sizes)
        label = lookup.get(f[3])
        if label is None:
            unknown.setdefault(f[3], lineno)
            continue
        rows.setdefault(chrom, []).append((start, end, label))
    if n == 0:
        raise SemisegError(f"{path}: no intervals (empty BED file)")
    match.raise_unknown(path)
    if unknown:
        name, line = next(iter(unknown.items()))
        raise SemisegError(
            f"{path}:{line}: unknown label {name!r} "
            f"(also: {', '.join(list(unknown)[1:6]) or 'none'}); "
            f"the scheme has {', '.join(scheme.names)}"
        )
    return Annotation({c: tuple(np.array(v, np.int64).T) for c, v in rows.items()},
                      scheme, chrom_sizes)



def read_gff_labels(path: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                    alias: Mapping[str, str] | None = None, clean: bool = False,
                    fetch=None) -> Annotation:
    """GFF3/GTF -> Annotation.

    ``gene_structure`` schemes: transcripts (see :func:`gff_transcripts`) labelled by role
    and strand; rows with a ``label=NAME`` attribute and ``gap`` rows are taken as is.
    Other schemes: one interval per row whose ``label`` attribute (error if unknown) or
    type names a label (rows of other types are ignored).

    `clean` (training labels of a gene_structure scheme): rows past a sequence's end are
    clipped, and the transcripts go through cleanup.clean_transcripts first (duplicates
    merged, one isoform per locus, defective structures set aside; with `fetch`, chrom ->
    sequence, also the gene model's sequence rules): only the kept ones are painted, the
    masked stretches are -1, and the Annotation carries the outcome as ``.cleanup``.
    """
    path = os.fspath(path)
    clean = clean and scheme.kind == "gene_structure"
    rows, gtf = read_gff_rows(path, chrom_sizes, alias, clip=clean)
    lookup = scheme._lookup()
    iv: dict[str, list[tuple[int, int, int]]] = {}

    def add(chrom, s, e, lab):
        iv.setdefault(chrom, []).append((s, e, lab))

    parts = set().union(*(scheme.gff[k] for k in ("cds_types", "exon_types", "utr_types",
                                                  "intron_types")))
    for r in rows:
        if r.type == GAP:
            add(r.chrom, r.start, r.end, -1)
        elif "label" in r.attrs and r.type not in parts:
            name = r.attrs["label"]
            if name not in lookup:
                raise SemisegError(f"{path}:{r.lineno}: unknown label {name!r}; "
                                   f"the scheme has {', '.join(scheme.names)}")
            add(r.chrom, r.start, r.end, lookup[name])
        elif scheme.kind != "gene_structure" and r.type in lookup:
            add(r.chrom, r.start, r.end, lookup[r.type])
    cleanup = None
    if scheme.kind == "gene_structure":
        transcripts = gff_transcripts(rows, gtf, scheme, path)
        if clean:
            from .cleanup import clean_transcripts
            from .gff import coding_features

            cleanup = clean_transcripts(transcripts, chrom_sizes, fetch=fetch,
                                        min_intron=scheme.min_intron,
                                        coding=coding_features(rows, gtf))
            transcripts = cleanup.kept
            for chrom, spans in cleanup.masks.items():
                for s, e in spans:
                    add(chrom, s, e, -1)
        for t in transcripts:
            for s, e, role in transcript_parts(t):
                lab = scheme.role_label(role, t.strand)
                if lab is not None:
                    add(t.chrom, s, e, lab)
    if not iv:
        raise SemisegError(f"{path}: no feature maps to a label of scheme {scheme.name!r}")
    ann = Annotation({c: tuple(np.array(v, np.int64).T) for c, v in iv.items()},
                     scheme, chrom_sizes)
    ann.cleanup = cleanup
    return ann


def is_gff(path: str | os.PathLike) -> bool:
    """Whether a file name is GFF3/GTF (``.gff``, ``.gff3``, ``.gtf``, optionally ``.gz``)."""
    return os.fspath(path).lower().removesuffix(".gz").endswith((".gff", ".gff3", ".gtf"))


def annotation_extents(path: str | os.PathLike) -> dict[str, int]:
    """Furthest end per chromosome name in a BED or GFF3/GTF file (names in file order).

    The readers require every chromosome of an annotation to be in the FASTA; a
    genome-wide annotation used with a FASTA of some chromosomes is common, so callers
    read it against the FASTA's sizes plus these extents and keep the FASTA's chromosomes.
    """
    gff = is_gff(path)
    col = 4 if gff else 2
    # GFF3 has only '#' lines as comments (a seqid may begin with 'track'); its column 1
    # is percent-escaped (GTF's is not)
    skip = ("#",) if gff else ("#", "track", "browser")
    unescape = gff and not os.fspath(path).lower().removesuffix(".gz").endswith(".gtf")
    ext: dict[str, int] = {}
    with open_text(path) as fh:
        for line in fh:
            if line.startswith("##FASTA"):
                break
            if line.startswith(skip) or not line.strip():
                continue
            f = line.split("\t")
            if len(f) > col:
                name = unquote(f[0]) if unescape else f[0]
                try:
                    ext[name] = max(ext.get(name, 0), int(f[col]))
                except ValueError:
                    continue
    return ext


def sizes_with_extras(path: str | os.PathLike,
                      sizes: Mapping[str, int]) -> tuple[dict[str, int], list[str]]:
    """`sizes` plus the annotation's other chromosomes (at their furthest end), and the
    list of those others. If no chromosome of the annotation is in `sizes` there is
    nothing to add: the reader then reports the mismatch, listing both sides."""
    ext = annotation_extents(path)
    extras = [c for c in ext if c not in sizes]
    if len(extras) == len(ext):
        return dict(sizes), []
    out = dict(sizes)
    for c in extras:
        out[c] = ext[c]
    return out, extras


def read_annotation(path: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                    alias: Mapping[str, str] | None = None, clean: bool = False,
                    fetch=None) -> Annotation:
    """Labels from a BED (by name column) or GFF3/GTF file, chosen by extension.

    Also reads semiseg's own BED9 / GFF3 output back (truth files for evaluation).
    `clean`, `fetch`: training labels (read_gff_labels; BED files are taken as they are).
    """
    if is_gff(path):
        return read_gff_labels(path, scheme, chrom_sizes, alias, clean=clean, fetch=fetch)
    if os.fspath(path).lower().removesuffix(".gz").endswith(".bed"):
        return read_bed_labels(path, scheme, chrom_sizes, alias)
    raise SemisegError(f"{path}: unknown annotation format (expected .bed, .gff3, .gff or .gtf)")


def labels_to_segments(labels: np.ndarray, start: int = 0, resolution: int = 1,
                       end: int | None = None) -> np.ndarray:
    """Runs of equal labels -> ``(S, 3) int64`` rows ``[start, end, label]`` in bp.

    Args:
        labels: ``(T,)`` int, one label per step; step ``i`` covers
            ``[start + i*resolution, start + (i+1)*resolution)``.
        start: bp coordinate of step 0.
        resolution: bp per step.
        end: clip the last segment here (the chromosome or region end), if given.
    """
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"labels must be a non-empty 1-d array, got shape {labels.shape}")
    new = np.ones(len(labels), dtype=bool)
    new[1:] = labels[1:] != labels[:-1]
    first = np.flatnonzero(new)
    s = start + first * resolution
    e = np.append(s[1:], start + len(labels) * resolution)
    if end is not None:
        if not start + (len(labels) - 1) * resolution < end <= start + len(labels) * resolution:
            raise ValueError(f"end {end} does not fall in the last step")
        e[-1] = end
    return np.stack([s, e, labels[first]], axis=1)
