"""The posterior seam's certificate (issue 42; the proof is in docs/decoding.md, "The
posterior bound").

Two overlapping windows A = [a0, a1) and B = [b0, b1) (a0 <= b0 < a1 <= b1) and their
intersection C = [b0, a1) are each run through the posterior pass, which gives, besides
the label posteriors, every window's boundary marginals

    E(t, y) = P(a segment of label y ends at boundary t) = alpha(t, y) beta(t, y) / Z

(the gradient of log Z in `proj_end`). C starts where B starts and ends where A ends, so
alpha_C = alpha_B and beta_C = beta_A exactly, and for U = [a0, b1), the two windows
decoded as one (alpha_U = alpha_A, beta_U = beta_B):

    E_U  is proportional to  E_A E_B / E_C.

Stitched at a cut c (A's posteriors left of c, B's from c on), B's posterior at any
step from c on differs from U's by at most the total variation between B's and U's law
of the last boundary at or before c, and A's left of c by that of the first boundary at
or after c. Those laws are E times a factor the two windows share, so each distance is
at most

    min over k of  sum over the block of  E_B |k E_A / E_C - 1|      (boundaries (c-K, c])
    min over k of  sum over the block of  E_A |k E_B / E_C - 1|      (boundaries [c, c+K))

plus the mass of the entries C gives 0 (float32 underflow, or a state C cannot reach)
while A or B does not: there the ratio is unknown, so that mass counts whole. The seam
is certified at a cut whose bound is within the tolerance (the first found, searching
from the middle of the overlap outward: seam_cut): every posterior there is within it of
the two windows decoded as one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..crf.dispatch import marginals

# cuts tried per seam, evenly over where it may cut (the bound varies slowly with the
# cut: it falls to float32 noise once both windows have forgotten their far edges)
CANDIDATES = 49


@dataclass
class WindowPass:
    """One window's posterior pass: posteriors (L, C) over [start, end) (None for an
    intersection window, whose posteriors are not used) and its boundary marginals
    kept over some row ranges of the sequence, `ends[(lo, hi)]` (hi - lo, C); row t is
    the boundary after step t."""

    start: int
    end: int
    post: torch.Tensor | None
    ends: dict = field(default_factory=dict)

    def marginals(self, lo: int, hi: int) -> np.ndarray:
        """The boundary marginals of rows [lo, hi) (float64), from a kept range."""
        for (a, b), e in self.ends.items():
            if a <= lo and hi <= b:
                return e[lo - a:hi - a].double().numpy()
        raise KeyError(f"rows [{lo}, {hi}) of window [{self.start}, {self.end}) not kept")


def posteriors_and_ends(t: dict, backend: str, ends: bool = True):
    """Label posteriors (B, T, C) of the gene model's terms `t` (head._terms: scores,
    transition, duration_bias, lengths, start, end, proj_start, allowed) and, with
    `ends`, their boundary marginals (B, T, C) from the same pass (else None):
    crf.marginals. A sequence the grammar forbids gets zeros."""
    out = marginals(t["scores"], t["transition"], t["duration_bias"], t["lengths"],
                    start=t["start"], end=t["end"], proj_start=t["proj_start"],
                    allowed=t["allowed"], backend=backend, ends=ends)
    return out[0], (out[2] if ends else None)


def side_bound(weight: np.ndarray, num: np.ndarray, den: np.ndarray) -> float:
    """min over k of sum weight |k num / den - 1| over the entries with weight > 0 and
    den > 0, plus weight + num over the entries with den = 0 (their ratio unknown).
    Infinite where the weights sum below 1/2: a block of K boundaries holds at least
    one boundary of every segmentation (no segment is longer than K), so its marginals
    sum to 1 or more; less is a window the grammar forbids (its pass gives zeros) or
    lost precision, and nothing is certified from it."""
    weight, num, den = weight.ravel(), num.ravel(), den.ravel()
    if not weight.sum() >= 0.5:
        return float("inf")
    unknown = float((weight + num)[den == 0].sum())
    known = (weight > 0) & (den > 0)
    u, w = weight[known], num[known] / den[known]
    zero = w == 0
    out = float(u[zero].sum()) + unknown
    u, w = u[~zero], w[~zero]
    if len(u) == 0:
        return out
    # sum u w |k - 1/w| is smallest at a weighted median of 1/w, weights u w
    x, wt = 1.0 / w, u * w
    order = np.argsort(x)
    cum = np.cumsum(wt[order])
    k = x[order][min(len(x) - 1, int(np.searchsorted(cum, cum[-1] / 2)))]
    return out + float((u * np.abs(k * w - 1.0)).sum())


def cut_bound(c: int, K: int, A: WindowPass, B: WindowPass, C: WindowPass) -> float:
    """The larger of the two sides' bounds (module docstring) for a cut at step c."""
    ea, eb, ec = (w.marginals(c - K, c) for w in (A, B, C))  # boundaries (c - K, c]
    left = side_bound(eb, ea, ec)
    ea, eb, ec = (w.marginals(c - 1, c - 1 + K) for w in (A, B, C))  # [c, c + K)
    return max(left, side_bound(ea, eb, ec))


def seam_cut(lo: int, hi: int, K: int, A: WindowPass, B: WindowPass, C: WindowPass,
             tol: float, candidates: int = CANDIDATES) -> tuple[int | None, float]:
    """(cut, bound) of the seam between windows A and B (C their intersection), among up
    to `candidates` cuts evenly within [lo, hi) where both blocks lie inside the overlap:
    the first in `_search_order` whose bound is within `tol` (any such cut is proved),
    else no cut (None) and the smallest bound. The middle cut, farthest from both
    windows' far edges, certifies most seams that certify at all, and the cuts that
    certify lie in runs, so the search usually ends after one or a few bounds (two
    sorted sums over K x C marginals each) instead of one per cut."""
    c0, c1 = max(lo, B.start + K, 1), min(hi - 1, A.end - K + 1)
    if c1 < c0:
        return None, float("inf")
    cuts = np.unique(np.linspace(c0, c1, min(candidates, c1 - c0 + 1)).round().astype(int))
    best = float("inf")
    for i in _search_order(len(cuts)):
        bound = cut_bound(int(cuts[i]), K, A, B, C)
        if bound <= tol:
            return int(cuts[i]), bound
        best = min(best, bound)
    return None, best


def _search_order(n: int, stride: int = 4) -> list[int]:
    """Indices 0..n-1 of the cuts in the order seam_cut tries them: every `stride`-th
    from the middle outward first (a run of `stride` certifying cuts is met there),
    then the others, each group by distance from the middle (the lower index first)."""
    mid = n // 2
    key = sorted(range(n), key=lambda i: (abs(i - mid), i))
    return ([i for i in key if (i - mid) % stride == 0]
            + [i for i in key if (i - mid) % stride])
