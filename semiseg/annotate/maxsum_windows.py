"""The max-sum of one long sequence in windows decoded side by side, then certified one
after the other (issue 42: bounded memory and every core, with seams.py's certificate).

seams.certified_viterbi decodes each window from the certified entry the previous one
gave, so its windows run one after the other on one core. Here every window is decoded
at once from a *free* entry instead (segments may open at its first boundary with any
label, at no cost), on a pool of threads (the numba forward releases the GIL), and the
certificates are then checked in order on the host:

Let (p, e) be the certified entry (seams.py: the whole-sequence best path has a segment
of label e ending at p, and the labels before p are known). Take a window [ws, we) with
ws < p, decoded from its free entry. Every path of the whole sequence through (p, e)
continues from there as a path of the window does: segments opening at p read
transition[(d - 1) mod Q][e, c] in both. A free-window path through (p, e) to a state
(s, c) scores its prefix up to (p, e) plus that continuation; so if the window's
traceback from (s, c) passes (p, e), its part after p is the best continuation from
(p, e) to (s, c), the one the window decoded from the entry (p, e) would trace. Hence,
if the window's frontier tracebacks all meet at (t0, c0) with t0 > p (seams._coalesce)
and the traceback from (t0, c0) passes (p, e), the window decoded from (p, e) would
certify (t0, c0) with the same labels on [p, t0): the next entry is (t0, c0). At the
sequence end the last state is argmax alpha_L + end, and its traceback must pass (p, e)
likewise. Where a check fails (the window had not forgotten its free entry by p, or its
tracebacks do not meet), that seam is certified as seams.certified_viterbi does it,
from (p, e) (certify_step), and the next window whose extent starts before the new
entry takes over. Either way the result is the whole-sequence decode (ties aside, as in
seams.py).

Memory: the windows in flight (twice the threads) hold their tables; a window's forward
holds about 3 KB a step (C = 58 labels), its kept tables 16 B x C a step.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .seams import SeamStats, WindowInputs, _coalesce, _trace, certify_step, windowed


class _Window:
    """A window decoded from its free entry: its extent, tables and frontier meeting
    point (t0, c0) local to ws (t0 = 0: none; at the sequence end: the last state)."""

    def __init__(self, x: WindowInputs, ws: int, we: int):
        self.ws = ws
        free = None if ws == 0 else np.zeros(x.C)  # at 0 the sequence's own start
        self.alpha, self.bp_d, self.bp_c = x.forward(ws, we, -1, free)
        n = we - ws
        if we == x.T:
            v = self.alpha[n] + x.en
            c = int(np.argmax(v))
            self.t0, self.c0, self.end = n, c, float(v[c])
        else:
            self.t0, self.c0 = _coalesce(self.alpha, self.bp_d, self.bp_c, max(1, n - x.K))
            self.end = None

    def reach(self) -> int:
        """The boundary this window can certify up to (the sequence end for the last)."""
        return self.ws + self.t0 if self.t0 > 0 else self.ws

    def through(self, p: int, e: int) -> bool:
        """Whether the traceback from (t0, c0) passes the boundary state (p, e)."""
        t, c = _trace(self.bp_d, self.bp_c, self.t0, self.c0, p - self.ws)
        return t == p - self.ws and (c == e or (p == 0 and self.ws == 0))

    def fill(self, p: int, labels: np.ndarray) -> None:
        """The traceback's labels from (t0, c0) back to p into labels (sequence axis)."""
        _trace(self.bp_d, self.bp_c, self.t0, self.c0, p - self.ws, labels[self.ws:])

    def score(self, p: int, e: int) -> float:
        """The path's score from (p, e) to the window's point (from the start at p = 0)."""
        top = self.end if self.end is not None else float(self.alpha[self.t0, self.c0])
        return top if p == 0 else top - float(self.alpha[p - self.ws, e])


def parallel_certified_viterbi(scores, transition, duration_bias, *, allowed=None,
                               proj_start=None, proj_end=None, start=None, end=None,
                               window: int, overlap: int, threads: int | None = None,
                               stats: SeamStats | None = None,
                               progress=None) -> tuple[np.ndarray, float]:
    """seams.certified_viterbi's result (labels (T,) int64, score) from windows of
    `window` steps, each reaching `overlap` steps into both neighbours, decoded side by
    side on `threads` threads (default torch's) and certified in order (module
    docstring). Seams certified from those windows count in stats.side, those certified
    from their entry as certified_viterbi counts them."""
    x, stats = windowed(window, overlap, stats, scores, transition, duration_bias, allowed,
                        proj_start, proj_end, start, end)
    T = x.T
    ext = [(max(0, a - overlap), min(T, a + window + overlap)) for a in range(0, T, window)]
    threads = max(1, threads or torch.get_num_threads())
    labels = np.full(T, -1, np.int64)
    p, e, score = 0, -1, 0.0
    pool = ThreadPoolExecutor(threads)
    try:  # an error or an interrupt drops the windows not started (finally)
        ahead: dict = {}  # window index -> its future, submitted ahead of use

        def submit(j):
            if j not in ahead:
                ahead[j] = pool.submit(_Window, x, *ext[j])
            return ahead[j]

        k = 0
        while p < T:
            for j in range(k, min(len(ext), k + 2 * threads)):  # keep the pool busy
                submit(j)
            while k < len(ext) and ext[k][1] < T and submit(k).result().reach() <= p:
                del ahead[k]  # passed: it cannot certify beyond p
                k += 1
            w = submit(k).result() if k < len(ext) else None
            usable = (w is not None and (0 < w.ws < p or w.ws == p == 0)
                      and np.isfinite(w.score(p, e)))
            if usable and w.through(p, e):
                w.fill(p, labels)
                score = (score if p > 0 else 0.0) + w.score(p, e)
                p, e = w.ws + w.t0, (w.c0 if w.end is None else -1)
                if p < T:
                    stats.side += 1
                    stats.points.append((p, e))
            else:
                p, e, score = certify_step(x, p, e, score, labels, window, overlap, stats)
                if score == float("-inf"):
                    return np.full(T, -1, np.int64), score
            if progress is not None and p < T:
                progress(p / T)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return labels, score
