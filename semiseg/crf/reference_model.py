"""The torch backend's model and forward ring (reference.py has the notation and the
recursions): the inputs in float64 as `_Model`, each chunk's per-step terms, and `_Forward`,
the ring that reference.forward, reference_backward (recomputing chunks) and posteriors.py
step through.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from .inputs import CRFInputs

WORK = torch.float64
NEG = float("-inf")

# Steps per chunk (checkpoint interval); None = about sqrt((T + 1) * K). Tests set it
# small to exercise the chunk boundaries.
CHUNK: int | None = None


@contextmanager
def _one_thread(device: torch.device):
    """Run the step loops on one CPU thread. Their tensors are small (B x C x K): torch
    would split an exp over a few thousand elements across threads, and on a busy machine
    every such op then waits for a scheduler tick (measured: 8 ms instead of 20 us)."""
    if device.type != "cpu":
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


@dataclass
class _Model:
    """The parameters in float64, truncated to the durations that can occur (K <= T)."""

    B: int
    T: int
    C: int
    K: int  # effective maximum duration min(K, T)
    dd: bool  # fully duration-dependent transitions (P >= K)
    Q: int  # period of the transition: 1 static, Q < K periodic (unused when dd)
    tr: Tensor  # (Q, C, C) static/periodic; (K, C+1, C) with the phantom start row when dd
    db: Tensor  # (K, C)
    start: Tensor  # (C,)
    end: Tensor  # (C,)
    lengths: list[int]
    at_len: dict[int, Tensor]  # step t -> indices of the sequences with L_b == t
    bad: Tensor | None  # (B, T, C) bool: position disallowed for a label

    def chunks(self):
        n = CHUNK or max(1, int(math.sqrt((self.T + 1) * self.K)))
        return [(t0, min(t0 + n, self.T + 1)) for t0 in range(0, self.T + 1, n)]


def _model(x: CRFInputs) -> _Model:
    B, T, C = x.scores.shape
    K = min(x.K, T)
    dev = x.scores.device
    start = x.start.to(WORK) if x.start is not None else torch.zeros(C, dtype=WORK, device=dev)
    end = x.end.to(WORK) if x.end is not None else torch.zeros(C, dtype=WORK, device=dev)
    dd = x.duration_dependent
    if dd:
        tr = torch.empty(K, C + 1, C, dtype=WORK, device=dev)
        tr[:, :C] = x.transition[:K].to(WORK)
        tr[:, C] = start
    else:
        tr = x.transition.to(WORK).reshape(-1, C, C)  # (Q, C, C); Q = 1 static
    lengths = x.lengths.tolist()
    at_len: dict[int, list[int]] = {}
    for b, n in enumerate(lengths):
        at_len.setdefault(n, []).append(b)
    at_len_t = {t: torch.tensor(v, dtype=torch.int64, device=dev) for t, v in at_len.items()}
    bad = ~x.allowed if x.allowed is not None else None
    return _Model(B, T, C, K, dd, tr.shape[0], tr, x.duration_bias[:K].to(WORK), start, end,
                  lengths, at_len_t, bad)


def _chunk_terms(x: CRFInputs, t0: int, t1: int):
    """A_t and P_t for steps t in [t0, t1), time-major (n, B, C) float64, with prefix sums
    relative to S[t0] = 0, and D = S[t1] - S[t0] (None for the last chunk), by which the
    rings are rebased between chunks."""
    T = x.T
    n = t1 - t0
    hi = min(t1, T)
    f = x.scores[:, t0:hi].to(WORK)
    S = torch.zeros(f.shape[0], hi - t0 + 1, f.shape[2], dtype=WORK, device=f.device)
    torch.cumsum(f, 1, out=S[:, 1:])
    A = S[:, :n].clone()
    P = -S[:, :n]
    if x.proj_end is not None:  # A_t gets proj_end[t-1] for t >= 1
        lo = max(t0, 1)
        A[:, lo - t0:] += x.proj_end[:, lo - 1:t1 - 1].to(WORK)
    if x.proj_start is not None:  # P_s gets proj_start[s] for s < T
        P[:, :hi - t0] += x.proj_start[:, t0:hi].to(WORK)
    D = S[:, n] if t1 <= T else None
    return A.transpose(0, 1).contiguous(), P.transpose(0, 1).contiguous(), D


# ----------------------------------------------------------------------------- forward


class _Forward:
    """The alpha recursion, one boundary at a time, with its ring state (see module doc).

    Rings are (rows, C, 2K) (static/periodic: (rows, Q, C, 2K), the Q rotated copies),
    durations last (reductions over the last dimension are the fast ones); slot s % K
    holds position s, written twice (slots j and j + K), so the window of boundary t is
    the slice [t % K, t % K + K), ordered s = t-K..t-1 (d = K..1). `rows` is B, or G * B
    when the backward pass recomputes G chunks side by side. After each step `opened`
    holds gamma^r_t + P_t (rows, Q, C) unrotated (static/periodic).
    """

    def __init__(self, m: _Model, rows: int):
        self.m, self.rows = m, rows
        C, K = m.C, m.K
        dev = m.db.device
        self.db_rev = m.db.flip(0).T.contiguous()  # (C, K): window index k <-> d = K - k
        if m.dd:
            self.tr_rev = m.tr.flip(0).permute(1, 2, 0).contiguous()  # (C+1, C, K)
            self.abuf = torch.full((rows, C + 1, 2 * K), NEG, dtype=WORK, device=dev)
            self.pbuf = torch.full((rows, C, 2 * K), NEG, dtype=WORK, device=dev)
            self.phantom = torch.full((rows, C + 1), NEG, dtype=WORK, device=dev)
            self.phantom[:, C] = 0.0
            self.no_phantom = torch.full((rows, 1), NEG, dtype=WORK, device=dev)
        else:
            self.tr_t = m.tr.transpose(1, 2).contiguous()  # (Q, dst, src)
            self.gbuf = torch.full((rows, m.Q, C, 2 * K), NEG, dtype=WORK, device=dev)
            self.start = m.start.expand(rows, m.Q, C)
            self.opened = None

    def _bufs(self):
        return (self.abuf, self.pbuf) if self.m.dd else (self.gbuf,)

    def state(self):
        return tuple(buf[..., :self.m.K].clone() for buf in self._bufs())

    def restore(self, state):
        K = self.m.K
        for buf, s in zip(self._bufs(), state):
            buf[..., :K] = s
            buf[..., K:] = s

    def rebase(self, D: Tensor):
        if self.m.dd:
            self.pbuf.add_(D[:, :, None])
        else:
            self.gbuf.add_(D[:, None, :, None])

    @staticmethod
    def _push(buf: Tensor, j: int, v: Tensor):
        K = buf.shape[-1] // 2
        buf.view(*buf.shape[:-1], 2, K)[..., j] = v[..., None]

    def step(self, j: int, A_t: Tensor, P_t: Tensor, *, q: int = 0, kill=None, first=None,
             last: bool = False, viterbi: bool = False):
        """Advance over one boundary t, whose ring slot is j (t % K) and whose copy of the
        periodic ring is q (t mod Q, relative to where the ring was restored).

        kill:  (rows, C) bool or None: labels disallowed at the position before the boundary.
        first: None, True, or (rows, 1) bool: the rows for which this boundary is t = 0
               (their first segment opens from `start`, no predecessor).
        last:  the boundary is t = T for every row: nothing opens there.
        Returns alpha_t (rows, C) (-inf at t = 0) and, for Viterbi, the backpointers:
        the duration of alpha_t's best segment per label, and the best predecessor label,
        per (residue, label) of a segment opening at t (static/periodic: (rows, Q, C)) or
        per label of alpha_t's best segment (duration-dependent).
        """
        m = self.m
        K = m.K
        bp = None
        if m.dd:
            if kill is not None:
                self.pbuf.masked_fill_(kill[:, :, None], NEG)
            pre = self.abuf[:, :, None, j:j + K] + self.tr_rev  # (rows, C+1, C, K)
            open_ = self.pbuf[:, :, j:j + K] + self.db_rev  # (rows, C, K)
            if viterbi:
                gi = pre.argmax(dim=1)  # (rows, C, K)
                win = pre.amax(dim=1) + open_
                k = win.argmax(dim=2)
                bp = (K - k, gi.gather(2, k[:, :, None]).squeeze(2))
                alpha = A_t + win.amax(dim=2)
            else:
                alpha = A_t + torch.logsumexp(torch.logsumexp(pre, dim=1) + open_, dim=2)
            if last:
                return alpha, bp
            new_a = torch.cat([alpha, self.no_phantom], dim=1)
            if first is True:
                new_a = self.phantom
            elif first is not None:
                new_a = torch.where(first, self.phantom, new_a)
            self._push(self.abuf, j, new_a)
            self._push(self.pbuf, j, P_t)
            return alpha, bp
        if kill is not None:
            self.gbuf.masked_fill_(kill[:, None, :, None], NEG)
        win = self.gbuf[:, q, :, j:j + K] + self.db_rev  # (rows, C, K)
        if viterbi:
            k = win.argmax(dim=2)
            alpha = A_t + win.amax(dim=2)
            if last:
                return alpha, (K - k, None)
            pre = alpha[:, None, None, :] + self.tr_t  # (rows, Q, dst, src)
            bp = (K - k, pre.argmax(dim=3))
            gamma = pre.amax(dim=3)
        else:
            alpha = A_t + torch.logsumexp(win, dim=2)
            if last:
                return alpha, None
            gamma = torch.logsumexp(alpha[:, None, None, :] + self.tr_t, dim=3)  # (rows, Q, C)
        if first is True:
            gamma = self.start
        elif first is not None:
            gamma = torch.where(first[:, :, None], self.start, gamma)
        self.opened = gamma + P_t[:, None, :]
        # copy q' of slot t holds the residue (q' - t - 1) mod Q: rotate by q + 1
        Q = self.m.Q
        self._push(self.gbuf, j, self.opened if Q == 1 else
                   torch.roll(self.opened, (q + 1) % Q, dims=1))
        return alpha, bp


def _step_args(m: _Model, t: int) -> dict:
    """Keyword arguments of _Forward.step for boundary t of the plain (unbatched) pass."""
    kill = m.bad[:, t - 1] if (m.bad is not None and t > 0) else None
    return {"kill": kill, "first": True if t == 0 else None, "last": t == m.T, "q": t % m.Q}
