"""Gold frame labels from the transcripts of an annotation: :func:`frame_gold` makes a
chromosome's per-base internal label codes (genemodel/frames.py: :data:`UNKNOWN`,
``INTRON_ANY``, absolute frames), :class:`FrameGold` serves them by window as an
Annotation does, and :class:`GoldReport` counts what became of the transcripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import SemisegError
from ..genome.cleanup import merged
from ..genome.codes import STOPS, reverse_complement
from .frames import EXONS, INTRON_ANY, SPLICE_LEFT, SPLICE_RIGHT, UNKNOWN, FrameLayout

# (holds the start codon, holds the stop codon) -> index into EXONS
EXON_TYPE = {(True, True): EXONS.index("single"), (True, False): EXONS.index("initial"),
             (False, False): EXONS.index("internal"), (False, True): EXONS.index("terminal")}


@dataclass
class GoldReport:
    """What became of the coding transcripts when gold frame labels were made."""

    kept: int = 0
    stop_added: int = 0  # CDS given without its stop codon (GTF style): the stop appended
    partial: dict = field(default_factory=dict)  # reason -> count (kept as unknown)

    def line(self) -> str:
        bad = sum(self.partial.values())
        why = ", ".join(f"{n} {k}" for k, n in sorted(self.partial.items()))
        return (f"reading frames: {self.kept} coding transcripts used"
                + (f" ({self.stop_added} with the stop codon after the CDS rows)"
                   if self.stop_added else "")
                + (f"; {bad} left unknown in training ({why})" if bad else ""))


def _not_a_gene(rna: str, blocks: list[tuple[int, int]], upper: str, strand: str,
                min_intron: int) -> str | None:
    """Why a coding transcript (its spliced CDS `rna`, its CDS `blocks`) is no gold gene
    structure, or None when it is one."""
    gaps = [b0 - a1 for (_, a1), (b0, _) in zip(blocks[:-1], blocks[1:])]
    if gaps and min(gaps) < min_intron:
        return "gap shorter than min_intron inside the CDS"
    if len(rna) % 3:
        return "CDS not a multiple of 3"
    if not rna.startswith("ATG"):
        return "no start codon"
    if rna[-3:] not in STOPS["+"]:
        return "no stop codon"
    if any(rna[i:i + 3] in STOPS["+"] for i in range(0, len(rna) - 3, 3)):
        return "in-frame stop codon inside"
    if len(blocks) > 1 and min(blocks[0][1] - blocks[0][0],
                               blocks[-1][1] - blocks[-1][0]) <= 3:
        return "start or stop codon split by or next to an intron"
    if any(upper[a1:a1 + 2] != SPLICE_LEFT[strand][1]
           or upper[b0 - 2:b0] != SPLICE_RIGHT[strand][1]
           for (_, a1), (b0, _) in zip(blocks[:-1], blocks[1:])):
        return "an intron not GT..AG"
    return None


def frame_gold(layout: FrameLayout, scheme_labels: np.ndarray, transcripts, seq: str,
               min_intron: int = 20, report: GoldReport | None = None) -> np.ndarray:
    """Gold codes (int16, one per base) for one chromosome.

    scheme_labels: the scheme labels of the chromosome's bases (Annotation.labels), -1
        unknown. Outside labels map to their internal label; coding transcripts whose
        spliced CDS is a whole number of codons, begins with ATG, ends with a stop codon
        (appended when the CDS rows stop just before one) and has no other in-frame stop
        give start/CDS/stop codes with absolute frames and intron codes of any frame.
        Any other coding transcript is unknown (the model may label it freely while
        training); of overlapping coding transcripts the longest is kept and the others
        are unknown where it does not reach.
    """
    report = report if report is not None else GoldReport()
    n = len(scheme_labels)
    outside = {layout.scheme_label[c]: c for c in range(len(layout))
               if layout.frame[c] < 0 and layout.base[c] == c}  # gold names no run tail
    codes = np.full(n, UNKNOWN, np.int16)
    for lab, c in outside.items():
        codes[scheme_labels == lab] = c
    conflict = np.zeros(n, bool)
    genes: list[tuple[int, int, np.ndarray]] = []
    upper = seq.upper()
    for t in transcripts:
        if not t.coding or t.strand not in layout.strands:
            continue
        blocks = [(int(a), int(b)) for a, b in merged(t.cds)]
        spliced = "".join(upper[a:b] for a, b in blocks)
        rna = spliced if t.strand == "+" else reverse_complement(spliced)
        span0, span1 = blocks[0][0], blocks[-1][1]
        if rna[-3:] not in STOPS["+"]:
            nxt = (upper[span1:span1 + 3] if t.strand == "+"
                   else reverse_complement(upper[max(0, span0 - 3):span0]))
            if len(rna) % 3 == 0 and nxt in STOPS["+"]:
                if t.strand == "+":
                    blocks[-1] = (blocks[-1][0], span1 + 3)
                else:
                    blocks[0] = (span0 - 3, blocks[0][1])
                rna += nxt
                report.stop_added += 1
        reason = _not_a_gene(rna, blocks, upper, t.strand, min_intron)
        lo, hi = blocks[0][0], blocks[-1][1]
        if reason is not None:
            report.partial[reason] = report.partial.get(reason, 0) + 1
            codes[lo:hi] = UNKNOWN
            conflict[lo:hi] = True
            continue
        report.kept += 1
        s = t.strand
        mine = np.full(hi - lo, INTRON_ANY[s], np.int16)
        order = blocks if s == "+" else blocks[::-1]  # transcript order
        done, total = 0, len(rna)
        typed = layout.has_exon_types
        for j, (a, b) in enumerate(order):
            # the exon's type (frames.EXONS) where the layout has them
            e = (EXON_TYPE[j == 0, j == len(order) - 1]) if typed else -1
            for p in range(a, b):
                k = done + (p - a if s == "+" else b - 1 - p)  # index in the RNA
                cpos = k % 3
                cs = p - cpos if s == "+" else p - (2 - cpos)  # forward triplet start
                f = cs % 3
                kind = "start" if k < 3 else "stop" if k >= total - 3 else "CDS"
                mine[p - lo] = layout.index(f"{kind}{s}", f, e if kind == "CDS" else -1)
            done += b - a
        for (_, a1), (b0, _) in zip(blocks[:-1], blocks[1:]):  # the splice-site bases
            before, after = layout.frame[mine[a1 - 1 - lo]], layout.frame[mine[b0 - lo]]
            mine[a1 - lo] = layout.index(f"{SPLICE_LEFT[s][0]}{s}", (before + 1) % 3)
            mine[b0 - 1 - lo] = layout.index(f"{SPLICE_RIGHT[s][0]}{s}", after)
        genes.append((lo, hi, mine))
    # overlapping coding transcripts cannot all be genes of one segmentation: the longest
    # of each overlapping group is kept, the others are unknown where it does not reach
    taken = np.zeros(n, bool)
    kept = []
    for lo, hi, mine in sorted(genes, key=lambda g: (g[0] - g[1], g[0])):
        if taken[lo:hi].any():
            conflict[lo:hi] = True
            report.kept -= 1
            report.partial["overlapping a longer gene"] = (
                report.partial.get("overlapping a longer gene", 0) + 1)
            continue
        taken[lo:hi] = True
        kept.append((lo, hi, mine))
    conflict &= ~taken
    for lo, hi, mine in kept:
        codes[lo:hi] = mine
    codes[conflict] = UNKNOWN
    return codes


class FrameGold:
    """Gold codes read like an Annotation: ``labels(chrom, start, end)`` gives the codes
    of [start, end) with frames relative to `start`. A chromosome's codes are made the
    first time it is asked for (and `report` then counts its transcripts)."""

    def __init__(self, layout: FrameLayout, annotation, transcripts, fasta,
                 min_intron: int = 20):
        self.layout = layout
        self.report = GoldReport()
        self.codes: dict[str, np.ndarray] = {}
        self._annotation, self._fasta, self._min_intron = annotation, fasta, min_intron
        self._transcripts: dict[str, list] = {}
        for t in transcripts:
            self._transcripts.setdefault(t.chrom, []).append(t)

    @property
    def transcripts(self) -> list:
        """The transcripts the codes are made from (every chromosome's)."""
        return [t for ts in self._transcripts.values() for t in ts]

    def _chrom(self, chrom: str) -> np.ndarray:
        if chrom not in self.codes:
            size = self._annotation.chrom_sizes[chrom]
            self.codes[chrom] = frame_gold(
                self.layout, self._annotation.labels(chrom, 0, size),
                self._transcripts.get(chrom, []), self._fasta.fetch(chrom, 0, size),
                min_intron=self._min_intron, report=self.report)
        return self.codes[chrom]

    def safe_cuts(self, chrom: str) -> np.ndarray:
        """(L + 1,) bool: whether a window may begin or end at boundary p of the
        chromosome (between bases p - 1 and p): not inside a start or stop codon, and not
        inside an intron within the shortest inside segment of its splice bases. A window
        edge there leaves a piece shorter than the label's fixed or minimum duration, or
        a splice base without its dinucleotide, which no segmentation of the window can
        hold; deeper inside an intron each window holds a partial intron."""
        codes = self._chrom(chrom)
        lay = self.layout
        C = len(lay)
        # one group per rigid piece: a codon (its label, one frame throughout) or a whole
        # intron of one strand (splice bases and the inside, coded INTRON_ANY), as a
        # table indexed by code - lo (the negative codes UNKNOWN, INTRON_ANY included)
        lo = min(UNKNOWN, *INTRON_ANY.values())
        table = np.full(C - lo, -1, np.int64)
        for c in range(C):
            kind = lay.kind_names[lay.kind[c]][:-1]
            if kind in ("start", "stop"):
                table[c - lo] = c
            elif kind in ("donor", "acceptor", "intron"):
                table[c - lo] = C + "+-".index(lay.strand[c])
        for st, code in INTRON_ANY.items():
            table[code - lo] = C + "+-".index(st)
        group = table[codes.astype(np.int64) - lo]
        ok = np.ones(len(codes) + 1, bool)
        ok[1:-1] = ~((group[1:] == group[:-1]) & (group[1:] >= 0))
        # ...except inside a long intron: a cut leaving at least m bases of the inside on
        # both sides (m the shortest inside segment; the splice bases keep their
        # dinucleotide) is a partial intron at each window's end, which the grammar
        # holds. Without this no training window held a piece of an intron longer than
        # the window, so the model never saw a long intron.
        m = max(2, lay.min_intron - 2)
        intronic = group >= C
        edge = np.flatnonzero(np.diff(np.r_[False, intronic, False].astype(np.int8)))
        for a, b in zip(edge[::2], edge[1::2]):  # the intron is [a, b), splice bases too
            if np.unique(group[a:b]).size == 1:  # one intron (not two strands' overlap)
                ok[a + 1 + m:b - m] = True
        return ok

    def labels(self, chrom: str, start: int = 0, end: int | None = None,
               resolution: int = 1) -> np.ndarray:
        if resolution != 1:
            raise SemisegError("crf.frames: gold frame labels exist at 1 bp only")
        codes = self._chrom(chrom)[start:end].astype(np.int64)
        return self.layout.shift(codes, start)
