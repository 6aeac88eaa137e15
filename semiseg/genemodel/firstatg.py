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

from ..genome.codes import STARTS, STOPS


def _walk(s: bytes, labels: np.ndarray, q: int, step: int, strand: str, background: int):
    """Codons beginning at q, q + step, ... (step +-3), while inside the sequence, over
    background labels and not a stop of `strand`: where the last start codon met begins
    (None: none)."""
    stops = [c.encode() for c in STOPS[strand]]
    start, best = STARTS[strand].encode(), None
    while 0 <= q and q + 3 <= len(labels) and s[q:q + 3] not in stops \
            and (labels[q:q + 3] == background).all():
        if s[q:q + 3] == start:
            best = q
        q += step
    return best


def extend_starts(labels: np.ndarray, seq: str, cds: dict[str, int],
                  background: int) -> list[tuple[int, int, int, int]]:
    """Extend gene starts in `labels` (1-bp scheme labels of one chromosome, changed in
    place) to the first ATG of their ORF. `seq`: the chromosome's sequence; `cds`: the
    CDS label of each strand ("+", "-") that has one. Returns (start, end) of each
    extension and of the whole CDS run after it, in sequence order."""
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
                and s[a:a + 3] == STARTS["+"].encode():
            f = _walk(s, labels, a - 3, -3, "+", background)
            if f is not None:
                labels[f:a] = c
                out.append((f, a, f, b))
        elif c == cds.get("-") and b < n and labels[b] == background \
                and s[b - 3:b] == STARTS["-"].encode():
            f = _walk(s, labels, b, 3, "-", background)
            if f is not None:
                labels[b:f + 3] = c
                out.append((b, f + 3, a, f + 3))
    return out
