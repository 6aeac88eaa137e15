"""Splice-site signal features: position weight matrices counted from the training genes.

A genome has few introns (chrII of yeast: 23 usable ones), too few for a convolution to
learn splice signals from the CRF's gradient: the gene model trained that way placed
introns by reading frames alone, fused neighbouring genes through false introns and
found none of its own training introns. What a gene finder does instead is count: the
bases around the training donors and acceptors, in the transcript's direction, give a
position weight matrix whose log-odds against the genome's base frequencies scores any
candidate site. Those scores become four input channels of the gene encoder
(model.GeneEncoder): donor and acceptor on each strand, at the intron's splice base.

Windows (transcript direction, offsets from the splice base, which is the intron's first
base for a donor and its last base for an acceptor):

    donor      -3 .. +7   (3 exon bases, the GT, then 6 more intron bases)
    acceptor  -24 .. +3   (23 intron bases before the AG's G, the G, then 3 exon bases)

`count_pwms` reads the gold frame codes of the training windows (genome/frames.py: the
1-bp donor and acceptor labels) and their one-hot sequence; `SpliceSignals` holds the
log-odds as buffers (saved with the model) and computes the channels as convolutions of
the one-hot sequence, so a model trained with them annotates with the same ones.
A site's score is its log-odds divided by SCALE (about +-1 for a real or a random site).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

N_SPLICE = 4  # donor+, acceptor+, donor-, acceptor-
DONOR = (3, 8)       # bases before the splice base, bases from it on (incl.)
ACCEPTOR = (24, 4)
PSEUDO = 0.5
SCALE = 10.0


def _windows(onehot: np.ndarray, pos: np.ndarray, before: int, after: int,
             minus: bool) -> np.ndarray:
    """(n, before + after, 4) one-hot windows in the transcript's direction around `pos`
    (plus: pos - before .. pos + after - 1; minus: the reverse complement of
    pos - after + 1 .. pos + before), zero where they leave the sequence."""
    L = before + after
    out = np.zeros((len(pos), L, 4), np.float32)
    T = len(onehot)
    for i, p in enumerate(pos):
        lo = p - before if not minus else p - after + 1
        a, b = max(lo, 0), min(lo + L, T)
        if a >= b:
            continue
        w = np.zeros((L, 4), np.float32)
        w[a - lo:b - lo] = onehot[a:b]
        out[i] = w[::-1, ::-1] if minus else w  # A C G T reversed is the complement
    return out


def count_pwms(onehots, golds, layout) -> tuple[np.ndarray, np.ndarray, dict]:
    """Log-odds matrices (donor (4, Ld), acceptor (4, La)) from training windows.

    onehots: per window a (T, 4) array (A, C, G, T); golds: per window its gold frame
    codes (T,). Site counts get PSEUDO per base; the background is the windows' base
    composition. Returns the matrices and {"donors": n, "acceptors": n}.
    """
    kinds = [layout.kind_names[k] for k in layout.kind]
    lab = {name: np.asarray([i for i, k in enumerate(kinds) if k == name])
           for name in ("donor+", "acceptor+", "donor-", "acceptor-")}
    counts = {"donor": np.zeros((sum(DONOR), 4)), "acceptor": np.zeros((sum(ACCEPTOR), 4))}
    n = {"donors": 0, "acceptors": 0}
    bg = np.zeros(4)
    for x, y in zip(onehots, golds):
        x = np.asarray(x, np.float32)[:, :4]
        y = np.asarray(y)
        bg += x.sum(0)
        for site, span in (("donor", DONOR), ("acceptor", ACCEPTOR)):
            for strand in "+-":
                codes = lab.get(f"{site}{strand}")
                if codes is None or not len(codes):
                    continue
                pos = np.flatnonzero(np.isin(y, codes))
                if not len(pos):
                    continue
                w = _windows(x, pos, *span, minus=strand == "-")
                counts[site] += w.sum(0)
                n[f"{site}s"] += len(pos)
    bg = (bg + 1.0) / (bg.sum() + 4.0)
    mats = []
    for site in ("donor", "acceptor"):
        c = counts[site] + PSEUDO
        p = c / c.sum(1, keepdims=True)
        mats.append(np.log(p / bg[None, :]).T.astype(np.float32))  # (4, L)
    return mats[0], mats[1], n


class SpliceSignals(nn.Module):
    """The four splice-site channels of a one-hot sequence (B, T, 4) -> (B, T, 4):
    donor+, acceptor+, donor-, acceptor- scores at each base read as that splice base."""

    def __init__(self):
        super().__init__()
        self.register_buffer("donor", torch.zeros(4, sum(DONOR)))
        self.register_buffer("acceptor", torch.zeros(4, sum(ACCEPTOR)))

    def set(self, donor: np.ndarray, acceptor: np.ndarray) -> None:
        self.donor.copy_(torch.as_tensor(donor))
        self.acceptor.copy_(torch.as_tensor(acceptor))

    @staticmethod
    def _score(x: Tensor, pwm: Tensor, before: int, minus: bool) -> Tensor:
        L = pwm.shape[1]
        if minus:  # the site read on the other strand: reverse complement the matrix
            pwm = pwm.flip(0).flip(1)
            before = L - 1 - before
        w = pwm.to(x.dtype)[None]  # (1, 4, L)
        out = nn.functional.conv1d(nn.functional.pad(x, (before, L - 1 - before)), w)
        return out[:, 0]

    def forward(self, onehot: Tensor) -> Tensor:
        x = onehot.transpose(1, 2).float()
        chans = [self._score(x, self.donor, DONOR[0], False),
                 self._score(x, self.acceptor, ACCEPTOR[0], False),
                 self._score(x, self.donor, DONOR[0], True),
                 self._score(x, self.acceptor, ACCEPTOR[0], True)]
        return (torch.stack(chans, -1) / SCALE).to(onehot.dtype)
