"""Long open reading frames in intergenic sequence called as genes (annotate.long_orfs).

SGD calls every open reading frame of 100 codons or more that does not overlap a known
gene an ORF (most of them "Dubious"), so a yeast annotation holds long ORFs that carry
little coding signal of their own, and the gene model leaves some of them intergenic.
This step, applied to a chromosome's decoded labels after `annotate.first_atg`, finds
every ORF of at least `min_codons` codons (its stop codon counted) on both strands, from
the first ATG after the previous in-frame stop to its stop codon, keeps those lying
wholly on background labels, and paints them as genes, the longest first, skipping any
that overlaps one already painted (ties: the leftmost first, then the plus strand). An
ORF needs its stop codon inside the sequence; a codon with a base other than A, C, G, T
is neither a start nor a stop.
"""

from __future__ import annotations

import numpy as np

from .genome.frames import BASES, STARTS, STOPS, base_codes


def _codons(b: np.ndarray) -> np.ndarray:
    """Codon id (16 a + 4 b + c) beginning at each position of the base codes `b`
    (frames.base_codes), -1 where a base is not ACGT or the codon runs past the end."""
    b = b.astype(np.int64)
    out = np.full(len(b), -1, np.int64)
    if len(b) >= 3:
        cid = 16 * b[:-2] + 4 * b[1:-1] + b[2:]
        bad = (b[:-2] == 4) | (b[1:-1] == 4) | (b[2:] == 4)
        out[:-2] = np.where(bad, -1, cid)
    return out


def _id(codon: str) -> int:
    return 16 * BASES.index(codon[0]) + 4 * BASES.index(codon[1]) + BASES.index(codon[2])


def plus_orfs(codes: np.ndarray, min_codons: int) -> list[tuple[int, int]]:
    """[start, end) of the plus-strand ORFs of the base codes `codes`, first ATG to stop
    codon (included), at least min_codons codons long."""
    cid = _codons(codes)
    atg = np.flatnonzero(cid == _id(STARTS["+"]))
    stop = np.flatnonzero(np.isin(cid, [_id(c) for c in STOPS["+"]]))
    out = []
    for frame in range(3):
        st, a = stop[stop % 3 == frame], atg[atg % 3 == frame]
        k = np.searchsorted(st, a)  # the first in-frame stop after each ATG
        a, k = a[k < len(st)], k[k < len(st)]
        _, first = np.unique(k, return_index=True)  # a is sorted: each stop's first ATG
        a, end = a[first], st[k[first]] + 3
        keep = end - a >= 3 * min_codons
        out += list(zip(a[keep].tolist(), end[keep].tolist()))
    return out


def long_orfs(labels: np.ndarray, seq: str, cds: dict[str, int], background: int,
              min_codons: int) -> list[tuple[int, int]]:
    """Paint ORFs of >= min_codons codons lying wholly on `background` in `labels` (1-bp
    scheme labels of one chromosome, changed in place) with the CDS label of their
    strand (`cds`: "+" and/or "-"). Returns the painted (start, end) pairs, sorted."""
    codes = base_codes(seq)
    n = len(labels)
    cand = []
    if "+" in cds:
        cand += [(a, e, "+") for a, e in plus_orfs(codes, min_codons)]
    if "-" in cds:  # the reverse complement: A C G T = 0..3 <-> 3..0, N stays 4
        comp = np.where(codes < 4, 3 - codes, 4)[::-1]
        cand += [(n - e, n - a, "-") for a, e in plus_orfs(comp, min_codons)]
    other = np.concatenate([[0], np.cumsum(labels != background)])
    cand = [c for c in cand if other[c[1]] == other[c[0]]]
    cand.sort(key=lambda c: (c[0] - c[1], c[0], c[2] != "+"))
    taken = np.zeros(n, bool)
    out = []
    for a, e, strand in cand:
        if taken[a:e].any():
            continue
        taken[a:e] = True
        labels[a:e] = cds[strand]
        out.append((a, e))
    return sorted(out)
