"""Certified windowed decoding (issue 42): a long sequence decoded in windows, with a
proof at every seam that the stitched best path is the whole-sequence best path.

Viterbi (max-sum) seams: path coalescence from a certified entry.
A window starts at a boundary p through which the whole-sequence best path is known to
pass, with a known state: the label e of the segment that ends at p (at p = 0: the
sequence start, whose first segment takes `start`). The forward recursion from that
entry is exact for every path of the whole sequence that passes (p, e): segments
opening at p read transition[(d-1) mod Q][e, c], exactly as in the whole sequence. The
window ends at we. The whole-sequence path has a segment that covers position we - 1;
it opens at a boundary s in [max(p + 1, we - K), we - 1] (or at p itself), and the path
passes the boundary state (s, c') with c' the label of the segment ending at s. The part
of the best path between two of its boundary states is the best path between them (any
better one would splice into a better whole path), so the whole path's part on [p, s)
is the window's traceback from (s, c'). Therefore: if the tracebacks from EVERY finite
boundary state (s, c') of that frontier pass one common boundary state (t0, c0) with
p < t0 < we - K, the whole-sequence best path passes (t0, c0), its labels on [p, t0)
are the (common) traceback's labels there, and the next window starts at (t0, c0), an
entry as certified as the first. A window ending at the sequence end needs no
frontier: its last state is argmax alpha_L(c) + end[c], exactly as for the whole
sequence. The frontier is a superset of the states the whole path can be in, so a
certificate is never issued on a guess, whatever lies beyond the window: a wrong
certified seam is impossible by construction (ties aside: with several best paths the
stitched one is a best path, but tie-breaking may pick another than a whole decode).

A seam certifies "at the first width" when the common state lies in the window's last
max(`overlap`, half the window) steps (the next window starts there, so it repeats
those steps; at least half of every window is kept); otherwise the window is widened
(its overlap doubled, the window grown by as much) and decoded again, until it
certifies or reaches the sequence end ("decoded whole" from its entry on).

This certifies seams one after the other (the next window's entry is the previous
certificate). Certifying windows decoded side by side, each with an unknown entry,
would need the coalescence for every entry state as well: K x C forward passes per
window (4,329 for the yeast gene model's posterior decode); docs/decoding.md.


The gene model's posterior decode in windows (posterior seams, the drivers):
annotate/posterior_seams.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .long_terms import PeriodicRows

try:  # compiled into the kernels' cache (crf/numba/core.cache_dir), not the package
    from numba import njit

    from ..crf.numba.core import restore_cache_dir, use_cache_dir
    _USER_CACHE_DIR = use_cache_dir()
except ImportError:  # pragma: no cover - numba is a dependency of the CPU backend
    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f

    def restore_cache_dir(user) -> None:
        pass

    _USER_CACHE_DIR = None

NEG = -np.inf
POSTERIOR_TOL = 1e-5  # a posterior seam's bound: stitched posteriors within it (posterior_bound.py)


@dataclass
class SeamStats:
    """Counts over the seams decoded (summed over sequences)."""

    side: int = 0  # certified from a window decoded side by side (maxsum_windows.py)
    first: int = 0  # certified at the first width
    widened: int = 0  # certified after the overlap was doubled (once or more)
    whole: int = 0  # not certified before the window reached the sequence end
    post_first: int = 0  # posterior seams certified within tol at the first width
    post_widened: int = 0
    post_whole: int = 0
    post_max_diff: float = 0.0  # the largest bound of a certified posterior seam
    widths: list = field(default_factory=list)  # the windows of certified seams
    points: list = field(default_factory=list)  # (boundary, label before it) certified
    depths: list = field(default_factory=list)  # steps from a first window's end back to
    # where its tracebacks met
    post_first_diffs: list = field(default_factory=list)  # bounds at the first width
    post_probes: list = field(default_factory=list)  # the probed first seams' bounds
    # (stitched_posteriors' probe), where one went whole at once
    post_seqs_whole: int = 0  # sequences whose posteriors were computed as one window

    def line(self) -> str:
        side = f"{self.side} certified side by side, " if self.side else ""
        return (f"seams: {side}{self.first} certified at the first width, {self.widened} "
                f"widened, {self.whole} decoded whole")

    def posterior_line(self, tol: float = POSTERIOR_TOL) -> str:
        first = max(self.post_first_diffs, default=0.0)
        probed = (f"; {len(self.post_probes)} sequence(s) whole at once after a probe of "
                  f"their first seam's bound was up to {max(self.post_probes):.2g}"
                  if self.post_probes else "")
        at_first = f"; at the first width {first:.2g}" if self.post_first_diffs else ""
        return (f"posterior seams: {self.post_first} certified within {tol:g} at the first "
                f"width, {self.post_widened} widened, {self.post_whole} decoded whole "
                f"(largest bound {self.post_max_diff:.2g}{at_first}{probed})")

    def add(self, other: SeamStats) -> None:
        for k in ("side", "first", "widened", "whole", "post_first", "post_widened", "post_whole",
                  "post_seqs_whole"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.post_max_diff = max(self.post_max_diff, other.post_max_diff)
        self.depths += other.depths
        self.post_first_diffs += other.post_first_diffs
        self.post_probes += other.post_probes


# ----------------------------------------------------------------- max-sum kernels


@njit(cache=True, nogil=True)
def _forward(f, tr, db, ps, pe, allowed, start, entry):
    """Max-sum over the segments of positions [0, n) of a window (float64).

    f, ps, pe: (n, C) scores, proj_start, proj_end; tr (Q, C, C); db (Kd, C);
    allowed (n, C); start (C,); entry: the label of the segment ending at the window's
    first boundary, or -1 at a sequence start (the first segment then takes start).
    Returns alpha (n+1, C) (best score of [0, t) with a segment of c ending at t), and
    per (t, c) the best segment's duration and its predecessor's label (-1: the entry
    or the sequence start). Ties keep the shorter duration / the smaller label."""
    n, C = f.shape
    Q = tr.shape[0]
    Kd = db.shape[0]
    S = np.zeros((n + 1, C))
    for t in range(n):
        for c in range(C):
            S[t + 1, c] = S[t, c] + f[t, c]
    alpha = np.full((n + 1, C), NEG)
    bp_d = np.zeros((n + 1, C), np.int32)
    bp_c = np.full((n + 1, C), -1, np.int32)
    G = np.full((n + 1, Q, C), NEG)
    Ga = np.full((n + 1, Q, C), -1, np.int32)
    for q in range(Q):
        for c in range(C):
            G[0, q, c] = start[c] if entry < 0 else tr[q, entry, c]
    for t in range(1, n + 1):
        for c in range(C):
            best = NEG
            bd = 0
            bc = -1
            for d in range(1, min(Kd, t) + 1):
                s = t - d
                if not allowed[s, c]:
                    break
                w = db[d - 1, c]
                q = (d - 1) % Q
                o = G[s, q, c]
                if w == NEG or o == NEG:
                    continue
                v = o + (S[t, c] - S[s, c]) + w + ps[s, c] + pe[t - 1, c]
                if v > best:
                    best = v
                    bd = d
                    bc = Ga[s, q, c]
            alpha[t, c] = best
            bp_d[t, c] = bd
            bp_c[t, c] = bc
        if t < n:
            for q in range(Q):
                for c in range(C):
                    m = NEG
                    a = -1
                    for c2 in range(C):
                        v = alpha[t, c2] + tr[q, c2, c]
                        if v > m:
                            m = v
                            a = c2
                    G[t, q, c] = m
                    Ga[t, q, c] = a
    return alpha, bp_d, bp_c


@njit(cache=True, nogil=True)
def _coalesce(alpha, bp_d, bp_c, lo):
    """The latest boundary state (t0, c0), 0 < t0 < lo, that the tracebacks from every
    finite state (s, c') with lo <= s < n all pass; (0, -1) when they meet only at the
    entry. Walks the boundaries from the end: `pending` counts the distinct states below
    the current boundary that a traceback step has reached; one state at t0 and none
    pending means every traceback goes through it."""
    n = alpha.shape[0] - 1
    C = alpha.shape[1]
    marked = np.zeros((n + 1, C), np.bool_)
    counted = np.zeros((n + 1, C), np.bool_)
    for t in range(max(lo, 1), n):
        for c in range(C):
            if alpha[t, c] > NEG:
                marked[t, c] = True
    pending = 0
    for t in range(n - 1, 0, -1):
        m_t = 0
        last = -1
        for c in range(C):
            if marked[t, c]:
                m_t += 1
                last = c
                if counted[t, c]:
                    pending -= 1
        if t < lo and m_t == 1 and pending == 0:
            return t, last
        for c in range(C):
            if marked[t, c]:
                s = t - bp_d[t, c]
                c2 = bp_c[t, c] if s > 0 else 0  # every traceback's end: the entry
                if not marked[s, c2]:  # a new lineage below t (the entry's too: it is
                    marked[s, c2] = True  # never visited, so it stays pending)
                    counted[s, c2] = True
                    pending += 1
    return 0, -1


@njit(cache=True)
def _trace(bp_d, bp_c, t, c, stop=0, out=None):
    """The traceback from state (t, c) down to the first boundary <= stop: that boundary
    and the label of the segment ending there (-1 at a window's first boundary); with
    `out`, the labels on the way are written into out[boundary:t]."""
    while t > stop:
        d = int(bp_d[t, c])
        if out is not None:
            out[t - d:t] = c
        c, t = int(bp_c[t, c]), t - d
    return t, c


class WindowInputs:
    """One sequence's max-sum inputs on the host (certified_viterbi's arguments), each
    window's slice made float64 (and `allowed` bool) when asked for."""

    def __init__(self, scores, transition, duration_bias, allowed=None, proj_start=None,
                 proj_end=None, start=None, end=None):
        # per-position inputs stay in their dtype; each window's slice becomes float64
        self.f = _host(scores)
        self.T, self.C = self.f.shape
        tr = _np(transition)
        self.tr = tr[None] if tr.ndim == 2 else tr
        self.db = _np(duration_bias)
        self.K = self.db.shape[0]
        self.ps = None if proj_start is None else _host(proj_start)
        self.pe = None if proj_end is None else _host(proj_end)
        self.ok = None if allowed is None else _host(allowed)
        self.st = np.zeros(self.C) if start is None else _np(start)
        self.en = np.zeros(self.C) if end is None else _np(end)

    def _part(self, x, a, b, fill):
        if x is None:
            return np.full((b - a, self.C), fill)
        return np.ascontiguousarray(x[a:b], dtype=bool if fill is True else np.float64)

    def forward(self, a: int, b: int, entry: int, start=None):
        """_forward over [a, b) from `entry` (-1: segments may open at a with `start`,
        default the sequence's)."""
        return _forward(self._part(self.f, a, b, 0.0), self.tr, self.db,
                        self._part(self.ps, a, b, 0.0), self._part(self.pe, a, b, 0.0),
                        self._part(self.ok, a, b, True),
                        self.st if start is None else start, entry)


def check_window(window: int, overlap: int) -> None:
    """A windowed decode's window and overlap, each at least 1."""
    if window < 1 or overlap < 1:
        raise ValueError(f"window {window} and overlap {overlap}: expected >= 1 and >= 1")


def windowed(window: int, overlap: int, stats: SeamStats | None, *inputs):
    """(WindowInputs(*inputs), stats or a new SeamStats) for a windowed decode, the
    window and overlap checked."""
    check_window(window, overlap)
    return WindowInputs(*inputs), (stats if stats is not None else SeamStats())


def widen_until_certified(decode, p: int, T: int, window: int, overlap: int,
                          labels: np.ndarray, stats: SeamStats):
    """The windows from a certified entry at p (module docstring): [p, we) of `window`
    steps, widened (the overlap doubled) until the frontier's tracebacks meet at least
    half a window, or the overlap, from its end, or the window reaches the sequence end
    T. decode(we) -> (n, t0, c0, fill, extra) for the window [p, we): (t0, c0) where its
    frontier's tracebacks meet ((0, -1): only at the entry), at the sequence end (n, the
    best last label, -1 where nothing is allowed); fill(t, c, out) writes the labels of
    the traceback from (t, c) into out[:t]; extra is the caller's. The certified labels
    are written into labels[p:]; returns the accepted window's (t0, c0, extra) (t0 = n,
    p + t0 = T, at the sequence end). Counts the seam in stats."""
    k = 0
    while True:
        ov = overlap << k
        we = min(T, p + window + ov - overlap)
        n, t0, c0, fill, extra = decode(we)
        if we == T:  # the sequence end: the last state is the whole decode's
            if c0 >= 0:
                fill(n, c0, labels[p:])
                if k > 0:  # a seam that never certified: decoded to the end as one
                    stats.whole += 1
            return t0, c0, extra
        if k == 0:  # how far back the tracebacks met (None: only at the entry)
            stats.depths.append(n - t0 if t0 > 0 else None)
        if t0 > 0 and t0 >= n - max(ov, n // 2):
            fill(t0, c0, labels[p:])
            if k == 0:
                stats.first += 1
            else:
                stats.widened += 1
            stats.widths.append(n)
            stats.points.append((p + t0, c0))
            return t0, c0, extra
        k += 1


def certify_step(x: WindowInputs, p: int, entry: int, score: float, labels: np.ndarray,
                 window: int, overlap: int, stats: SeamStats):
    """From a certified entry (p, entry) with the path's score so far: the next
    certified boundary state, its labels written into labels[p:]: (p', entry', score');
    p' = T at the sequence end, score' = -inf where no segmentation is allowed (module
    docstring: windows of `window` steps, widened until they certify)."""
    T, K = x.T, x.K

    def decode(we):
        alpha, bp_d, bp_c = x.forward(p, we, entry)
        n = we - p

        def fill(t, c, out):
            _trace(bp_d, bp_c, t, c, 0, out)

        if we == T:  # the best last state (with the end scores)
            v = alpha[n] + x.en
            c = int(np.argmax(v))
            return n, n, (c if np.isfinite(v[c]) else -1), fill, float(v[c])
        t0, c0 = _coalesce(alpha, bp_d, bp_c, max(1, n - K))
        return n, t0, c0, fill, (float(alpha[t0, c0]) if t0 > 0 else None)

    t0, c0, top = widen_until_certified(decode, p, T, window, overlap, labels, stats)
    if p + t0 == T:
        if c0 < 0:
            return T, -1, float("-inf")
        return T, -1, (top if p == 0 else score + top)
    return p + t0, c0, (score if p > 0 else 0.0) + top


def certified_viterbi(scores, transition, duration_bias, *, allowed=None, proj_start=None,
                      proj_end=None, start=None, end=None, window: int, overlap: int,
                      stats: SeamStats | None = None,
                      progress=None) -> tuple[np.ndarray, float]:
    """The best labelling of ONE sequence, decoded in windows of `window` steps whose
    seams are certified by coalescence (module docstring): (labels (T,) int64, score).

    Arguments as `semiseg.crf.viterbi` for one sequence, without the batch axis:
    scores (T, C), transition (C, C) static or (Q, C, C) periodic (Q < K), duration_bias
    (K, C), allowed / proj_start / proj_end (T, C), start / end (C,). A sequence with no
    allowed segmentation gives labels -1 and score -inf."""
    x, stats = windowed(window, overlap, stats, scores, transition, duration_bias, allowed,
                        proj_start, proj_end, start, end)
    T = x.T
    labels = np.full(T, -1, np.int64)
    p, entry, score = 0, -1, 0.0
    while p < T:
        p, entry, score = certify_step(x, p, entry, score, labels, window, overlap, stats)
        if score == float("-inf"):
            return np.full(T, -1, np.int64), score
        if progress is not None and p < T:
            progress(p / T)
    return labels, score


def _host(x):
    """x on the host as numpy; PeriodicRows (long_terms.py) as they are: a window's
    slice of them is made when read (WindowInputs._part)."""
    if isinstance(x, PeriodicRows):
        return x.cpu()
    return torch.as_tensor(x).detach().cpu().numpy()


def _np(x) -> np.ndarray:
    return np.ascontiguousarray(torch.as_tensor(x).detach().cpu().numpy(), dtype=np.float64)


restore_cache_dir(_USER_CACHE_DIR)
