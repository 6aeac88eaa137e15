"""The exact PyTorch backend: docs/contract.md in code (forward, hand-written backward, Viterbi).

Steps t = 0..T are the boundaries between positions; a segment (s, d, c) runs from
boundary s to boundary t = s + d. With prefix sums S[t] = sum_{u<t} f[u] the score of a
segment is  S[t] - S[s] + duration_bias[d-1, c] + proj_start[s, c] + proj_end[t-1, c],
so we carry two per-step terms

    A_t(c) = S[t] + proj_end[t-1, c]          (closes a segment at t)
    P_s(c) = proj_start[s, c] - S[s]          (opens a segment at s)

Static (C, C) and periodic (Q, C, C) transitions, Q < K (Q is the contract's P; here P is the
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

The backward pass is hand-written: reference_backward.py has its recursion.

Viterbi runs the same recursion with max, keeps int16 backpointers (the duration of the
best segment ending at t per label; the best predecessor per label and residue at s, or,
duration-dependent, per segment end) and traces back on the CPU. All loops run on one CPU
thread (see `_one_thread`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .inputs import CRFInputs
from .reference_backward import gradients
from .reference_model import NEG, WORK, _chunk_terms, _Forward, _model, _one_thread, _step_args


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
    (all of them, whatever `wanted` asks: dispatch.py); reference_backward.py computes
    them."""
    with torch.no_grad(), _one_thread(x.scores.device):
        return gradients(x, saved, grad_log_z)


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
