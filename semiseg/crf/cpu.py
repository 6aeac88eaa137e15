"""The compiled CPU backend (numba): forward / backward / viterbi over a `CRFInputs`.

Same contract and semantics as the torch backend (reference.py; dispatch.py's docstring
states the contract): exact log-space recursions in float64 for float32 and float64
inputs, results in the dtype of `scores`. This module turns tensors into float64 numpy
arrays in the layouts the kernels read and back; the recursions themselves are in
cpu_kernels.py, one compiled function per sequence and pass, the sequences of a batch in
parallel. Importing this module imports numba (dispatch.py imports it only when first
needed); compiled code is cached on disk, so only the first process compiles.

Static (C, C) and periodic (P, C, C), P < K, transitions run the factorised kernels at
O(T (P C^2 + K C)); fully duration-dependent ones (P >= K) at O(T K C^2). Memory per
sequence: the rings (O(K C P) or O(K C)), checkpoints every n ~ sqrt(T K) boundaries,
one chunk of recomputed per-boundary values, and O(T C) for inputs, gradients and
Viterbi backpointers.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from . import cpu_kernels as k
from .inputs import CRFInputs

# Boundaries per chunk (checkpoint interval); None = about sqrt((T + 1) * K). Tests set
# it small to exercise the chunk boundaries.
CHUNK: int | None = None


def _np(t: Tensor | None, dtype=np.float64) -> np.ndarray | None:
    if t is None:
        return None
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=dtype)


class _Arrays:
    """The inputs as float64 numpy arrays, parameters truncated to K_eff = min(K, T).

    Missing proj_start / proj_end / allowed are (1, 1, C) placeholders with a False flag
    (one compiled signature for every combination of optional inputs)."""

    def __init__(self, x: CRFInputs):
        B, T, C = x.scores.shape
        K = min(x.K, T)
        self.B, self.T, self.C, self.K = B, T, C, K
        self.dd = x.duration_dependent
        self.f = _np(x.scores)
        self.has_ps = x.proj_start is not None
        self.has_pe = x.proj_end is not None
        self.has_alw = x.allowed is not None
        empty = np.zeros((1, 1, C))
        self.ps = _np(x.proj_start) if self.has_ps else empty
        self.pe = _np(x.proj_end) if self.has_pe else empty
        self.alw = _np(x.allowed, np.bool_) if self.has_alw else np.ones((1, 1, C), np.bool_)
        self.lengths = _np(x.lengths, np.int64)
        self.start = _np(x.start) if x.start is not None else np.zeros(C)
        self.end = _np(x.end) if x.end is not None else np.zeros(C)
        db = _np(x.duration_bias)[:K]
        self.db = np.ascontiguousarray(db)  # (K, C)
        self.db_t = np.ascontiguousarray(db.T)  # (C, K), d = k + 1
        self.db_rev = np.ascontiguousarray(db[::-1].T)  # (C, K), window index i: d = K - i
        tr = _np(x.transition)
        if self.dd:
            self.tr = np.ascontiguousarray(tr[:K])  # (K, src, dst)
            self.tr_rev = np.ascontiguousarray(self.tr[::-1].transpose(2, 0, 1))  # (dst, i, src)
        else:
            self.tr = np.ascontiguousarray(tr.reshape(-1, C, C))  # (Q, src, dst)
            self.trT = np.ascontiguousarray(self.tr.transpose(0, 2, 1))  # (Q, dst, src)
        self.n = CHUNK or max(1, int(math.sqrt((T + 1) * K)))
        self.n_chunks = -(-(T + 1) // self.n)

    def common(self):
        return (self.f, self.ps, self.pe, self.alw, self.has_ps, self.has_pe, self.has_alw,
                self.lengths)


def forward(x: CRFInputs):
    """log Z (B,) in the dtype of scores, and the checkpoints for `backward`."""
    a = _Arrays(x)
    B, C, K = a.B, a.C, a.K
    log_z = np.empty(B)
    alpha_end = np.empty((B, C))
    ck_lo = np.empty((B, a.n_chunks, C), np.int64)
    if a.dd:
        ck = (np.empty((B, a.n_chunks, K, C)), np.empty((B, a.n_chunks, C, K)))
        k.dd_forward(*a.common(), a.tr_rev, a.db_rev, a.start, a.end, a.n, *ck, ck_lo,
                     alpha_end, log_z)
    else:
        ck = (np.empty((B, a.n_chunks, C, a.tr.shape[0], K)),)
        k.fac_forward(*a.common(), a.trT, a.db_rev, a.start, a.end, a.n, *ck, ck_lo,
                      alpha_end, log_z)
    saved = (a, ck, ck_lo, alpha_end, log_z)
    return torch.from_numpy(log_z).to(x.scores.dtype), saved


def backward(x: CRFInputs, saved, grad_log_z: Tensor) -> dict[str, Tensor]:
    """Gradients of sum_b grad_log_z[b] * log Z_b for every name in inputs.FLOAT_FIELDS."""
    a, ck, ck_lo, alpha_end, log_z = saved
    B, T, C, K = a.B, a.T, a.C, a.K
    w = _np(grad_log_z)
    g_ps = np.zeros((B, T, C))
    g_pe = np.zeros((B, T, C))
    g_sc = np.zeros((B, T, C))
    g_tr = np.zeros((B, *a.tr.shape))
    g_start = np.zeros((B, C))
    g_end = np.zeros((B, C))
    if a.dd:
        g_db = np.zeros((B, K, C))
        k.dd_backward(*a.common(), a.tr, a.tr_rev, a.db, a.db_rev, a.start, a.end, a.n,
                      *ck, ck_lo, alpha_end, log_z, w, g_ps, g_pe, g_sc, g_tr, g_db,
                      g_start, g_end)
    else:
        g_db = np.zeros((B, C, K))
        k.fac_backward(*a.common(), a.tr, a.trT, a.db_rev, a.db_t, a.start, a.end, a.n,
                       *ck, ck_lo, alpha_end, log_z, w, g_ps, g_pe, g_sc, g_tr, g_db,
                       g_start, g_end)
        g_db = g_db.transpose(0, 2, 1)
    dtype = x.scores.dtype

    def shared(g: np.ndarray) -> np.ndarray:
        # per-sequence accumulators summed in a fixed order (deterministic)
        out = g[0].copy()
        for b in range(1, B):
            out += g[b]
        return out

    def out(v: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(v)).to(dtype)

    g_tr_full = torch.zeros(x.transition.shape, dtype=dtype)
    g_tr_full.view(-1, C, C)[:a.tr.shape[0]] = out(shared(g_tr))
    g_db_full = torch.zeros(x.duration_bias.shape, dtype=dtype)
    g_db_full[:K] = out(shared(g_db))
    return {
        "scores": out(g_sc),
        "transition": g_tr_full,
        "duration_bias": g_db_full,
        "start": out(shared(g_start)),
        "end": out(shared(g_end)),
        "proj_start": out(g_ps),
        "proj_end": out(g_pe),
    }


def viterbi(x: CRFInputs):
    """Max-plus recursion with int16/int32 backpointers, traced back in the kernel.

    Returns (score (B,) in the dtype of scores, labels (B, T) int64, seg_start (B, T) bool).
    """
    a = _Arrays(x)
    B, T, C, K = a.B, a.T, a.C, a.K
    idx = np.int16 if max(K, C) < 2**15 else np.int32
    score = np.empty(B)
    labels = np.full((B, T), -1, np.int64)
    seg_start = np.zeros((B, T), np.bool_)
    bp_d = np.zeros((B, T + 1, C), idx)
    if a.dd:
        bp_c = np.zeros((B, T + 1, 1, C), idx)
        k.dd_viterbi(*a.common(), a.tr_rev, a.db_rev, a.start, a.end, a.n, bp_d, bp_c,
                     labels, seg_start, score)
    else:
        bp_c = np.zeros((B, T + 1, a.tr.shape[0], C), idx)
        k.fac_viterbi(*a.common(), a.trT, a.db_rev, a.start, a.end, a.n, bp_d, bp_c,
                      labels, seg_start, score)
    return (torch.from_numpy(score).to(x.scores.dtype), torch.from_numpy(labels),
            torch.from_numpy(seg_start))
