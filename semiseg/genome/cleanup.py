"""Annotation clean-up before training labels (docs/annotations.md).

Real annotations hold what one segmentation cannot: the same transcript listed twice,
overlapping isoforms of one gene, genes nested in another's intron, and structures the
gene model's grammar forbids. Training on them as they are either paints a mixture of
isoforms or leaves a window whose gold path the model cannot take (log Z(gold) = -inf,
an infinite loss). `clean_transcripts` decides, per coding transcript, whether its
structure is used, and which stretches of the genome are unknown (label -1, masked: the
loss sums over every labelling there):

1. **duplicate**: transcripts with the same CDS chain (chromosome, strand, merged CDS
   intervals) are one transcript; the one with the smallest ID stands for them.
2. **defects** (each a reason, the first that applies): ``off the sequence end`` (a part
   runs past the end of the sequence; rows are clipped when read), ``no CDS`` (an mRNA,
   or a GTF transcript of coding biotype, without CDS rows), ``no strand`` (CDS rows on
   strand ``.``), ``CDS not a multiple of 3``;
   and with the gene model's grammar (``grammar=True``, crf.frames) also ``short
   intron`` (a gap between CDS rows shorter than the scheme's min_intron), ``no start
   codon``, ``no stop codon`` (neither the last CDS codon nor the three bases after it),
   ``in-frame stop codon``, ``short exon before intron`` / ``short exon after intron``
   (the first / last coding exon, stop codon included, has 3 bp or fewer: the start or
   stop codon would touch or straddle the intron), ``non-canonical splice site`` (an
   intron not GT..AG). (A codon split by an intron whose genomic triplet reads a stop,
   TA|GT.., is allowed: the sequence mask forbids CDS only on a stop triplet's last
   base, which there is the donor's; genemodel/seqmask.py.)
3. **overlapping isoform**: coding transcripts whose extents overlap (either strand; a
   gene inside another's intron counts) form a locus; of its transcripts without a
   defect the one with the longest CDS is used (ties: the smallest ID). Every other
   transcript of the locus is masked where it disagrees with the chosen one (another
   strand, frame or part: CDS, intron, UTR; outside the chosen one's extent it always
   does), except on the chosen CDS chain itself, which stays whole; a transcript without
   CDS is masked only beyond the chosen one's extent. Masking only widens what the gold
   path may take, so the chosen gene's own path stays allowed. A locus with no usable
   transcript is masked over all of its transcripts' extents.

Non-coding RNAs and other transcripts without CDS (pseudogenic_transcript, ...) pass
through unchanged. No torch here: the check of the windows' gold paths against the
model's own log-partition is in semiseg/genemodel/annotation_check.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from ._util import runs
from .codes import STARTS, STOPS, reverse_complement
from .gff import GffRow, Transcript

# reasons, in the order they are counted and printed
DUPLICATE = "duplicate"
ISOFORM = "overlapping isoform"
OFF_END = "off the sequence end"
NO_CDS = "no CDS"
NO_STRAND = "no strand"
NOT_TRIPLET = "CDS not a multiple of 3"
SHORT_INTRON = "short intron"
NO_START = "no start codon"
NO_STOP = "no stop codon"
INFRAME_STOP = "in-frame stop codon"
SHORT_FIRST = "short exon before intron"
SHORT_LAST = "short exon after intron"
SPLICE = "non-canonical splice site"
GOLD_PATH = "gold path not allowed"  # found by annotation_check (the model's log Z)
REASONS = (DUPLICATE, ISOFORM, OFF_END, NO_CDS, NO_STRAND, NOT_TRIPLET, SHORT_INTRON, NO_START,
           NO_STOP, INFRAME_STOP, SHORT_FIRST, SHORT_LAST, SPLICE, GOLD_PATH)

# the splice dinucleotides at an intron's left / right end (genome order) per strand
_LEFT = {"+": "GT", "-": "CT"}
_RIGHT = {"+": "AG", "-": "AC"}


@dataclass
class Removed:
    """A transcript whose structure is not used for training, and why."""

    id: str
    chrom: str
    start: int  # its extent, 0-based half-open
    end: int
    reason: str
    detail: str = ""  # e.g. "same CDS as t1807", "locus of t6350"


@dataclass
class Cleanup:
    """The outcome of `clean_transcripts` (and of the gold-path check that follows)."""

    total: int = 0  # coding transcripts (and coding features without CDS) looked at
    kept: list = field(default_factory=list)  # Transcripts whose structure is used
    removed: list = field(default_factory=list)  # Removed
    masks: dict = field(default_factory=dict)  # chrom -> [(start, end)] unknown
    spans: dict = field(default_factory=dict)  # kept coding id -> (chrom, lo, hi) gene span
    dropped_windows: list = field(default_factory=list)  # "chrom:start-end (why)"

    def counts(self) -> dict[str, int]:
        n: dict[str, int] = {}
        for r in self.removed:
            n[r.reason] = n.get(r.reason, 0) + 1
        return {k: n[k] for k in REASONS if k in n}

    def line(self) -> str:
        """``masked 7 of 924 transcripts: 3 duplicate, ...; dropped 0 windows``."""
        c = self.counts()
        why = ", ".join(f"{n} {k}" for k, n in c.items())
        return (f"masked {len(self.removed)} of {self.total} transcripts"
                + (f": {why}" if why else "") + f"; dropped {len(self.dropped_windows)} "
                f"window{'s' if len(self.dropped_windows) != 1 else ''}")

    def named(self, limit: int = 8) -> list[str]:
        """One line per reason naming its transcripts (the first `limit`)."""
        out = []
        for reason in self.counts():
            rs = [r for r in self.removed if r.reason == reason]
            names = ", ".join(f"{r.id} ({r.chrom}:{r.start}-{r.end}"
                              + (f", {r.detail}" if r.detail else "") + ")"
                              for r in rs[:limit])
            more = f" and {len(rs) - limit} more" if len(rs) > limit else ""
            out.append(f"  {reason} ({len(rs)}): {names}{more}")
        out += [f"  dropped window {w}" for w in self.dropped_windows[:limit]]
        return out

    def tsv(self) -> str:
        """Every removed transcript: id, chrom, start, end (0-based), reason, detail."""
        lines = ["id\tchrom\tstart\tend\treason\tdetail"]
        lines += [f"{r.id}\t{r.chrom}\t{r.start}\t{r.end}\t{r.reason}\t{r.detail}"
                  for r in self.removed]
        lines += [f"window\t{w}\t\t\tdropped\t" for w in self.dropped_windows]
        return "\n".join(lines) + "\n"

    def mask(self, chrom: str, start: int, end: int) -> None:
        if end > start:
            self.masks.setdefault(chrom, []).append((int(start), int(end)))


def merged(iv) -> list[tuple[int, int]]:
    """Sorted union of [start, end) intervals (touching ones joined)."""
    out: list[list[int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _extent(t: Transcript) -> tuple[int, int] | None:
    parts = [a for a in (t.cds, t.exons, t.utrs, t.introns) if len(a)]
    if not parts:
        return None
    return (int(min(a[:, 0].min() for a in parts)), int(max(a[:, 1].max() for a in parts)))


@dataclass
class _Entry:
    t: Transcript | None
    id: str
    chrom: str
    lo: int  # extent (gene span with the stop codon, UTRs, exons)
    hi: int
    reason: str | None
    cds_len: int = 0
    span: tuple[int, int] | None = None  # CDS blocks with the stop codon


def gene_blocks(t: Transcript, seq: str | None) -> tuple[list[tuple[int, int]], str, bool]:
    """(merged CDS blocks, spliced CDS read 5'->3', whether the stop codon was appended):
    the stop codon is taken after the CDS rows (GTF style) when the CDS is a whole number
    of codons, does not end in a stop and the next three bases on its strand are one."""
    blocks = merged(t.cds)
    if seq is None:
        return blocks, "", False
    spliced = "".join(seq[a:b] for a, b in blocks)
    rna = spliced if t.strand == "+" else reverse_complement(spliced)
    lo, hi = blocks[0][0], blocks[-1][1]
    if len(rna) % 3 == 0 and rna[-3:] not in STOPS["+"]:
        nxt = (seq[hi:hi + 3] if t.strand == "+" else reverse_complement(seq[max(0, lo - 3):lo]))
        if nxt in STOPS["+"]:
            if t.strand == "+":
                blocks[-1] = (blocks[-1][0], hi + 3)
            else:
                blocks[0] = (lo - 3, blocks[0][1])
            return blocks, rna + nxt, True
    return blocks, rna, False


def defect(t: Transcript, seq: str | None, min_intron: int) -> str | None:
    """The first reason (REASONS) a coding transcript cannot be a gold gene, or None.
    Without `seq` only the grammar-free checks run (off the end, multiple of 3)."""
    if t.clipped:
        return OFF_END
    if t.strand not in ("+", "-"):
        return NO_STRAND
    cds = merged(t.cds)
    if sum(b - a for a, b in cds) % 3:
        return NOT_TRIPLET
    if seq is None:
        return None
    blocks, rna, _ = gene_blocks(t, seq)
    gaps = [b0 - a1 for (_, a1), (b0, _) in pairwise(blocks)]
    if gaps and min(gaps) < min_intron:
        return SHORT_INTRON
    if not rna.startswith(STARTS["+"]):
        return NO_START
    if rna[-3:] not in STOPS["+"]:
        return NO_STOP
    if any(rna[i:i + 3] in STOPS["+"] for i in range(0, len(rna) - 3, 3)):
        return INFRAME_STOP
    if len(blocks) > 1:
        first, last = blocks[0][1] - blocks[0][0], blocks[-1][1] - blocks[-1][0]
        if t.strand == "-":
            first, last = last, first
        if first <= 3:
            return SHORT_FIRST
        if last <= 3:
            return SHORT_LAST
    s = t.strand
    for (_, a1), (b0, _) in pairwise(blocks):
        if seq[a1:a1 + 2] != _LEFT[s] or seq[b0 - 2:b0] != _RIGHT[s]:
            return SPLICE
    return None


def clean_transcripts(transcripts: Iterable[Transcript], chrom_sizes: Mapping[str, int],
                      fetch: Callable[[str], str] | None = None, min_intron: int = 20,
                      coding: Mapping[str, GffRow] | None = None) -> Cleanup:
    """Duplicates merged, defects and overlapping isoforms set aside (module docstring).

    Args:
        transcripts: gff.gff_transcripts of an annotation (rows read with clip=True).
        chrom_sizes: sequence sizes (extents are cut there).
        fetch: chrom -> its whole sequence (any case); given, the grammar's checks run
            too (the gene model, crf.frames), else only the grammar-free ones.
        min_intron: the label scheme's min_intron.
        coding: gff.coding_features (coding transcripts by ID, with or without CDS).
    """
    out = Cleanup()
    coding = dict(coding or {})
    seqs: dict[str, str] = {}

    def seq_of(chrom: str) -> str | None:  # one chromosome held at a time
        if fetch is None:
            return None
        if chrom not in seqs:
            seqs.clear()
            s = fetch(chrom)
            seqs[chrom] = None if s is None else s.upper()
        return seqs[chrom]

    entries: list[_Entry] = []
    dups: dict[tuple, list[Transcript]] = {}
    seen = set()
    for t in transcripts:
        seen.add(t.id)
        if t.coding:
            key = (t.chrom, t.strand, tuple(merged(t.cds)))
            dups.setdefault(key, []).append(t)
            continue
        no_cds = not t.ncrna and (t.type in ("mRNA",) or t.id in coding)
        ext = _extent(t)
        if no_cds and ext is not None:
            entries.append(_Entry(None, t.id, t.chrom, *ext, NO_CDS))
        else:
            out.kept.append(t)  # ncRNA and other non-coding: as before
    for fid, r in coding.items():  # a coding feature with no part rows at all
        if fid not in seen and r.end > r.start:
            entries.append(_Entry(None, fid, r.chrom, r.start, r.end, NO_CDS))
    for group in dups.values():
        group.sort(key=lambda t: t.id)
        first = group[0]
        e = _coding_entry(first, seq_of(first.chrom), min_intron)
        entries.append(e)
        for t in group[1:]:
            ext = _extent(t)
            out.removed.append(Removed(t.id, t.chrom, *ext, DUPLICATE, f"same CDS as {first.id}"))
            for a, b in _outside((ext,), (e.lo, e.hi)):
                out.mask(t.chrom, a, b)
    out.total = len(entries) + len(out.removed)
    # loci: connected components of overlapping extents, per chromosome
    entries.sort(key=lambda e: (e.chrom, e.lo, e.hi, e.id))
    locus: list[_Entry] = []
    for e in entries + [None]:
        if locus and (e is None or e.chrom != locus[0].chrom
                      or e.lo >= max(x.hi for x in locus)):
            _settle(locus, out, chrom_sizes, seq_of(locus[0].chrom))
            locus = []
        if e is not None:
            locus.append(e)
    out.removed.sort(key=lambda r: (REASONS.index(r.reason), r.chrom, r.start, r.id))
    return out


def _coding_entry(t: Transcript, seq: str | None, min_intron: int) -> _Entry:
    blocks, _, _ = gene_blocks(t, seq) if not t.clipped else (merged(t.cds), "", False)
    span = (blocks[0][0], blocks[-1][1])
    ext = _extent(t)
    lo, hi = min(span[0], ext[0]), max(span[1], ext[1])
    reason = defect(t, seq, min_intron)
    return _Entry(t, t.id, t.chrom, lo, hi, reason,
                  cds_len=sum(b - a for a, b in merged(t.cds)), span=span)


def _outside(extents, keep: tuple[int, int] | None) -> list[tuple[int, int]]:
    """The parts of the extents outside `keep` (all of them without one)."""
    out = []
    for a, b in extents:
        if keep is None:
            out.append((a, b))
            continue
        if a < keep[0]:
            out.append((a, min(b, keep[0])))
        if b > keep[1]:
            out.append((max(a, keep[1]), b))
    return out


def _settle(locus: list[_Entry], out: Cleanup, chrom_sizes: Mapping[str, int],
            seq: str | None) -> None:
    """One locus: the chosen transcript kept, the others removed and masked where they
    disagree with it (a transcript without CDS: beyond the chosen one's extent)."""
    ok = [e for e in locus if e.reason is None]
    chosen = min(ok, key=lambda e: (-e.cds_len, e.id)) if ok else None
    if chosen is not None:
        out.kept.append(chosen.t)
        out.spans[chosen.id] = (chosen.chrom, chosen.span[0], chosen.span[1])
    size = chrom_sizes.get(locus[0].chrom, 0)
    lo = max(0, min(e.lo for e in locus))
    hi = min(size, max(e.hi for e in locus)) if size else max(e.hi for e in locus)
    mine = None if chosen is None else _per_base(chosen, lo, hi, seq)
    for e in locus:
        if e is chosen:
            continue
        detail = "" if chosen is None else f"locus of {chosen.id}"
        out.removed.append(Removed(e.id, e.chrom, e.lo, e.hi, e.reason or ISOFORM, detail))
        a, b = max(lo, e.lo), min(hi, e.hi)
        if b <= a:
            continue
        if mine is None:
            out.mask(e.chrom, a, b)
            continue
        if e.t is None:  # no CDS: it says nothing about the chosen one's extent
            for x, y in _outside([(a, b)], (chosen.lo, chosen.hi)):
                out.mask(e.chrom, x, y)
            continue
        other = _per_base(e, lo, hi, seq)
        coding = (mine >= 1) & (mine <= 6)  # the chosen CDS chain stays whole
        bad = (other != 0) & (other != mine) & ~coding
        for x, y, on in zip(*(v.tolist() for v in runs(bad))):
            if on:
                out.mask(e.chrom, lo + x, lo + y)


def _per_base(e: _Entry, lo: int, hi: int, seq: str | None) -> np.ndarray:
    """(hi - lo,) int8 codes of a coding transcript's structure: 0 outside its extent,
    CDS 1 + frame (+3 on the minus strand; the frame of the codon's genomic start mod 3,
    so two isoforms in one reading frame agree), intron 7 / 8, other exonic 9 / 10."""
    t = e.t
    minus = t.strand == "-"
    out = np.zeros(hi - lo, np.int8)
    blocks = gene_blocks(t, seq)[0] if seq is not None and not t.clipped else merged(t.cds)
    exonic = merged([*t.cds.tolist(), *t.exons.tolist(), *t.utrs.tolist(), *blocks])
    for (_, a1), (b0, _) in pairwise(exonic):
        out[max(lo, a1) - lo:max(lo, min(hi, b0)) - lo] = 7 + minus
    for a, b in exonic:
        out[max(lo, a) - lo:max(lo, min(hi, b)) - lo] = 9 + minus
    order = blocks if not minus else blocks[::-1]
    done = 0
    for a, b in order:
        p = np.arange(a, b)
        k = done + (p - a if not minus else b - 1 - p)  # index in the RNA
        cs = p - k % 3 if not minus else p - (2 - k % 3)
        sel = (p >= lo) & (p < hi)
        out[p[sel] - lo] = 1 + cs[sel] % 3 + 3 * minus
        done += b - a
    return out
