"""The exact PyTorch backend: SPEC.md in code (forward, hand-written backward, Viterbi).

Steps t = 0..T are the boundaries between positions; a segment (s, d, c) runs from
boundary s to boundary t = s + d. With prefix sums S[t] = sum_{u<t} f[u] the score of a
segment is  S[t] - S[s] + duration_bias[d-1, c] + proj_start[s, c] + proj_end[t-1, c],
so we carry two per-step terms

    A_t(c) = S[t] + proj_end[t-1, c]          (closes a segment at t)
    P_s(c) = proj_start[s, c] - S[s]          (opens a segment at s)

Static (C, C) transitions, O(T (C^2 + K C)):

    gamma_0(c) = start[c]                      (no phantom predecessor)
    gamma_s(c) = logsumexp_c' alpha_s(c') + transition[c', c]            s >= 1
    alpha_t(c) = A_t(c) + logsumexp_{d=1..min(K,t)} gamma_{t-d}(c) + P_{t-d}(c)
                                                     + duration_bias[d-1, c]
    log Z      = logsumexp_c alpha_L(c) + end[c]

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

The backward pass is hand-written. The forward pass keeps the ring at the start of
each chunk (a checkpoint; log space needs no separate normaliser); the backward pass
walks the chunks from the end, recomputes each chunk's alphas from its checkpoint, and
runs the beta recursion through a second ring of the closing terms

    h_t(c)          = A_t(c) + beta_t(c)                 (beta_L = end, -inf beyond L)
    beta_gamma_s(c) = P_s(c) + logsumexp_d duration_bias[d-1, c] + h_{s+d}(c)
    beta_t(c')      = logsumexp_c transition[c', c] + beta_gamma_t(c)     t < L.

Segment marginals exp(gamma_s + P_s + duration_bias + h_{s+d} - log Z) give the
duration_bias gradient; start/end marginals of segments give proj_start/proj_end; the
label marginal (the scores gradient, the adjoint of the prefix sums) is the number of
segments started minus the number ended before t, accumulated backwards. Working memory
is O(K C + C^2) per sequence (O(K C^2) with duration-dependent transitions) plus the
checkpoints and one chunk of per-step values; nothing is O(T K C).
"""

from __future__ import annotations

import math
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


@dataclass
class _Model:
    """The parameters in float64, truncated to the durations that can occur (K <= T)."""

    B: int
    T: int
    C: int
    K: int  # effective maximum duration min(K, T)
    dd: bool  # duration-dependent transitions
    tr: Tensor  # (C, C) static; (K, C+1, C) with the phantom start row when dd
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
        tr = x.transition.to(WORK)
    lengths = x.lengths.tolist()
    at_len: dict[int, list[int]] = {}
    for b, n in enumerate(lengths):
        at_len.setdefault(n, []).append(b)
    at_len_t = {t: torch.tensor(v, dtype=torch.int64, device=dev) for t, v in at_len.items()}
    bad = ~x.allowed if x.allowed is not None else None
    return _Model(B, T, C, K, dd, tr, x.duration_bias[:K].to(WORK), start, end, lengths,
                  at_len_t, bad)


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
    """The alpha recursion, one step at a time, with its ring state (see module doc).

    Rings are (B, C, 2K), durations last (reductions over the last dimension are the
    fast ones); slot s % K holds position s, written twice (slots j and j + K), so the
    window of step t is the slice [t % K, t % K + K), ordered s = t-K..t-1 (d = K..1).
    """

    def __init__(self, x: CRFInputs, m: _Model):
        self.x, self.m = x, m
        B, C, K = m.B, m.C, m.K
        dev = x.scores.device
        self.db_rev = m.db.flip(0).T.contiguous()  # (C, K): window index k <-> d = K - k
        if m.dd:
            self.tr_rev = m.tr.flip(0).permute(1, 2, 0).contiguous()  # (C+1, C, K)
            self.abuf = torch.full((B, C + 1, 2 * K), NEG, dtype=WORK, device=dev)
            self.pbuf = torch.full((B, C, 2 * K), NEG, dtype=WORK, device=dev)
            self.phantom = torch.full((B, C + 1), NEG, dtype=WORK, device=dev)
            self.phantom[:, C] = 0.0
        else:
            self.tr_t = m.tr.T.contiguous()  # [dst, src]
            self.gbuf = torch.full((B, C, 2 * K), NEG, dtype=WORK, device=dev)

    def state(self):
        K = self.m.K
        if self.m.dd:
            return (self.abuf[:, :, :K].clone(), self.pbuf[:, :, :K].clone())
        return (self.gbuf[:, :, :K].clone(),)

    def restore(self, state):
        K = self.m.K
        bufs = (self.abuf, self.pbuf) if self.m.dd else (self.gbuf,)
        for buf, s in zip(bufs, state):
            buf[:, :, :K] = s
            buf[:, :, K:] = s

    def rebase(self, D: Tensor):
        (self.pbuf if self.m.dd else self.gbuf).add_(D[:, :, None])

    def step(self, t: int, A_t: Tensor, P_t: Tensor, viterbi: bool = False):
        """Advance over boundary t: returns alpha_t (None at t = 0) and, for Viterbi,
        the backpointers (duration, predecessor label) of alpha_t's best segment."""
        m = self.m
        K = m.K
        alpha = bp = None
        if m.dd:
            if t > 0:
                if m.bad is not None:
                    self.pbuf.masked_fill_(m.bad[:, t - 1, :, None], NEG)
                j = t % K
                pre = self.abuf[:, :, None, j:j + K] + self.tr_rev  # (B, C+1, C, K)
                open_ = self.pbuf[:, :, j:j + K] + self.db_rev  # (B, C, K)
                if viterbi:
                    gi = pre.argmax(dim=1)  # (B, C, K)
                    win = pre.amax(dim=1) + open_
                    k = win.argmax(dim=2)
                    bp = (K - k, gi.gather(2, k[:, :, None]).squeeze(2))
                    alpha = A_t + win.amax(dim=2)
                else:
                    alpha = A_t + torch.logsumexp(torch.logsumexp(pre, dim=1) + open_, dim=2)
                if t == m.T:
                    return alpha, bp
                new_a = torch.cat([alpha, self.phantom[:, :1]], dim=1)
            else:
                new_a = self.phantom
            j = t % K
            self.abuf[:, :, j] = new_a
            self.abuf[:, :, j + K] = new_a
            self.pbuf[:, :, j] = P_t
            self.pbuf[:, :, j + K] = P_t
            return alpha, bp
        if t > 0:
            if m.bad is not None:
                self.gbuf.masked_fill_(m.bad[:, t - 1, :, None], NEG)
            j = t % K
            win = self.gbuf[:, :, j:j + K] + self.db_rev  # (B, C, K)
            if viterbi:
                k = win.argmax(dim=2)
                alpha = A_t + win.amax(dim=2)
                if t == m.T:
                    return alpha, (K - k, None)
                pre = alpha[:, None, :] + self.tr_t  # (B, dst, src)
                bp = (K - k, pre.argmax(dim=2))
                gamma = pre.amax(dim=2)
            else:
                alpha = A_t + torch.logsumexp(win, dim=2)
                if t == m.T:
                    return alpha, None
                gamma = torch.logsumexp(alpha[:, None, :] + self.tr_t, dim=2)
        else:
            gamma = m.start.expand(m.B, m.C)
        g = gamma + P_t
        j = t % K
        self.gbuf[:, :, j] = g
        self.gbuf[:, :, j + K] = g
        return alpha, bp


def forward(x: CRFInputs):
    """log Z (B,) in the dtype of scores, and the checkpoints for `backward`."""
    with torch.no_grad():
        m = _model(x)
        fw = _Forward(x, m)
        log_z = torch.full((m.B,), NEG, dtype=WORK, device=x.scores.device)
        alpha_end = torch.full((m.B, m.C), NEG, dtype=WORK, device=x.scores.device)
        checkpoints = []
        for t0, t1 in m.chunks():
            A, P, D = _chunk_terms(x, t0, t1)
            checkpoints.append(fw.state())
            for i in range(t1 - t0):
                t = t0 + i
                alpha, _ = fw.step(t, A[i], P[i])
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


def backward(x: CRFInputs, saved, grad_log_z: Tensor) -> dict[str, Tensor]:
    """Gradients of sum_b grad_log_z[b] * log Z_b for every name in inputs.FLOAT_FIELDS."""
    with torch.no_grad():
        return _backward(x, saved, grad_log_z)


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
    g_db = torch.zeros(B, C, K, dtype=WORK, device=dev)
    g_start = torch.zeros(C, dtype=WORK, device=dev)
    g_end = (torch.exp(alpha_end + m.end - lz) * w).sum(0)

    fw = _Forward(x, m)
    hbuf = torch.full((B, C, 2 * K), NEG, dtype=WORK, device=dev)
    db_t = m.db.T.contiguous()  # (C, K), d = k + 1
    if m.dd:
        tr_p = m.tr.permute(1, 2, 0).contiguous()  # (C+1, C, K)
    g_tr = torch.zeros_like(tr_p) if m.dd else torch.zeros_like(m.tr)
    none_start = torch.full((B, C), NEG, dtype=WORK, device=dev)
    beyond = torch.tensor([0.0 if n >= T else NEG for n in m.lengths], dtype=WORK,
                          device=dev)[:, None]  # -inf for sequences with L_b < t
    min_len = min(m.lengths)
    carry = torch.zeros(B, C, dtype=WORK, device=dev)  # label marginal after the chunk
    chunks = m.chunks()
    for ci in range(len(chunks) - 1, -1, -1):
        t0, t1 = chunks[ci]
        n = t1 - t0
        A, P, D = _chunk_terms(x, t0, t1)
        if D is not None:
            hbuf.add_(D[:, :, None])  # rebase the closing terms from S[t1] = 0 to S[t0] = 0

        # recompute this chunk's alphas (and gamma_s + P_s for static transitions)
        fw.restore(checkpoints[ci])
        alphas = torch.full((n, B, C), NEG, dtype=WORK, device=dev)
        opens = None
        if not m.dd:
            opens = torch.empty(n, B, C, dtype=WORK, device=dev)
        for i in range(n):
            t = t0 + i
            alpha, _ = fw.step(t, A[i], P[i])
            if alpha is not None:
                alphas[i] = alpha
            if opens is not None and t < T:
                opens[i] = fw.gbuf[:, :, t % K]

        betas = torch.full((n, B, C), NEG, dtype=WORK, device=dev)  # beta_t (closing)
        bgs = torch.full((n, B, C), NEG, dtype=WORK, device=dev)  # beta_gamma_s (static)
        starts = torch.zeros(n, B, C, dtype=WORK, device=dev)  # P(segment of c starts at s)
        for i in range(n - 1, -1, -1):
            t = t0 + i
            if t < T:
                if m.bad is not None:
                    hbuf.masked_fill_(m.bad[:, t, :, None], NEG)
                j = (t + 1) % K
                close = hbuf[:, :, j:j + K]  # h_{t+d}, d = 1..K
                if m.dd:
                    u = P[i][:, :, None] + db_t + close  # (B, C, K)
                    z = tr_p + u[:, None]  # (B, C+1, C, K)
                    beta = torch.logsumexp(z, dim=(2, 3))[:, :C]
                    a_aug = (fw.phantom if t == 0 else
                             torch.cat([alphas[i], none_start[:, :1]], dim=1))
                    seg = torch.exp(z + (a_aug - lz)[:, :, None, None]) * w[:, :, None, None]
                    g_tr += seg.sum(0)
                    seg_c = seg.sum(1)  # (B, C, K)
                    g_db += seg_c
                    starts[i] = seg_c.sum(2)
                else:
                    v = close + db_t
                    mx = v.amax(dim=2).clamp_(min=_TINY)
                    e = torch.exp(v - mx[:, :, None])
                    tot = e.sum(dim=2)
                    bgs[i] = P[i] + torch.log(tot) + mx
                    fac = torch.exp(opens[i] + mx - lz) * w  # (B, C)
                    g_db.addcmul_(e, fac[:, :, None])
                    starts[i] = tot * fac
                    beta = (torch.logsumexp(m.tr + bgs[i][:, None, :], dim=2)
                            if t > 0 else None)
            else:
                beta = none_start
            if t == 0:
                break
            if t > min_len:
                beta = beta + beyond
            idx = m.at_len.get(t)
            if idx is not None:
                beta = beta.clone()
                beta[idx] = m.end
                beyond[idx] = 0.0
            betas[i] = beta
            h = A[i] + beta
            j = t % K
            hbuf[:, :, j] = h
            hbuf[:, :, j + K] = h

        # vectorised per-chunk gradients
        ends = torch.exp(alphas + betas - lz) * w  # P(segment of c ends at boundary t)
        if not m.dd:
            if t0 == 0:
                g_start += starts[0].sum(0)
            blk = max(1, (1 << 20) // (B * C * C))
            for a0 in range(0, n, blk):
                a, bg = alphas[a0:a0 + blk], bgs[a0:a0 + blk]
                g_tr += (torch.exp(a[:, :, :, None] + m.tr + bg[:, :, None, :]
                                   - lz[:, :, None]) * w[:, :, None]).sum((0, 1))
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
        g_tr_full.copy_(g_tr)
    g_db_full = torch.zeros_like(x.duration_bias, dtype=out_dtype)
    g_db_full[:K] = g_db.sum(0).T.to(out_dtype)
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
    with torch.no_grad():
        m = _model(x)
        B, T, C, K = m.B, m.T, m.C, m.K
        dev = x.scores.device
        fw = _Forward(x, m)
        d_type = torch.int16 if K < 2**15 else torch.int32
        c_type = torch.int16 if C < 2**15 else torch.int32
        bp_d = torch.zeros(T + 1, B, C, dtype=d_type, device=dev)
        bp_c = torch.zeros(T + 1, B, C, dtype=c_type, device=dev)
        score = torch.full((B,), NEG, dtype=WORK, device=dev)
        best = torch.zeros(B, dtype=torch.int64, device=dev)
        for t0, t1 in m.chunks():
            A, P, D = _chunk_terms(x, t0, t1)
            for i in range(t1 - t0):
                t = t0 + i
                alpha, bp = fw.step(t, A[i], P[i], viterbi=True)
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
                    # static: the predecessor of a segment starting at s is bp_c[s];
                    # duration-dependent: it is stored with the segment's end t
                    c = int(bp_c_np[t if m.dd else s, b, c])
                t = s
        return (score.to(x.scores.dtype), torch.from_numpy(labels).to(dev),
                torch.from_numpy(seg_start).to(dev))
