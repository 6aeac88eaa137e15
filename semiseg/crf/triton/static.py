"""Static (C, C) transitions: the two-direction schedule (jit/chain.py's docstring has the
math): forward and reversed chains over one half of each sequence side by side, log Z at
their join; the backward's second halves, then every checkpoint segment at once; the
Viterbi halves, their join and traceback.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..inputs import CRFInputs, param_grads_wanted
from .host import _Both, _chain_state, _common, _gradients, _sides
from .jit import chain
from .schedule import Tuning, _shape, _work


def forward(t: Tuning, x: CRFInputs, keep: bool = False):
    """Both chains at once, each over half of every sequence, then log Z where they meet.
    keep (dispatch.py): a backward will follow; the chains' second halves then run now
    (_second_halves)."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P = t.segment_length(T, K, B, dev, C)
    nck = math.ceil(T / P) + 1  # boundaries 0, P, ..., and T when P divides it
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    (fa, ff), (ra, rf) = _sides(t, x, KP, CP, scores, allowed, ps, pe, start, end, flags)
    ck = {"f": _chain_state(B, nck, KP, CP, dev), "r": _chain_state(B, nck, KP, CP, dev)}
    mid = {"f": _chain_state(B, 1, KP, CP, dev), "r": _chain_state(B, 1, KP, CP, dev)}
    nw = t.chain_warps(KP, CP)
    rows = t.gamma_by_rows(CP)

    kw = t.chain_opts(KP, CP, nw)

    def half(side, args, fl, rev):
        def go():
            sk = t.split_opts(B, KP, CP, kw, dummy)
            chain._fwd_kernel[(B, sk.get("SPLIT", 1))](
                *args, x.lengths, *ck[side], *mid[side], dummy, dummy, dummy, dummy, dummy,
                dummy, dummy, _work(kw["TILE"], B, KP, CP, dummy), T, C, K, P, nck, 0,
                KP=KP, CP=CP, MODE=0, REV=rev, PHASE=0, GAMMA_ROWS=rows,
                **sk, **fl)
        return go

    _Both(dev, t.side_streams).run(half("f", fa, ff, False), half("r", ra, rf, True))
    log_z64 = torch.empty(B, device=dev, dtype=torch.float64)
    (f_ring, _, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid["f"], mid["r"]
    nt, jtile, parts = t.join_parts(B, KP, CP, dummy)
    if nt:
        chain._cross_part_kernel[(B, nt)](f_ring, r_ring, fa[5], x.lengths, parts, K, P,
                                          KP=KP, CP=CP, TILE=jtile, num_warps=4)
    chain._join_kernel[(B,)](f_ring, f_alp, f_n, r_ring, r_gam, r_n, fa[5], x.lengths,
                             log_z64, C, K, P, KP=KP, CP=CP, **kw, parts=parts, NT=nt)
    saved = {"ck": ck, "mid": mid, "log_z64": log_z64, "P": P, "nck": nck,
             "sides": ((fa, ff), (ra, rf)), "tuning": t}
    if keep:  # a backward follows: its chains now, beside the caller's host work
        saved["second"] = _second_halves(t, x, saved)
    return log_z64.to(x.scores.dtype), saved


def _second_halves(t: Tuning, x: CRFInputs, saved) -> dict:
    """Both static chains over their other halves, from the forward's state at M (every
    checkpoint, the final alpha and N of each direction; with the rows of every position
    when they fit t.rows_budget, else the wave buffers): the backward's first part, which
    needs nothing of grad_log_z. forward runs it when a backward will follow (keep), so
    that these kernels run while the host does the caller's work between the two calls
    (at small shapes the host's time, not the GPU's, set the wall clock); the same
    kernels on the same state, so the same bits as when backward runs it."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P, nck, ck, mid = saved["P"], saved["nck"], saved["ck"], saved["mid"]
    nseg = math.ceil(T / P)
    (fa, ff), (ra, rf) = saved["sides"]
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    dummy = torch.empty(1, **f32)
    row_bytes = 2 * CP * 4 + 8  # gamma, alpha (CP float32), N (float64)
    full = t.rows_fit(x, row_bytes)
    if full:
        rows = (torch.empty(B, T, CP, **f32), torch.empty(B, T, CP, **f32),
                torch.empty(B, T, **f64))
    else:
        W = t.wave_width(x, P, nseg, row_bytes)
        rows = (torch.empty(B, W, P, CP, **f32), torch.empty(B, W, P, CP, **f32),
                torch.empty(B, W, P, **f64))
    fin = {"f": (torch.empty(B, CP, **f32), torch.empty(B, **f64)),
           "r": (torch.empty(B, CP, **f32), torch.empty(B, **f64))}
    nw = t.chain_warps(KP, CP)
    gr = t.gamma_by_rows(CP)
    kw = t.chain_opts(KP, CP, nw)

    def other_half(side, args, fl, rev):
        def go():
            sk = t.split_opts(B, KP, CP, kw, dummy)
            chain._fwd_kernel[(B, sk.get("SPLIT", 1))](
                *args, x.lengths, *ck[side], *mid[side], *(rows if full else (dummy,) * 3),
                dummy, dummy, *fin[side], _work(kw["TILE"], B, KP, CP, dummy),
                T, C, K, P, nck, 0,
                KP=KP, CP=CP, MODE=0, REV=rev, PHASE=1, GAMMA_ROWS=gr, WRITE_ROWS=full,
                **sk, **fl)
        return go

    _Both(dev, t.side_streams).run(other_half("f", fa, ff, False), other_half("r", ra, rf, True))
    return {"full": full, "rows": rows, "fin": fin}


def backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """The other half of both chains (every checkpoint; _second_halves, which the forward
    has run already when it was told a backward follows), then every checkpoint segment of
    every sequence at once. `wanted` (dispatch.py): without duration_bias and transition
    in it, their sums are skipped (chain._bwd_kernel's PARAM_GRADS).

    When the rows of every position fit t.rows_budget, the chains write them on their second
    halves and each segment runs the chain that starts from the far side of the middle:
    the reversed one (reading forward rows) right of M, the forward one (reading reversed
    rows) left of M. Otherwise segments go in waves that fit the budget, each recomputing
    its forward rows before the reversed chain runs over it. The forward's tuning."""
    t = saved["tuning"]
    params = param_grads_wanted(wanted)
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P, nck, ck = saved["P"], saved["nck"], saved["ck"]
    nseg = math.ceil(T / P)
    (fa, ff), (ra, rf) = saved["sides"]
    scores, allowed, ps, pe, db, start, end = fa[0], fa[1], fa[2], fa[3], fa[5], fa[6], ra[6]
    f32 = {"device": dev, "dtype": torch.float32}
    dummy = torch.empty(1, **f32)
    second = saved.get("second") or _second_halves(t, x, saved)
    full, rows, fin = second["full"], second["rows"], second["fin"]
    if not full:
        W = rows[0].shape[1]
    nw = t.chain_warps(KP, CP)
    gr = t.gamma_by_rows(CP)
    kw = t.chain_opts(KP, CP, nw)
    # grad_log_z, zero where log Z is -inf (no gradient there)
    g32 = torch.where(saved["log_z64"] > float("-inf"), grad_log_z, 0.0).float()
    g_scores, g_ps, g_pe = torch.zeros(3, B, T, C, **f32).unbind(0)
    n_db, n_tr = (B * nck * KP * CP, B * nck * CP * CP) if params else (1, 1)
    parts = torch.zeros(n_db + n_tr, **f32)  # per-segment weighted partial sums
    g_db, g_tr = parts[:n_db], parts[n_db:]
    trans = x.transition.contiguous()
    lz = saved["log_z64"]
    bw = t.bwd_opts(KP, CP, nw, params, B * nck, dummy)

    def right(k0, w):
        def go():
            chain._bwd_kernel[(B, w)](
                scores, allowed, ps, pe, trans, db, end, x.lengths, g32,
                ck["f"][0], ck["f"][2], ck["f"][3], ck["r"][0], ck["r"][1], ck["r"][3],
                *rows, *fin["f"], lz, g_scores, g_ps, g_pe, g_db, g_tr,
                T=T, C=C, K=K, P=P, NCK=nck, seg0=k0, KP=KP, CP=CP, ROWS_FULL=full, **bw,
                **ff)
        return go

    if full:
        def left():
            chain._bwd_kernel[(B, nseg)](
                scores, allowed, pe, ps, trans.t().contiguous(), db, start, x.lengths, g32,
                ck["r"][0], ck["r"][2], ck["r"][3], ck["f"][0], ck["f"][1], ck["f"][3],
                *rows, *fin["r"], lz, g_scores, g_pe, g_ps, g_db, g_tr,
                T=T, C=C, K=K, P=P, NCK=nck, seg0=0, KP=KP, CP=CP, REV=True, ROWS_FULL=True,
                **bw, **rf)

        _Both(dev, t.side_streams).run(right(0, nseg), left)
    else:
        rwork = _work(kw["TILE"], B * W, KP, CP, dummy)  # the recompute's rings, every wave
        for k0 in range(0, nseg, W):
            w = min(W, nseg - k0)
            chain._fwd_kernel[(B, w)](
                *fa, x.lengths, *ck["f"], dummy, dummy, dummy, dummy, *rows, dummy, dummy,
                dummy, dummy, rwork, T, C, K, P, nck, k0,
                KP=KP, CP=CP, MODE=1, GAMMA_ROWS=gr, **kw, **ff)
            right(k0, w)()
    if not params:
        return _gradients(x, g_scores, g_ps, g_pe, None, None)
    transition = g_tr.view(-1, CP, CP).sum(0, dtype=torch.float64)[:C, :C]
    return _gradients(x, g_scores, g_ps, g_pe, g_db.view(-1, KP, CP).sum(0, dtype=torch.float64),
                      transition)


def viterbi(t: Tuning, x: CRFInputs):
    """Both Viterbi halves at once, then the best path across their meeting point and its
    traceback to either side."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    scores, flags = t.folded(x, scores, flags)
    (fa, ff), (ra, rf) = _sides(t, x, KP, CP, scores, allowed, ps, pe, start, end, flags)
    mid = {"f": _chain_state(B, 1, KP, CP, dev), "r": _chain_state(B, 1, KP, CP, dev)}
    bp_d = torch.empty(B, T, C, device=dev, dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, C, device=dev, dtype=torch.int8 if CP <= 128 else torch.int16)
    nw = t.viterbi_warps(KP, CP)
    gr = t.gamma_by_rows(CP)

    kw = t.chain_opts(KP, CP, nw)

    def half(side, args, fl, rev):
        def go():
            chain._fwd_kernel[(B,)](
                *args, x.lengths, dummy, dummy, dummy, dummy, *mid[side], dummy, dummy,
                dummy, bp_d, bp_c, dummy, dummy, _work(kw["TILE"], B, KP, CP, dummy),
                T, C, K, 1, 1, 0,
                KP=KP, CP=CP, MODE=2, REV=rev, GAMMA_ROWS=gr, **kw, **fl)
        return go

    _Both(dev, t.side_streams).run(half("f", fa, ff, False), half("r", ra, rf, True))
    score = torch.empty(B, device=dev, dtype=torch.float64)
    labels = torch.full((B, T), -1, device=dev, dtype=torch.int64)
    starts = torch.zeros(B, T, device=dev, dtype=torch.bool)
    (f_ring, _, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid["f"], mid["r"]
    chain._viterbi_join_kernel[(B, 2)](
        f_ring, f_alp, f_n, r_ring, r_gam, r_n, fa[5], x.lengths, bp_d, bp_c, score,
        labels, starts.view(torch.uint8), T, C, K, KP=KP, CP=CP, BLOCK=64, num_warps=nw)
    return score.to(x.scores.dtype), labels, starts
