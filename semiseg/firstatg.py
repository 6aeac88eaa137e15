"""Start codons moved to the first ATG of their open reading frame (annotate.first_atg).

A ribosome scans from the 5' end of an mRNA and mostly starts at the first AUG, so a
gene's start codon is usually the upstream-most in-frame ATG after the previous in-frame
stop: SGD's chrII has 417 of its 433 single-exon genes so. The gene model sometimes
starts a gene at a later ATG of the same ORF. This step, applied to a chromosome's
decoded labels before they are written, moves each such start back: a CDS run whose 5'
neighbour is the background label (a gene's first exon) and which begins with a start
codon is extended upstream, codon by codon in its frame, over background bases only,
until the previous in-frame stop codon (or another label, or the sequence's end), to the
last ATG met on the way. Both strands (minus: the run's right end, CAT, stops TTA CTA
TCA). Runs whose 5' end is not a start codon (partial genes) are left alone, and the
extension never crosses another label, so genes never merge or overlap.
"""

from __future__ import annotations

import numpy as np

STOPS = {"+": (b"TAA", b"TAG", b"TGA"), "-": (b"TTA", b"CTA", b"TCA")}
START = {"+": b"ATG", "-": b"CAT"}


def extend_starts(labels: np.ndarray, seq: str, cds: dict[str, int], background: int,
                  res: int = 1) -> list[tuple[int, int, int, int]]:
    """Extend gene starts in `labels` (1-bp scheme labels of one chromosome, changed in
    place) to the first ATG of their ORF. `seq`: the chromosome's sequence; `cds`: the
    CDS label of each strand ("+", "-") that has one. Returns (start, end) of each
    extension and of the whole CDS run after it, in sequence order. Only 1-bp labels
    (`res` 1) carry codons."""
    if res != 1 or not cds:
        return []
    s = seq.upper().encode("ascii", "replace")
    n = len(labels)
    changed = np.flatnonzero(np.diff(labels)) + 1
    starts = np.concatenate([[0], changed])
    ends = np.concatenate([changed, [n]])
    orig = labels.copy()  # run identities; neighbours are read from `labels` as extended
    out = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        c = int(orig[a])
        if c == cds.get("+") and a > 0 and labels[a - 1] == background \
                and s[a:a + 3] == START["+"]:
            p, best = a - 3, a
            while p >= 0 and s[p:p + 3] not in STOPS["+"] \
                    and (labels[p:p + 3] == background).all():
                if s[p:p + 3] == START["+"]:
                    best = p
                p -= 3
            if best < a:
                labels[best:a] = c
                out.append((best, a, best, b))
        elif c == cds.get("-") and b < n and labels[b] == background \
                and s[b - 3:b] == START["-"]:
            p, best = b, b
            while p + 3 <= n and s[p:p + 3] not in STOPS["-"] \
                    and (labels[p:p + 3] == background).all():
                if s[p:p + 3] == START["-"]:
                    best = p + 3
                p += 3
            if best > b:
                labels[b:best] = c
                out.append((b, best, a, best))
    return out
