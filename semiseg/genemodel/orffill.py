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

from ..genome.codes import STARTS, STOPS, reverse_complement_codes
from .frames import BASES, base_codes


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


_STOP = np.zeros(65, bool)  # codon id + 1 -> stop codon (id -1: not ACGT)
_STOP[[_id(c) + 1 for c in STOPS["+"]]] = True


def plus_orfs(codes: np.ndarray, min_codons: int) -> list[tuple[int, int]]:
    """[start, end) of the plus-strand ORFs of the base codes `codes`, first ATG to stop
    codon (included), at least min_codons codons long; by frame (position mod 3), then
    position."""
    cid = _codons(codes)
    atg = np.flatnonzero(cid == _id(STARTS["+"]))
    stop = np.flatnonzero(_STOP[cid + 1])
    # all three frames in one search: positions keyed by frame, then position
    span = len(codes) + 3
    skey = np.sort(stop % 3 * span + stop)
    akey = np.sort(atg % 3 * span + atg)
    k = np.searchsorted(skey, akey)  # the first stop keyed after each ATG ...
    hit = k < len(skey)
    akey, k = akey[hit], k[hit]
    same = skey[k] // span == akey // span  # ... in the ATG's own frame
    akey, k = akey[same], k[same]
    _, first = np.unique(k, return_index=True)  # each stop's first ATG
    a, end = akey[first] % span, skey[k[first]] % span + 3
    keep = end - a >= 3 * min_codons
    return list(zip(a[keep].tolist(), end[keep].tolist()))


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
        comp = reverse_complement_codes(codes)
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
