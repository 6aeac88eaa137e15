"""The exact PyTorch backend: docs/contract.md in code (forward, hand-written backward, Viterbi).

Steps t = 0..T are the boundaries between positions; a segment (s, d, c) runs from
boundary s to boundary t = s + d. With prefix sums S[t] = sum_{u<t} f[u] the score of a
segment is  S[t] - S[s] + duration_bias[d-1, c] + proj_start[s, c] + proj_end[t-1, c],
so we carry two per-step terms

    A_t(c) = S[t] + proj_end[t-1, c]          (closes a segment at t)
    P_s(c) = proj_start[s, c] - S[s]          (opens a segment at s)

Static (C, C) and periodic (Q, C, C) transitions, Q < K (Q is SPEC's P; here P is the
opening term below), O(T (Q C^2 + K C)); static is Q = 1 with transition[None]:

    gamma^r_0(c) = start[c]                    (no phantom predecessor)
    gamma^r_s(c) = logsumexp_c' alpha_s(c') + transition[r, c', c]      s >= 1, r < Q
    alpha_t(c)   = A_t(c) + logsumexp_{d=1..min(K,t)} gamma^{(d-1) mod Q}_{t-d}(c)
                                         + P_{t-d}(c) + duration_bias[d-1, c]
    log Z        = logsumexp_c alpha_L(c) + end[c]

The ring keeps Q rotated copies so that a boundary reads one of them whole: copy q, slot
s holds gamma^{(q-s-1) mod Q}_s + P_s, and boundary t reads copy t mod Q (slot t - d then
holds the gamma of r = (d-1) mod Q).

Duration-dependent (K, C, C) transitions, O(T K C^2): a phantom label C with
alpha_0 = one-hot(C) and transition[d-1, C, c] = start[c] turns gamma into

    alpha_t(c) = A_t(c) + logsumexp_{d, c'} alpha_{t-d}(c') + transition[d-1, c', c]
                                             + P_{t-d}(c) + duration_bias[d-1, c].

The forward pass streams over t with a ring buffer of the last K opening terms
(gamma_s + P_s, or alpha_s and P_s), stored twice over 2K slots so that the window of
step t is one contiguous slice ordered d = K..1. Everything runs in float64 (log space,
so no scaling is needed); prefix sums restart at every chunk of about sqrt(T K) steps
and the ring is rebased by the chunk's sum, so they stay small and accurate at any T.
The `allowed` mask costs nothing extra: when position t-1 is disallowed for label c,
every ring entry of label c (every segment that would cover t-1) is set to -inf.

The backward pass is hand-written (no autograd graph through the loop). The forward
pass keeps the ring at the start of each chunk (a checkpoint; log space needs no
separate normaliser); the backward pass walks the chunks from the end, recomputes their
alphas from the checkpoints (several chunks side by side, as extra rows of one batched
pass, each ring rolled so that its chunk starts in slot 0), and runs the beta recursion
through a second ring of the closing terms

    h_t(c)          = A_t(c) + beta_t(c)                 (beta_L = end, -inf beyond L)
    beta_gamma_s(c) = P_s(c) + logsumexp_d duration_bias[d-1, c] + h_{s+d}(c)
    beta_t(c')      = logsumexp_c transition[c', c] + beta_gamma_t(c)     t < L
                      (duration-dependent: logsumexp_{d,c} transition[d-1, c', c]
                       + P_t(c) + duration_bias[d-1, c] + h_{t+d}(c)),

killed by `allowed` like the forward ring. Segment marginals
exp(gamma_s + P_s + duration_bias + h_{s+d} - log Z) give the duration_bias gradient
(per step from the exponentials of the beta logsumexp; duration-dependent, per block
of steps, with prefix counts of disallowed positions); start/end marginals of segments
give proj_start/proj_end; the label marginal (the scores gradient, the adjoint of the
prefix sums) is the number of segments started minus the number ended before t,
accumulated backwards. Working memory is O(K C + C^2) per sequence (O(K C^2)
duration-dependent) plus the checkpoints and a bounded number of chunks of per-step
values; nothing is O(T K C). A sequence whose log Z is -inf gets zero gradients.

Periodic transitions in the backward pass: beta_gamma splits by residue,
beta_gamma^r_s(c) = P_s(c) + logsumexp_{d = r+1 mod Q} duration_bias[d-1, c] + h_{s+d}(c),
and beta_t(c') = logsumexp_{r, c} transition[r, c', c] + beta_gamma^r_t(c).

Viterbi runs the same recursion with max, keeps int16 backpointers (the duration of the
best segment ending at t per label; the best predecessor per label and residue at s, or,
duration-dependent, per segment end) and traces back on the CPU. All loops run on one CPU
thread (see `_one_thread`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .inputs import CRFInputs

WORK = torch.float64
NEG = float("-inf")
_TINY = torch.finfo(WORK).min  # stands in for a -inf maximum in hand-written logsumexp

# Steps per chunk (checkpoint interval); None = about sqrt((T + 1) * K). Tests set it
# small to exercise the chunk boundaries.
CHUNK: int | None = None
# The backward pass recomputes several chunks side by side: at most RECOMPUTE_ROWS
# steps x sequences at once, and rings of at most RECOMPUTE_RING elements (past that the
# per-op Python overhead is amortised and the exps dominate; larger groups gain nothing).
RECOMPUTE_ROWS = 1 << 15
RECOMPUTE_RING = 1 << 15


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


def forward(x: CRFInputs, keep: bool = False):
    """log Z (B,) in the dtype of scores, and the checkpoints for `backward` (`keep`, the
    dispatch contract's hint, is not used)."""
    with torch.no_grad(), _one_thread(x.scores.device):
        m = _model(x)
        fw = _Forward(m, m.B)
        log_z = torch.full((m.B,), NEG, dtype=WORK, device=x.scores.device)
        alpha_end = torch.full((m.B, m.C), NEG, dtype=WORK, device=x.scores.device)
        checkpoints = []
        for t0, t1 in m.chunks():
            A, P, D = _chunk_terms(x, t0, t1)
            checkpoints.append(fw.state())
            for i in range(t1 - t0):
                t = t0 + i
                alpha, _ = fw.step(t % m.K, A[i], P[i], **_step_args(m, t))
                idx = m.at_len.get(t)
                if idx is not None:
                    a = alpha[idx]
                    alpha_end[idx] = a
                    log_z[idx] = torch.logsumexp(a + m.end, dim=1)
            if D is not None:
                fw.rebase(D)
        saved = (m, checkpoints, log_z, alpha_end)
        return log_z.to(x.scores.dtype), saved


# ---------------------------------------------------------------------------- backward


def backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """Gradients of sum_b grad_log_z[b] * log Z_b for every name in inputs.FLOAT_FIELDS
    (all of them, whatever `wanted` asks: dispatch.py)."""
    with torch.no_grad(), _one_thread(x.scores.device):
        return _backward(x, saved, grad_log_z)


def _recompute(m: _Model, spans, states, terms):
    """The alphas (and, static, gamma_s + P_s) of the chunks `spans`, recomputed from their
    checkpoints side by side: one pass of the longest chunk's length over G * B rows.
    Each ring is rolled so that every chunk's first boundary sits in slot 0."""
    G, B, C, K = len(spans), m.B, m.C, m.K
    dev = m.db.device
    n = max(t1 - t0 for t0, t1 in spans)
    fw = _Forward(m, G * B)
    # slots roll so that each chunk starts in slot 0; the periodic copies so that its
    # first boundary reads copy 0
    rolled = [tuple(torch.roll(s, -(t0 % K), dims=-1) if m.dd else
                    torch.roll(s, (-(t0 % K), -(t0 % m.Q)), dims=(-1, 1)) for s in st)
              for (t0, _), st in zip(spans, states)]
    fw.restore(tuple(torch.cat(parts) for parts in zip(*rolled)))
    A = torch.zeros(n, G * B, C, dtype=WORK, device=dev)
    P = torch.zeros(n, G * B, C, dtype=WORK, device=dev)
    kill = None if m.bad is None else torch.zeros(n, G * B, C, dtype=torch.bool, device=dev)
    first = None
    for g, ((t0, t1), (A_g, P_g, _)) in enumerate(zip(spans, terms)):
        rows = slice(g * B, (g + 1) * B)
        A[:t1 - t0, rows] = A_g
        P[:t1 - t0, rows] = P_g
        if kill is not None:  # boundary t > 0 closes segments over position t - 1
            lo = max(t0, 1)
            kill[lo - t0:t1 - t0, rows] = m.bad[:, lo - 1:t1 - 1].transpose(0, 1)
        if t0 == 0:
            first = torch.zeros(G * B, 1, dtype=torch.bool, device=dev)
            first[rows] = True
    alphas = torch.empty(n, G * B, C, dtype=WORK, device=dev)
    opens = None if m.dd else torch.empty(n, G * B, m.Q, C, dtype=WORK, device=dev)
    for i in range(n):
        j = i % K
        alpha, _ = fw.step(j, A[i], P[i], q=i % m.Q, kill=None if kill is None else kill[i],
                           first=first if i == 0 else None)
        alphas[i] = alpha
        if opens is not None:
            opens[i] = fw.opened
    out = []
    for g, (t0, t1) in enumerate(spans):
        rows = slice(g * B, (g + 1) * B)
        out.append((alphas[:t1 - t0, rows], None if opens is None else opens[:t1 - t0, rows]))
    return out


def _bad_counts(m: _Model, t0: int, n: int) -> Tensor | None:
    """cnt[i] = number of disallowed positions in [t0, t0 + i) per (b, c), for i = 0..n+K-1
    (positions past T count as allowed): segment [s, s + d) is allowed iff
    cnt[s + d - t0] == cnt[s - t0]."""
    if m.bad is None:
        return None
    hi = min(t0 + n + m.K - 1, m.T)
    cnt = torch.zeros(n + m.K, m.B, m.C, dtype=torch.int32, device=m.bad.device)
    if hi > t0:
        c = m.bad[:, t0:hi].transpose(0, 1).to(torch.int32).cumsum(0)
        cnt[1:hi - t0 + 1] = c
        cnt[hi - t0 + 1:] = c[-1]
    return cnt


def _backward(x: CRFInputs, saved, grad_log_z: Tensor) -> dict[str, Tensor]:
    m, checkpoints, log_z, alpha_end = saved
    B, T, C, K = m.B, m.T, m.C, m.K
    dev, out_dtype = x.scores.device, x.scores.dtype
    finite = torch.isfinite(log_z)
    lz = torch.where(finite, log_z, torch.zeros_like(log_z))[:, None]  # (B, 1)
    w = torch.where(finite, grad_log_z.to(WORK), torch.zeros_like(log_z))[:, None]  # (B, 1)

    g_scores = torch.empty(B, T, C, dtype=out_dtype, device=dev)
    g_ps = torch.empty(B, T, C, dtype=out_dtype, device=dev)
    g_pe = torch.empty(B, T, C, dtype=out_dtype, device=dev)
    g_db = torch.zeros(C, K, dtype=WORK, device=dev)
    g_db_b = torch.zeros(B, C, K, dtype=WORK, device=dev)  # static: accumulated per step
    g_start = torch.zeros(C, dtype=WORK, device=dev)
    g_end = (torch.exp(alpha_end + m.end - lz) * w).sum(0)

    hbuf = torch.full((B, C, 2 * K), NEG, dtype=WORK, device=dev)
    db_t = m.db.T.contiguous()  # (C, K), d = k + 1
    if m.dd:
        tr_p = m.tr.permute(1, 2, 0).contiguous()  # (C+1, C, K): [src, dst, d-1]
        g_tr = torch.zeros_like(tr_p)
        # per-step segment marginals are (B, C+1, C, K): this many steps at a time
        blk = max(1, (1 << 19) // (B * (C + 1) * C * K))
    else:
        Q = m.Q
        g_tr = torch.zeros_like(m.tr)  # (Q, C, C)
        blk = max(1, (1 << 18) // (B * Q * C * C))
        r_of_k = torch.arange(K, device=dev) % Q  # residue of duration d = k + 1
        by_r = torch.nn.functional.one_hot(r_of_k, Q).to(WORK)  # (K, Q)
    none = torch.full((B, C), NEG, dtype=WORK, device=dev)
    beyond = torch.tensor([0.0 if n >= T else NEG for n in m.lengths], dtype=WORK,
                          device=dev)[:, None]  # -inf for sequences with L_b < t
    min_len = min(m.lengths)
    carry = torch.zeros(B, C, dtype=WORK, device=dev)  # label marginal after the chunk
    h_tail = torch.full((K, B, C), NEG, dtype=WORK, device=dev)  # h_{t1..t1+K-1} (dd)
    chunks = m.chunks()
    ring = B * (C + 1) * C * K if m.dd else B * C * K
    group = max(1, min(RECOMPUTE_ROWS // (B * (chunks[0][1] - chunks[0][0])),
                       RECOMPUTE_RING // ring))
    recomputed, terms = {}, {}
    for ci in range(len(chunks) - 1, -1, -1):
        t0, t1 = chunks[ci]
        n = t1 - t0
        if ci not in recomputed:
            # recompute the alphas (and gamma_s + P_s, static) of this chunk and of the
            # group - 1 before it, side by side from their checkpoints
            ids = list(range(max(0, ci - group + 1), ci + 1))
            terms = {cj: _chunk_terms(x, *chunks[cj]) for cj in ids}
            out = _recompute(m, [chunks[cj] for cj in ids], [checkpoints[cj] for cj in ids],
                             [terms[cj] for cj in ids])
            recomputed = dict(zip(ids, out))
        alphas, opens = recomputed.pop(ci)
        A, P, D = terms.pop(ci)
        if D is not None:
            # rebase the closing terms from S[t1] = 0 to S[t0] = 0
            hbuf.add_(D[:, :, None])
            if m.dd:
                h_tail.add_(D)

        # the beta recursion, backwards through the chunk
        betas = torch.full((n, B, C), NEG, dtype=WORK, device=dev)  # beta_t (closing)
        # beta_gamma^r_s (static/periodic), residues last
        bgs = None if m.dd else torch.full((n, B, C, Q), NEG, dtype=WORK, device=dev)
        starts = torch.zeros(n, B, C, dtype=WORK, device=dev)  # P(segment of c starts at s)
        # gamma^r_s + P_s - log Z, residues last (n, B, C, Q)
        opens_lz = None if m.dd else opens.transpose(2, 3) - lz[:, :, None]
        for i in range(n - 1, -1, -1):
            t = t0 + i
            if t < T:
                if m.bad is not None:  # segments over position t: gone
                    hbuf.masked_fill_(m.bad[:, t, :, None], NEG)
                j = (t + 1) % K
                close = hbuf[:, :, j:j + K]  # h_{t+d}, d = 1..K
                if t == 0 and m.dd:
                    break  # the starts at 0 (phantom predecessor) come below
                if m.dd:
                    u = P[i][:, :, None] + db_t + close  # (B, C, K)
                    beta = torch.logsumexp(tr_p[:C] + u[:, None], dim=(2, 3))
                else:
                    # beta_gamma^r_t by a logsumexp whose exponentials also give the
                    # marginals of the segments starting at t (duration_bias gradient)
                    v = close + db_t
                    mx = v.amax(dim=2).clamp_(min=_TINY)
                    e = torch.exp(v - mx[:, :, None])  # (B, C, K)
                    tot = e.sum(dim=2, keepdim=True) if Q == 1 else e @ by_r  # (B, C, Q)
                    bg = torch.log(tot, out=bgs[i]).add_(mx[:, :, None]).add_(P[i][:, :, None])
                    fac = torch.exp(opens_lz[i] + mx[:, :, None]).mul_(w[:, :, None])
                    g_db_b.addcmul_(e, fac if Q == 1 else fac[:, :, r_of_k])
                    torch.sum(tot * fac, dim=2, out=starts[i])
                    if t == 0:
                        break
                    # (B, Q, C', C) over the residues and the destination labels
                    beta = torch.logsumexp(m.tr + bg.transpose(1, 2)[:, :, None, :],
                                           dim=(1, 3))
            else:
                beta = none
            if t > min_len:
                beta = beta + beyond
            idx = m.at_len.get(t)
            if idx is not None:
                beta = beta.clone()
                beta[idx] = m.end
                beyond[idx] = 0.0
            betas[i] = beta
            _Forward._push(hbuf, t % K, A[i] + beta)

        if m.dd:
            # segment marginals, vectorised over blocks of steps: for a segment (s, d, c)
            # after c', exp(alpha_s(c') + transition[d-1, c', c] + P_s(c)
            #               + duration_bias[d-1, c] + h_{s+d}(c) - log Z),  h = A + beta
            # (unmasked h; disallowed segments are dropped with the prefix counts)
            h_ext = torch.cat([A + betas, h_tail])  # h_{t0..t1+K-1}
            cnt = _bad_counts(m, t0, n)
            for i0 in range(0, min(n, T - t0), blk):
                i1 = min(i0 + blk, n, T - t0)
                hw = h_ext[i0 + 1:i1 + K].unfold(0, K, 1)  # (r, B, C, K): h_{s+d}, d = k+1
                if cnt is not None:
                    ok = cnt[i0 + 1:i1 + K].unfold(0, K, 1) == cnt[i0:i1, :, :, None]
                    hw = torch.where(ok, hw, torch.full_like(hw, NEG))
                u = (P[i0:i1, :, :, None] + db_t) + hw  # (r, B, C, K)
                a_aug = torch.cat([alphas[i0:i1], none[None, :, :1].expand(i1 - i0, B, 1)], 2)
                if t0 + i0 == 0:  # the first segment's predecessor: the phantom label
                    a_aug[0] = NEG
                    a_aug[0, :, C] = 0.0
                seg = torch.exp(tr_p + u[:, :, None] + (a_aug - lz)[:, :, :, None, None])
                seg = seg * w[:, :, None, None]
                g_tr += seg.sum((0, 1))
                seg_c = seg.sum(2)  # (r, B, C, K)
                g_db += seg_c.sum((0, 1))
                starts[i0:i1] = seg_c.sum(3)
            h_tail = h_ext[:K].clone()

        # the other marginals, vectorised over the chunk
        ends = torch.exp(alphas + betas - lz) * w  # P(segment of c ends at boundary t)
        if not m.dd:
            if t0 == 0:
                g_start += starts[0].sum(0)
            for a0 in range(0, n, blk):
                # (r, B, Q, C', C): alpha_t(c') + transition[q, c', c] + beta_gamma^q_t(c)
                a = alphas[a0:a0 + blk][:, :, None, :, None]
                bg = bgs[a0:a0 + blk].transpose(2, 3)[:, :, :, None, :]
                g_tr += (torch.exp(a + m.tr + bg - lz[:, :, None, None])
                         * w[:, :, None, None]).sum((0, 1))
        hi = min(t1, T)
        rows = hi - t0
        g_ps[:, t0:hi] = starts[:rows].transpose(0, 1).to(out_dtype)
        lo = max(t0, 1)
        g_pe[:, lo - 1:t1 - 1] = ends[lo - t0:].transpose(0, 1).to(out_dtype)
        net = ends - starts  # marginal(u) = sum_{t > u} ends_t - starts_t
        rev = net.flip(0).cumsum(0).flip(0)  # rev[i] = sum_{i' >= i} net[i']
        label = torch.cat([rev[1:], torch.zeros_like(rev[:1])]) + carry
        g_scores[:, t0:hi] = label[:rows].transpose(0, 1).to(out_dtype)
        carry = carry + rev[0]

    if m.dd:
        g_tr = g_tr.permute(2, 0, 1)  # (K, C+1, C)
        g_start = g_tr[:, C].sum(0)
        g_tr = g_tr[:, :C]
    g_tr_full = torch.zeros_like(x.transition, dtype=out_dtype)
    if m.dd:
        g_tr_full[:K] = g_tr.to(out_dtype)
    else:
        g_tr_full.copy_(g_tr.reshape(x.transition.shape))
    g_db_full = torch.zeros_like(x.duration_bias, dtype=out_dtype)
    g_db_full[:K] = (g_db + g_db_b.sum(0)).T.to(out_dtype)
    return {
        "scores": g_scores,
        "transition": g_tr_full,
        "duration_bias": g_db_full,
        "start": g_start.to(out_dtype),
        "end": g_end.to(out_dtype),
        "proj_start": g_ps,
        "proj_end": g_pe,
    }


# ----------------------------------------------------------------------------- viterbi


def viterbi(x: CRFInputs):
    """Max-product recursion with small-integer backpointers, then traceback.

    Returns (score (B,) in the dtype of scores, labels (B, T) int64, seg_start (B, T) bool).
    """
    with torch.no_grad(), _one_thread(x.scores.device):
        m = _model(x)
        B, T, C, K = m.B, m.T, m.C, m.K
        dev = x.scores.device
        fw = _Forward(m, B)
        d_type = torch.int16 if K < 2**15 else torch.int32
        c_type = torch.int16 if C < 2**15 else torch.int32
        bp_d = torch.zeros(T + 1, B, C, dtype=d_type, device=dev)
        # predecessor labels: per segment end (dd) or per opening position and residue
        bp_c = torch.zeros((T + 1, B, C) if m.dd else (T + 1, B, m.Q, C), dtype=c_type,
                           device=dev)
        score = torch.full((B,), NEG, dtype=WORK, device=dev)
        best = torch.zeros(B, dtype=torch.int64, device=dev)
        for t0, t1 in m.chunks():
            A, P, D = _chunk_terms(x, t0, t1)
            for i in range(t1 - t0):
                t = t0 + i
                alpha, bp = fw.step(t % K, A[i], P[i], viterbi=True, **_step_args(m, t))
                if bp is not None:
                    bp_d[t] = bp[0]
                    if bp[1] is not None:
                        bp_c[t] = bp[1]
                idx = m.at_len.get(t)
                if idx is not None:
                    v, c = (alpha[idx] + m.end).max(dim=1)
                    score[idx] = v
                    best[idx] = c
            if D is not None:
                fw.rebase(D)

        bp_d_np = bp_d.cpu().numpy()
        bp_c_np = bp_c.cpu().numpy()
        best_np = best.cpu().numpy()
        ok = torch.isfinite(score).cpu().numpy()
        labels = np.full((B, T), -1, dtype=np.int64)
        seg_start = np.zeros((B, T), dtype=bool)
        for b in range(B):
            if not ok[b]:
                continue
            t, c = m.lengths[b], int(best_np[b])
            while t > 0:
                d = int(bp_d_np[t, b, c])
                s = t - d
                labels[b, s:t] = c
                seg_start[b, s] = True
                if s > 0:
                    # static/periodic: the predecessor of a segment starting at s with
                    # duration d is bp_c[s, (d-1) mod Q]; duration-dependent: it is
                    # stored with the segment's end t
                    c = int(bp_c_np[t, b, c] if m.dd else bp_c_np[s, b, (d - 1) % m.Q, c])
                t = s
        return (score.to(x.scores.dtype), torch.from_numpy(labels).to(dev),
                torch.from_numpy(seg_start).to(dev))
