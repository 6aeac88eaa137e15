"""A long sequence's gene-model head terms, computed in chunks, equal to the whole
sequence's (issue 42: memory that does not grow with a chromosome).

FrameHead._terms over a whole sequence holds several (S, labels) tensors at once (~1.9
KB a step for the fly model: 22 GB for 12 Mb on a GPU). Most terms read a few bases
around their position (codon and splice-site masks, the site matrices up to the branch
point's 80 bases, the content chain's 5); the ORF-length and upstream-start scores read
the whole open reading frame, out to the in-frame stop codons on either side. So a chunk
[a, b) is computed from [lo, hi) reaching `context` steps (at least) beyond it and on
until, in each of the three frames, a stop codon of each strand lies inside the context
on both sides (or the context reaches the sequence's end): every ORF a position of the
chunk reads then ends inside [lo, hi), and every local term has its bases. lo is kept a
multiple of 3 (the terms' frame is the position mod 3 from the sequence's start). The
per-position terms (scores, allowed) go into host memory; the others are the same for
every chunk. `proj_start` is the frame penalty, row t the head's pattern row t mod 3
(FrameHead.proj_start_pattern): it is kept as those rows (`PeriodicRows`), not S of them
(232 bytes a step of the fly model held for nothing).
"""

from __future__ import annotations

import numpy as np
import torch

from ..genemodel.orflength import triplets
from ..genome.codes import STOP_IDS
from . import spill

PER_POSITION = ("scores", "allowed")
LOCAL_REACH = 128  # bases the local terms read around a position (branch point: 80)


class PeriodicRows:
    """An (S, C) array whose row t is pattern[t mod P], held as the P rows of `pattern`:
    a slice [a:b] is made (a tensor on the pattern's device) when asked for."""

    def __init__(self, pattern: torch.Tensor, length: int):
        self.pattern, self.length = pattern, length
        self.shape = (length, pattern.shape[-1])
        self.dtype, self.device = pattern.dtype, pattern.device

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("PeriodicRows: only slices [a:b] of rows")
        a, b, _ = key.indices(self.length)
        rows = torch.arange(a, max(a, b), device=self.device) % self.pattern.shape[0]
        return self.pattern[rows]

    def materialize(self) -> torch.Tensor:
        return self[0:self.length]

    def to(self, device) -> PeriodicRows:
        return PeriodicRows(self.pattern.to(device), self.length)

    def cpu(self) -> PeriodicRows:
        return self.to("cpu")


def rows_of(x) -> torch.Tensor:
    """x itself, or a PeriodicRows made whole."""
    return x.materialize() if isinstance(x, PeriodicRows) else x


def stop_positions(trip: np.ndarray) -> list[np.ndarray]:
    """Sorted first bases of every stop codon, given the codon id read left to right at
    each base (orflength.triplets), one array per (strand, frame): plus-strand stops
    (TAA, TAG, TGA) and minus-strand ones (TTA, CTA, TCA), frames by position mod 3."""
    out = []
    for strand in "+-":
        pos = np.flatnonzero(np.isin(trip, np.asarray(STOP_IDS[strand])))
        out += [pos[pos % 3 == f] for f in range(3)]
    return out


def _has_stop(stops: list[np.ndarray], lo: int, hi: int) -> bool:
    """Whether every (strand, frame) has a stop codon starting in [lo, hi] (inclusive)."""
    return all(np.searchsorted(s, lo) < np.searchsorted(s, hi, side="right")
               for s in stops)


def chunk_context(stops: list[np.ndarray], a: int, b: int, S: int,
                  context: int) -> tuple[int, int]:
    """[lo, hi) to compute the chunk [a, b) of a sequence of S steps from (module
    docstring): at least `context` steps either side, doubled until stop codons close
    every ORF on both sides or the sequence's ends are reached; lo a multiple of 3."""
    ctx = max(context, LOCAL_REACH)
    while True:
        lo = max(0, a - ctx)
        lo -= lo % 3
        hi = min(S, b + ctx)
        left = lo == 0 or _has_stop(stops, lo, a - 3)
        right = hi == S or _has_stop(stops, b, hi - 3)
        if left and right:
            return lo, hi
        ctx *= 2


def chunked_terms(head, em: torch.Tensor, chunk: int, context: int,
                  keep_on_device: bool = False) -> dict:
    """head._terms of the whole sequence em (S, channels), chunk steps at a time: the
    per-position terms (1, S, labels) in host memory (on em's device with
    keep_on_device), proj_start as PeriodicRows (S, labels), the rest as one chunk's."""
    S = em.shape[0]
    dev = em.device
    home = dev if keep_on_device else torch.device("cpu")
    with torch.no_grad():
        stops = stop_positions(triplets(head.codes(em[None], None))[0].cpu().numpy())
        out = None
        for a in range(0, S, chunk):
            b = min(S, a + chunk)
            lo, hi = chunk_context(stops, a, b, S, context)
            t = head._terms(em[None, lo:hi], torch.tensor([hi - lo], device=dev))
            if out is None:
                out = {k: v for k, v in t.items() if k not in PER_POSITION}
                out["lengths"] = torch.tensor([S], device=dev)
                out["proj_start"] = PeriodicRows(head.proj_start_pattern().to(home), S)
                for k in PER_POSITION:  # (on the host: in a file while spilling)
                    out[k] = spill.empty((1, S, t[k].shape[-1]), t[k].dtype, home)
            for k in PER_POSITION:
                out[k][0, a:b].copy_(t[k][0, a - lo:b - lo])
            del t
    return out
