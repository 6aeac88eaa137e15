"""GFF3 / GTF rows -> transcripts -> gene-structure parts (CDS, UTR, ncRNA, intron).

Coordinates are converted to 0-based half-open when a row is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

import numpy as np

from ..errors import SemisegError
from ._util import ChromMatcher, coords, open_text
from .scheme import LabelScheme


@dataclass
class GffRow:
    lineno: int
    chrom: str
    type: str
    start: int  # 0-based
    end: int
    strand: str
    attrs: dict[str, str]
    clipped: bool = False  # the row ran past the end of its sequence (read with clip=True)


_GTF_ATTR = re.compile(r'\s*([^\s";]+)\s+(?:"([^"]*)"|([^\s;]+))\s*;?')


def _parse_attrs(text: str, gtf: bool) -> dict[str, str]:
    text = text.strip()
    if not text or text == ".":
        return {}
    if gtf:
        out: dict[str, str] = {}
        for m in _GTF_ATTR.finditer(text):
            out.setdefault(m.group(1), m.group(2) if m.group(2) is not None else m.group(3))
        return out
    out = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"attribute {part[:40]!r} is not key=value")
        k, v = part.split("=", 1)
        out[k.strip()] = unquote(v)
        if k.strip() == "Parent":  # several values: split at the commas, then unescape
            out[_PARENTS] = [unquote(x) for x in v.split(",")]
    return out


_PARENTS = "\0parents"  # attrs key of a GFF3 row's Parent values (none can be named so)


def read_gff_rows(path: str | os.PathLike, chrom_sizes: Mapping[str, int],
                  alias: Mapping[str, str] | None = None,
                  clip: bool = False) -> tuple[list[GffRow], bool]:
    """Parse a GFF3 or GTF file into rows (0-based half-open), checking every line.

    Returns ``(rows, is_gtf)``. GTF is recognised by the extension (.gtf, .gtf.gz).
    A row that ends past the end of its sequence is an error, or with `clip` (training:
    a gene running off a partial sequence) cut at the end and marked ``clipped``.
    """
    path = os.fspath(path)
    gtf = path.lower().endswith((".gtf", ".gtf.gz"))
    match = ChromMatcher(chrom_sizes, alias)
    rows: list[GffRow] = []
    seen = 0
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith("##FASTA"):
                break
            if not line.strip() or line.startswith("#"):
                continue
            seen += 1
            f = line.rstrip("\n\r").split("\t")
            if len(f) != 9:
                raise SemisegError(
                    f"{path}:{lineno}: expected 9 tab-separated columns, got {len(f)}"
                )
            # GFF3 percent-escapes column 1 (semiseg writes chr%2C for chr,); GTF does not
            chrom = match(f[0] if gtf else unquote(f[0]), lineno)
            if chrom is None:
                continue
            clipped = False
            if clip and f[3].strip().isdigit() and f[4].strip().isdigit():
                s0, e0, size = int(f[3]), int(f[4]), chrom_sizes[chrom]
                clipped = 1 <= s0 <= e0 and e0 > size
            if clipped:  # cut at the end (a row wholly past it: empty, at the end)
                start, end = min(s0 - 1, size), size
            else:
                start, end = coords(path, lineno, f[3:5], chrom, chrom_sizes, one_based=True)
            if f[6] not in ("+", "-", ".", "?"):
                raise SemisegError(f"{path}:{lineno}: strand must be +, -, . or ?, got {f[6]!r}")
            try:
                attrs = _parse_attrs(f[8], gtf)
            except ValueError as err:
                raise SemisegError(f"{path}:{lineno}: {err}") from None
            rows.append(GffRow(lineno, chrom, f[2], start, end,
                               "." if f[6] == "?" else f[6], attrs, clipped))
    if seen == 0:
        raise SemisegError(f"{path}: no features (empty {'GTF' if gtf else 'GFF3'} file)")
    match.raise_unknown(path)
    return rows, gtf


@dataclass
class Transcript:
    """One transcript (or a gene whose CDS rows hang directly under it, as in SGD).

    Intervals are ``(n, 2) int64`` [start, end), sorted, as given in the file (not merged).
    ``introns`` are the gaps >= min_intron (or covered by explicit intron rows) between
    the exonic blocks; ``short_gaps`` the other gaps, which are labelled like exons.
    """

    id: str
    chrom: str
    strand: str
    type: str
    cds: np.ndarray
    exons: np.ndarray
    utrs: np.ndarray
    introns: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    short_gaps: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    ncrna: bool = False  # a non-coding RNA (by type or biotype), labelled ncRNA
    clipped: bool = False  # a part ran past the end of the sequence (read_gff_rows clip)

    @property
    def coding(self) -> bool:
        return len(self.cds) > 0


def _iv(rows) -> np.ndarray:
    a = np.array(sorted(rows), dtype=np.int64).reshape(-1, 2)
    return a


def _merge(iv: np.ndarray, tolerance: int = 0) -> np.ndarray:
    """Union of intervals; gaps shorter than ``tolerance`` are closed too."""
    if len(iv) == 0:
        return iv.reshape(0, 2)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s - out[-1][1] < max(tolerance, 1) or s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out, dtype=np.int64)


def _subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Parts of intervals ``a`` not covered by ``b`` (both merged, sorted)."""
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def gff_transcripts(rows: list[GffRow], gtf: bool, scheme: LabelScheme,
                    path: str = "annotation") -> list[Transcript]:
    """Group CDS/exon/UTR/intron rows into transcripts and derive introns.

    GFF3: rows are grouped by Parent (each, if several); a Parent may be an mRNA or,
    as in SGD, a gene. GTF: by ``transcript_id``. A feature of an ncRNA type
    (``scheme.gff['ncrna_types']``, or any ``*RNA`` type but mRNA) without parts is a
    one-exon non-coding transcript.
    """
    g = scheme.gff
    cds_t, exon_t, utr_t, intron_t = (set(g[k]) for k in ("cds_types", "exon_types",
                                                          "utr_types", "intron_types"))
    part_types = cds_t | exon_t | utr_t | intron_t
    ids: dict[str, GffRow] = {}
    if not gtf:
        for r in rows:
            if "ID" in r.attrs and r.type not in part_types:
                ids.setdefault(r.attrs["ID"], r)
    groups: dict[str, list[GffRow]] = {}
    for r in rows:
        if r.type not in part_types:
            continue
        if gtf:
            key = r.attrs.get("transcript_id")
            if not key:
                raise SemisegError(f"{path}:{r.lineno}: GTF {r.type} row has no transcript_id")
            groups.setdefault(key, []).append(r)
            continue
        parent = r.attrs.get("Parent")
        if parent is None:  # a part with no parent stands alone
            groups.setdefault(f"\0line{r.lineno}", []).append(r)
            continue
        for key in r.attrs.get(_PARENTS, parent.split(",")):  # an exon may be shared
            # by several transcripts
            if key not in ids:
                raise SemisegError(
                    f"{path}:{r.lineno}: Parent {key!r} is not the ID of any feature"
                )
            groups.setdefault(key, []).append(r)
    out: list[Transcript] = []
    ncrna = set(g["ncrna_types"])
    for key, parts in groups.items():
        chrom, strand = parts[0].chrom, parts[0].strand
        for r in parts:
            if r.chrom != chrom or r.strand != strand:
                raise SemisegError(
                    f"{path}:{r.lineno}: parts of {key!r} disagree on chromosome or strand"
                )
        parent = ids.get(key)
        ttype = parent.type if parent else ("transcript" if gtf else parts[0].type)
        biotype = None
        if gtf:
            for k in ("transcript_biotype", "transcript_type", "gene_biotype", "gene_type"):
                biotype = next((r.attrs[k] for r in parts if k in r.attrs), None)
                if biotype:
                    break
        tid = key if not key.startswith("\0") else f"{parts[0].type}@{path}:{parts[0].lineno}"
        out.append(Transcript(
            id=tid, chrom=chrom, strand=strand, type=ttype,
            cds=_iv((r.start, r.end) for r in parts if r.type in cds_t),
            exons=_iv((r.start, r.end) for r in parts if r.type in exon_t),
            utrs=_iv((r.start, r.end) for r in parts if r.type in utr_t),
            introns=_iv((r.start, r.end) for r in parts if r.type in intron_t),
            ncrna=_is_ncrna(biotype, ncrna) if gtf and biotype else
            (gtf or _is_ncrna(ttype, ncrna)),
            clipped=any(r.clipped for r in parts),
        ))
    if not gtf:
        for fid, r in ids.items():
            if _is_ncrna(r.type, ncrna) and fid not in groups:
                out.append(Transcript(id=fid, chrom=r.chrom, strand=r.strand, type=r.type,
                                      cds=_iv([]), exons=_iv([(r.start, r.end)]), utrs=_iv([]),
                                      ncrna=True, clipped=r.clipped))
    for t in out:
        _derive_introns(t, scheme.min_intron)
    out.sort(key=lambda t: (t.chrom, t.cds[0, 0] if t.coding else _first(t)))
    return out


CODING_TRANSCRIPT_TYPES = ("mRNA",)
CODING_BIOTYPES = ("protein_coding", "mRNA")


def coding_features(rows: list[GffRow], gtf: bool) -> dict[str, GffRow]:
    """The features that say they are coding transcripts, by ID (GFF3: type ``mRNA``;
    GTF: ``transcript`` rows whose transcript/gene biotype is protein_coding), whether
    or not any CDS row hangs under them: the training clean-up masks those without one
    (genome/cleanup.py), which the labels would otherwise call intergenic."""
    out: dict[str, GffRow] = {}
    for r in rows:
        if gtf:
            tid = r.attrs.get("transcript_id")
            bio = next((r.attrs[k] for k in ("transcript_biotype", "transcript_type",
                                               "gene_biotype", "gene_type") if k in r.attrs),
                       None)
            if r.type == "transcript" and tid and bio in CODING_BIOTYPES:
                out.setdefault(tid, r)
        elif r.type in CODING_TRANSCRIPT_TYPES and "ID" in r.attrs:
            out.setdefault(r.attrs["ID"], r)
    return out


def _is_ncrna(kind: str, ncrna: set[str]) -> bool:
    """A non-coding RNA type/biotype: listed in the scheme, or *RNA other than mRNA."""
    return kind in ncrna or (kind.endswith("RNA") and kind != "mRNA")


def _first(t: Transcript) -> int:
    parts = [a for a in (t.cds, t.exons, t.utrs, t.introns) if len(a)]
    return int(min(a[0, 0] for a in parts)) if parts else 0


def _derive_introns(t: Transcript, min_intron: int) -> None:
    explicit = _merge(t.introns)
    blocks = _merge(np.concatenate([t.cds, t.exons, t.utrs]))
    introns, short = [], []
    for (_, e0), (s1, _) in zip(blocks[:-1], blocks[1:]):
        covered = len(_subtract(np.array([[e0, s1]]), explicit)) == 0
        (introns if (s1 - e0 >= min_intron or covered) else short).append((e0, s1))
    derived = np.array(introns, dtype=np.int64).reshape(-1, 2)
    t.introns = _merge(np.concatenate([derived, explicit]))  # keeps lone intron rows
    t.short_gaps = np.array(short, dtype=np.int64).reshape(-1, 2)


def transcript_parts(t: Transcript) -> list[tuple[int, int, str]]:
    """(start, end, role) pieces of a transcript: CDS, UTR, ncRNA and intron.

    Exonic positions are CDS where a CDS row (or a short gap between CDS rows) covers
    them, else UTR in a coding transcript and ncRNA in a non-coding RNA. Other transcripts
    without CDS (pseudogenic_transcript, a bare "transcript", an mRNA without CDS) give
    no parts. In GTF a transcript without CDS is a non-coding RNA when its biotype says
    so (or when it has no biotype attribute).
    """
    if not t.coding and not t.ncrna:
        if len(t.exons) or len(t.utrs):
            return []
        # intron rows on their own (as semiseg writes a lone intron)
        return [(int(s), int(e), "intron") for s, e in t.introns]
    exonic = _merge(np.concatenate([t.cds, t.exons, t.utrs, t.short_gaps]))
    out: list[tuple[int, int, str]] = []
    if t.coding:
        # a short gap is CDS only between two CDS rows (a frameshift), else like its exons
        ends, starts = set(t.cds[:, 1].tolist()), set(t.cds[:, 0].tolist())
        fill = [g for g in t.short_gaps.tolist() if g[0] in ends and g[1] in starts]
        cds = _merge(np.concatenate([t.cds, np.array(fill, np.int64).reshape(-1, 2)]))
        out += [(int(s), int(e), "CDS") for s, e in cds]
        out += [(int(s), int(e), "UTR") for s, e in _subtract(exonic, cds)]
    else:
        out += [(int(s), int(e), "ncRNA") for s, e in exonic]
    out += [(int(s), int(e), "intron") for s, e in t.introns]
    return out

