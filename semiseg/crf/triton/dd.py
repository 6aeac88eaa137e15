"""Fully duration-dependent (K, C, C) transitions (jit/dd.py's section has the math): one
forward chain, then segment by segment from the end (recompute beside the reversed chain,
_Overlap), and the Viterbi with its traceback.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..inputs import CRFInputs
from .host import (
    _backward_buffers,
    _common,
    _grad_weights,
    _gradients,
    _log_z,
    _Overlap,
    _segmentation,
)
from .jit import dd as jit_dd
from .schedule import Tuning, _shape


def forward(t: Tuning, x: CRFInputs):
    """log Z and the saved state: one forward chain with checkpoints every P steps."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P = t.segment_length(T, K)
    nseg = math.ceil(T / P)
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    trans = x.transition.contiguous()
    db = x.duration_bias.contiguous()
    ck_ring = torch.empty(B, nseg, KP, CP, device=dev, dtype=torch.float32)
    ck_alp = torch.empty(B, nseg, CP, device=dev, dtype=torch.float32)
    ck_n = torch.empty(B, nseg, device=dev, dtype=torch.float64)
    fin_alp = torch.empty(B, CP, device=dev, dtype=torch.float32)
    fin_n = torch.empty(B, device=dev, dtype=torch.float64)
    jit_dd._fwd_dd_kernel[(B,)](
        scores, allowed, ps, pe, trans, db, start, x.lengths,
        ck_ring, ck_alp, ck_n,
        dummy, dummy,
        dummy, dummy,
        fin_alp, fin_n,
        T, C, K, P, nseg, 0,
        KP=KP, CP=CP, MODE=0, num_warps=t.chain_warps(KP, CP), **flags)
    log_z64 = _log_z(fin_alp, fin_n, end, C)
    saved = {"ck": (ck_ring, ck_alp, ck_n), "fin_alp": fin_alp, "fin_n": fin_n,
             "log_z64": log_z64, "P": P, "nseg": nseg, "tuning": t}
    return log_z64.to(x.scores.dtype), saved


def backward(x: CRFInputs, saved, grad_log_z: Tensor) -> dict[str, Tensor]:
    """The gradients, segment by segment from the end (with the forward's tuning)."""
    t = saved["tuning"]
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P, nseg = saved["P"], saved["nseg"]
    ck_ring, ck_alp, ck_n = saved["ck"]
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    trans = x.transition.contiguous()
    db = x.duration_bias.contiguous()
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    rows = [(torch.empty(B, P, CP, **f32), torch.empty(B, P, **f64))
            for _ in range(2 if nseg > 1 else 1)]
    (st_ring, st_gam, st_n, st_m), (g_scores, g_ps, g_pe, g_db, g_tr) = \
        _backward_buffers(x, KP, CP, (KP, C, C))
    g, g32 = _grad_weights(saved, grad_log_z)
    nw = t.chain_warps(KP, CP)

    def recompute(seg):
        jit_dd._fwd_dd_kernel[(B,)](
            scores, allowed, ps, pe, trans, db, start, x.lengths,
            ck_ring, ck_alp, ck_n,
            *rows[seg % len(rows)],
            dummy, dummy, dummy, dummy,
            T, C, K, P, nseg, seg,
            KP=KP, CP=CP, MODE=1, num_warps=nw, **flags)

    def reverse(seg):
        jit_dd._bwd_dd_kernel[(B,)](
            scores, allowed, ps, pe, trans, db, start, end, x.lengths, g32,
            ck_ring, ck_alp, ck_n,
            *rows[seg % len(rows)], saved["fin_alp"], saved["fin_n"], saved["log_z64"],
            st_ring, st_gam, st_n, st_m,
            g_scores, g_ps, g_pe, g_db, g_tr,
            T, C, K, P, nseg, seg,
            KP=KP, CP=CP, num_warps=nw, **flags)

    _Overlap(dev, nseg).run(recompute, reverse)
    n = min(K, KP)  # durations beyond the ring (> T) get 0
    # (P, C, C) with P >= K: slices past K (durations that cannot occur) get 0
    transition = torch.zeros(x.transition.shape, device=dev, dtype=torch.float64)
    transition[:n] = (g_tr[:, :n] * g[:, None, None, None]).sum(0)
    return _gradients(x, g_scores, g_ps, g_pe, (g_db * g[:, None, None]).sum(0), transition)


def viterbi(t: Tuning, x: CRFInputs):
    """(score, labels, seg_start): the max-product chain with backpointers, the traceback."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    trans = x.transition.contiguous()
    db = x.duration_bias.contiguous()
    bp_d = torch.empty(B, T, C, device=dev, dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, C, device=dev, dtype=torch.int8 if CP <= 128 else torch.int16)
    fin_alp = torch.empty(B, CP, device=dev, dtype=torch.float32)
    fin_n = torch.empty(B, device=dev, dtype=torch.float64)
    jit_dd._fwd_dd_kernel[(B,)](
        scores, allowed, ps, pe, trans, db, start, x.lengths,
        dummy, dummy, dummy,
        dummy, dummy,
        bp_d, bp_c,
        fin_alp, fin_n,
        T, C, K, 1, 1, 0,
        KP=KP, CP=CP, MODE=2, num_warps=t.chain_warps(KP, CP), **flags)
    last = fin_alp[:, :C].double() + end.double()
    best, best_c = last.max(dim=1)
    score = fin_n + best
    best_c = torch.where(torch.isfinite(score), best_c, torch.full_like(best_c, -1))
    seg_label = torch.full((B, T), -1, device=dev, dtype=torch.int64)
    jit_dd._traceback_dd_kernel[(B,)](bp_d, bp_c, best_c, x.lengths, seg_label, T, C,
                                     num_warps=1)
    return _segmentation(x, score, seg_label)
