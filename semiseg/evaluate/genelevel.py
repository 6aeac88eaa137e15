"""Gene models (coding exon chains) from files, for exon- and gene-level scores.

A gene model is the coding part of one transcript: its CDS intervals (0-based half-open,
sorted, touching or overlapping rows merged) on one strand. They come from

- a GFF3 or GTF (`read_gene_models`): ``CDS`` and ``stop_codon`` rows grouped by
  transcript (GFF3: each ``Parent``; GTF: ``transcript_id``; the format is told per row
  by its attribute column, so AUGUSTUS's ``.gff`` output, GTF-like, reads too); a
  ``stop_codon`` row joins its transcript's CDS, as the gene_structure label scheme
  counts it (cds_types: CDS, stop_codon). Truth files, semiseg's own PREFIX.gff3 and
  other gene finders' outputs alike;
- a segmentation BED (`models_from_segments`, semiseg's PREFIX.bed): a gene is a run of
  touching segments of one strand whose labels have the roles CDS, UTR or intron (as
  semiseg's GFF3 writer groups them); its model is its CDS segments.

Stop codons (`normalise_stops`): annotations differ on whether the stop codon is inside
the last CDS row (SGD, semiseg's yeast labels, AUGUSTUS with the fly parameters) or just
after it (GTF convention; the fly scipio structures, AUGUSTUS's yeast parameters outside
its stop_codon rows). With the sequence, every model is brought to "stop included": a
model whose spliced CDS does not end with TAA/TAG/TGA (on its strand) but is followed by
one gets those 3 bp added to its 3'-most exon. Without the sequence the matching rule
allows the 3' end of a model to lie 3 bp either way (metrics.stop_variants).

The counting is in metrics.py (`gene_level`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from ..errors import SemisegError
from ..genome.codes import STANDARD, reverse_complement

STOPS = frozenset(STANDARD.stops)
_GTF_TID = re.compile(r'(?:^|;)\s*transcript_id\s+"?([^";]+)"?')


@dataclass(frozen=True)
class GeneModel:
    """The coding exons of one transcript: ``cds`` sorted (start, end), 0-based half-open."""

    id: str
    chrom: str
    strand: str
    cds: tuple[tuple[int, int], ...]

    @property
    def start(self) -> int:
        return self.cds[0][0]

    @property
    def end(self) -> int:
        return self.cds[-1][1]

    @property
    def key(self) -> tuple:
        """(chrom, strand, cds): what two models must share to be the same gene."""
        return (self.chrom, self.strand, self.cds)


def merge(iv: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Union of intervals; touching ones merge (a stop_codon row next to its CDS)."""
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


def read_gene_models(path: str | os.PathLike, chroms: Iterable[str] | None = None,
                     types: Iterable[str] = ("CDS", "stop_codon")) -> list[GeneModel]:
    """Gene models of a GFF3/GTF: rows of `types` grouped by transcript (module doc).

    Raises SemisegError (file and line) for a malformed row or a transcript whose rows
    disagree on chromosome or strand; rows on other chromosomes than `chroms` are skipped.
    """
    from ..genome._util import open_text

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SemisegError(f"file not found: {path}")
    keep = None if chroms is None else set(chroms)
    types = set(types)
    groups: dict[str, list[tuple[int, int, str, str, int]]] = {}
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith("##FASTA"):
                break
            if line.startswith("#") or not line.strip():
                continue
            f = line.rstrip("\n\r").split("\t")
            if len(f) != 9:
                raise SemisegError(f"{path}:{lineno}: expected 9 tab-separated columns, "
                                   f"got {len(f)}")
            if f[2] not in types or (keep is not None and f[0] not in keep):
                continue
            try:
                s, e = int(f[3]) - 1, int(f[4])
            except ValueError:
                raise SemisegError(f"{path}:{lineno}: start and end must be integers") from None
            if s < 0 or e <= s:
                raise SemisegError(f"{path}:{lineno}: invalid interval {f[3]}-{f[4]}")
            if f[6] not in ("+", "-"):
                raise SemisegError(f"{path}:{lineno}: a {f[2]} row needs strand + or -, "
                                   f"got {f[6]!r}")
            m = _GTF_TID.search(f[8])
            if m:
                parents = [m.group(1)]
            else:
                attrs = dict(p.split("=", 1) for p in f[8].strip().split(";") if "=" in p)
                parent = attrs.get("Parent")
                parents = ([unquote(p) for p in parent.split(",")] if parent
                           else [f"{f[2]}@line{lineno}"])
            for p in parents:
                groups.setdefault(p, []).append((s, e, f[0], f[6], lineno))
    out = []
    for tid, rows in groups.items():
        chrom, strand = rows[0][2], rows[0][3]
        for r in rows:
            if (r[2], r[3]) != (chrom, strand):
                raise SemisegError(f"{path}:{r[4]}: parts of transcript {tid!r} disagree on "
                                   "chromosome or strand")
        out.append(GeneModel(tid, chrom, strand, merge((r[0], r[1]) for r in rows)))
    out.sort(key=lambda g: (g.chrom, g.start, g.end, g.strand, g.id))
    return out


def models_from_segments(intervals: Mapping[str, tuple], scheme) -> list[GeneModel]:
    """Gene models of a segmentation: {chrom: (starts, ends, names)} as `intervals.Intervals`
    holds it (semiseg's PREFIX.bed), label names mapped to roles by the gene_structure
    `scheme` (module doc). A run without CDS (UTR or introns alone) is no gene model."""
    index = {n: i for i, n in enumerate(scheme.names)}
    runs: list[tuple[str, str, list[tuple[int, int]]]] = []  # (chrom, strand, CDS parts)
    for chrom, (starts, ends, names) in intervals.items():
        order = sorted(range(len(starts)), key=lambda i: (int(starts[i]), int(ends[i])))
        strand, end = None, None  # of the open run (strand None: no run open)
        for i in order:
            s, e, name = int(starts[i]), int(ends[i]), names[i]
            lab = index.get(name)
            role = scheme.roles[lab] if lab is not None else None
            st = scheme.strands[lab] if lab is not None else None
            part = role in ("CDS", "UTR", "intron") and st in ("+", "-")
            if not part:
                strand = None
                continue
            if st != strand or s != end:
                runs.append((chrom, st, []))
                strand = st
            end = e
            if role == "CDS":
                runs[-1][2].append((s, e))
    out = [GeneModel(f"{c}:{cds[0][0]}-{cds[-1][1]}{st}", c, st, merge(cds))
           for c, st, cds in runs if cds]
    out.sort(key=lambda g: (g.chrom, g.start, g.end, g.strand, g.id))
    return out


_revcomp = reverse_complement


def normalise_stops(models: Iterable[GeneModel],
                    fetch: Callable[[str, int, int], str],
                    sizes: Mapping[str, int]) -> tuple[list[GeneModel], int]:
    """Every model with its stop codon inside the CDS (module doc): a model whose spliced
    CDS does not end with a stop codon on its strand, but whose next 3 bp downstream are
    one, gets them. `fetch(chrom, start, end)` returns sequence. Returns the models and
    how many were extended."""
    out, n = [], 0
    for g in models:
        spliced = ""  # the last 3 bp of the spliced CDS (exons read from the 3' end)
        if g.strand == "+":
            for s, e in reversed(g.cds):
                spliced = fetch(g.chrom, max(s, e - 3 + len(spliced)), e) + spliced
                if len(spliced) >= 3:
                    break
            last = spliced.upper()[-3:]
            nxt = fetch(g.chrom, g.end, g.end + 3).upper() if g.end + 3 <= sizes[g.chrom] else ""
        else:
            for s, e in g.cds:
                spliced += fetch(g.chrom, s, min(e, s + 3 - len(spliced)))
                if len(spliced) >= 3:
                    break
            last = _revcomp(spliced.upper()[:3])
            nxt = _revcomp(fetch(g.chrom, g.start - 3, g.start).upper()) if g.start >= 3 else ""
        if len(last) == 3 and last in STOPS or nxt not in STOPS:
            out.append(g)
            continue
        n += 1
        cds = list(g.cds)
        if g.strand == "+":
            cds[-1] = (cds[-1][0], cds[-1][1] + 3)
        else:
            cds[0] = (cds[0][0] - 3, cds[0][1])
        out.append(GeneModel(g.id, g.chrom, g.strand, merge(cds)))
    return out, n


def inside(models: Iterable[GeneModel],
           regions: Mapping[str, list[tuple[int, int]]] | None) -> list[GeneModel]:
    """The models lying wholly inside one of `regions` ({chrom: [(start, end)]}; None:
    all)."""
    if regions is None:
        return list(models)
    return [g for g in models
            if any(s <= g.start and g.end <= e for s, e in regions.get(g.chrom, ()))]
