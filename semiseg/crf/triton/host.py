"""Host-side pieces the Triton families share (static.py, periodic.py, dd.py): the kernels'
operands from a CRFInputs, the chains' state buffers, the gradient dict of the backend
contract, and the two stream helpers that run independent launches side by side.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from ..inputs import CRFInputs
from .schedule import Tuning


def _common(x: CRFInputs):
    dev = x.scores.device
    f32 = {"device": dev, "dtype": torch.float32}
    dummy = torch.empty(1, **f32)  # stands for absent inputs and unused outputs
    scores = x.scores.contiguous()
    allowed = x.allowed.contiguous().view(torch.uint8) if x.allowed is not None else dummy
    ps = x.proj_start.contiguous() if x.proj_start is not None else dummy
    pe = x.proj_end.contiguous() if x.proj_end is not None else dummy
    start = x.start.contiguous() if x.start is not None else torch.zeros(x.C, **f32)
    end = x.end.contiguous() if x.end is not None else torch.zeros(x.C, **f32)
    flags = {"HAS_ALLOWED": x.allowed is not None, "HAS_PS": x.proj_start is not None,
             "HAS_PE": x.proj_end is not None}
    return scores, allowed, ps, pe, start, end, flags, dummy


def _log_z(fin_alp: Tensor, fin_n: Tensor, end: Tensor, C: int) -> Tensor:
    """float64 log Z = N + logsumexp_c(alpha_rel[L, c] + end[c])."""
    return fin_n + torch.logsumexp(fin_alp[:, :C].double() + end.double(), dim=1)


def _grad_weights(saved, grad_log_z: Tensor):
    """grad_log_z in float64 and float32, zero where log Z is -inf (no gradient there)."""
    g = grad_log_z.to(torch.float64)
    g = torch.where(torch.isfinite(saved["log_z64"]), g, torch.zeros_like(g))
    return g, g.to(torch.float32).contiguous()


def _backward_buffers(x: CRFInputs, KP: int, CP: int, tr_shape: tuple):
    """The reversed chain's state (ring, gamma, normaliser, max) and the zeroed gradient
    accumulators: scores, proj_start, proj_end (float32, B x T x C), per-sequence duration
    bias (B, KP, CP) and transition (B, *tr_shape) partial sums in float64."""
    B, T, C, dev = x.batch, x.T, x.C, x.scores.device
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    state = (torch.empty(B, KP, CP, **f32), torch.empty(B, CP, **f32),
             torch.empty(B, **f64), torch.empty(B, **f32))
    grads = (torch.zeros(B, T, C, **f32), torch.zeros(B, T, C, **f32),
             torch.zeros(B, T, C, **f32), torch.zeros(B, KP, CP, **f64),
             torch.zeros(B, *tr_shape, **f64))
    return state, grads


def _gradients(x: CRFInputs, g_scores, g_ps, g_pe, g_db, transition) -> dict:
    """The backend contract's gradient dict from the (already weighted) scores and
    projection gradients, the weighted float64 sums g_db (KP, CP, duration order) and
    transition (both None when they were not asked for: left out); start/end gradients
    are the boundary posteriors at the first / last position, summed over the batch."""
    dt = x.scores.dtype
    last = (x.lengths - 1).clamp(min=0)[:, None, None].expand(-1, 1, x.C)
    out = {
        "scores": g_scores,
        "proj_start": g_ps,
        "proj_end": g_pe,
        "start": g_ps[:, 0, :].sum(0, dtype=torch.float64).to(dt),
        "end": g_pe.gather(1, last).sum((0, 1), dtype=torch.float64).to(dt),
    }
    if g_db is not None:
        out["duration_bias"] = _duration_grad(g_db, x.K, x.C, dt)
        out["transition"] = transition.to(dt)
    return out


def _duration_grad(g_db: Tensor, K: int, C: int, dt) -> Tensor:
    """The (K, C) gradient from the weighted float64 sum (KP, CP) in duration order;
    durations beyond the ring (> T) get 0."""
    n = min(K, g_db.shape[0])
    out = torch.zeros(K, C, device=g_db.device, dtype=torch.float64)
    out[:n] = g_db[:n, :C]
    return out.to(dt)


def _db_table(x: CRFInputs, KP: int, CP: int, rows: int | None = None) -> Tensor:
    """duration_bias as the static and periodic kernels read it: (rows, CP) float32 (rows
    KP by default), row d - 1 for duration d, -inf beyond min(K, KP) durations and C
    labels. A ring slot's duration is 1..KP (1..2 KP for the periodic reversed chain's
    residue planes: the periodic family asks for 2 KP rows), so its row is read whole,
    unmasked, at a CP-aligned address (the loads vectorise; (K, C) rows of C floats with a
    mask per label did not). The same values where the kernels read them, so the same
    results, bitwise."""
    out = torch.full((rows or KP, CP), float("-inf"), device=x.scores.device,
                     dtype=torch.float32)
    n = min(x.K, KP)
    out[:n, :x.C] = x.duration_bias[:n]
    return out


def _sides(t: Tuning, x: CRFInputs, KP: int, CP: int, scores, allowed, ps, pe, start, end, flags):
    """Kernel arguments of the two directions: (inputs..., flags) forward and reversed.

    The reversed chain reads the same scores and mask, the transposed transition, proj_end
    where the forward reads proj_start (and the reverse), and starts from `end`."""
    db = _db_table(x, KP, CP)
    fwd = (scores, allowed, ps, pe, t.fwd_transition(x.transition, CP), db, start)
    rev = (scores, allowed, pe, ps, t.fwd_transition(x.transition.t(), CP), db, end)
    rflags = dict(flags, HAS_PS=flags["HAS_PE"], HAS_PE=flags["HAS_PS"])
    return (fwd, flags), (rev, rflags)


def _chain_state(B: int, n: int, KP: int, CP: int, dev):
    """Ring, gamma, alpha (float32) and normaliser (float64) for B sequences x n slots."""
    return (torch.empty(B, n, KP, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, device=dev, dtype=torch.float64))


def _segmentation(x: CRFInputs, score: Tensor, seg_label: Tensor):
    """(score, labels, seg_start) from the float64 best score and the segment starts'
    labels (-1 elsewhere); a sequence with nothing allowed gets labels -1."""
    B, T, dev = x.batch, x.T, x.scores.device
    ok = torch.isfinite(score)
    seg_start = seg_label >= 0
    # label of each position = label of the latest segment start at or before it
    pos = torch.arange(T, device=dev).expand(B, T)
    idx = torch.where(seg_start, pos, torch.zeros_like(pos)).cummax(dim=1).values
    labels = seg_label.gather(1, idx)
    valid = pos < x.lengths[:, None]
    labels = torch.where(valid & ok[:, None], labels, torch.full_like(labels, -1))
    return score.to(x.scores.dtype), labels, seg_start & valid


class _Overlap:
    """Run recompute(k) then reverse(k) for k = nseg-1..0, recompute(k-1) beside reverse(k).

    On CUDA, recomputes go to a side stream: recompute(k-1) waits only for reverse(k+1)
    (which last read its row buffer, k-1 and k+1 sharing one), and reverse(k) waits for
    recompute(k). The arithmetic and its order are the same as running them in turn.
    """

    _streams: ClassVar[dict] = {}  # one side stream per device, reused

    def __init__(self, device, nseg):
        self.cuda = device.type == "cuda" and nseg > 1
        self.nseg = nseg
        if self.cuda:
            key = (device.index if device.index is not None else torch.cuda.current_device())
            if key not in self._streams:
                self._streams[key] = torch.cuda.Stream(device=device)
            self.side = self._streams[key]
            self.main = torch.cuda.current_stream(device)

    def run(self, recompute, reverse):
        n = self.nseg
        if not self.cuda:
            for k in range(n - 1, -1, -1):
                recompute(k)
                reverse(k)
            return
        ev_rec = [torch.cuda.Event() for _ in range(n)]
        ev_rev = [torch.cuda.Event() for _ in range(n)]
        self.side.wait_stream(self.main)  # inputs, checkpoints and zeroed gradients
        with torch.cuda.stream(self.side):
            recompute(n - 1)
            ev_rec[n - 1].record(self.side)
        for k in range(n - 1, -1, -1):
            if k >= 1:
                with torch.cuda.stream(self.side):
                    if k + 1 < n:
                        self.side.wait_event(ev_rev[k + 1])
                    recompute(k - 1)
                    ev_rec[k - 1].record(self.side)
            self.main.wait_event(ev_rec[k])
            reverse(k)
            ev_rev[k].record(self.main)


class _Both:
    """Launch independent kernels side by side: the first on the current stream, each
    other on a side stream of its own (on CUDA unless `side_streams` is False; one after
    the other elsewhere)."""

    _streams: ClassVar[dict] = {}  # side streams per device, reused

    def __init__(self, device, side_streams: bool = True):
        self.cuda = device.type == "cuda" and side_streams
        if self.cuda:
            self.key = (device.index if device.index is not None
                        else torch.cuda.current_device())
            self.device = device
            self.main = torch.cuda.current_stream(device)

    def run(self, first, *others):
        if not self.cuda:
            first()
            for fn in others:
                fn()
            return
        sides = self._streams.setdefault(self.key, [])
        while len(sides) < len(others):
            sides.append(torch.cuda.Stream(device=self.device))
        for side, fn in zip(sides, others, strict=False):
            side.wait_stream(self.main)  # inputs and buffers are ready
            with torch.cuda.stream(side):
                fn()
        first()
        for side in sides[:len(others)]:
            self.main.wait_stream(side)
