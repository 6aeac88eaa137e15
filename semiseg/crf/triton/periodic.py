"""Periodic (P, C, C) transitions with P < K (jit/end.py's section has the schedule): the
end-indexed forward chain (in registers or in tiles of global memory: jit/end.py, or split
over residue planes: jit/split_end.py) beside the start-indexed reversed chain
(jit/chain.py with NP > 1), the join, the wave backward, and the Viterbi; dense or sparse
transition tables.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..inputs import CRFInputs, param_grads_wanted
from .host import _Both, _chain_state, _common, _db_table, _gradients
from .jit import chain, split_end
from .jit import end as jit_end
from .schedule import Tuning, _exchange_buffers, _pow2, _shape


def _period(x: CRFInputs):
    return x.period, _pow2(x.period)


def _end_chain(t: Tuning, grid: tuple, args: tuple, nw: int, **kw) -> None:
    """jit_end._fwd_end_kernel[grid](*args, **kw), or split_end._fwd_end_split_kernel over
    (B, NP) programs where end_programs asks for it (MODE 0); with TILE > 0 and a scratch
    ring per program where end_tile asks for it (same results, bitwise)."""
    KP, CP, NP = kw["KP"], kw["CP"], kw["NP"]
    dev = args[0].device
    if kw["MODE"] == 0 and len(grid) == 1 and t.end_programs(grid[0], KP, CP, NP, dev) > 1:
        B = grid[0]
        kq = _pow2(-(-KP // NP))
        if kw.get("SP"):
            kw = dict(kw, wsp=torch.empty(B * NP * CP, device=dev, dtype=torch.float32))
        tag = bool(t.end_tag)  # alpha's row, by step parity (tagged: 2 NPP slots)
        ex = _exchange_buffers(B, (2 * _pow2(NP) if tag else 2) * CP, dev, tag)
        split_end._fwd_end_split_kernel[(B, NP)](
            *args[:-6], ex["xch"], ex["bar"], *args[-6:], KQ=kq, PREFETCH=int(bool(t.prefetch)),
            TAG=int(tag),
            num_warps=t.end_split_warps or (8 if kq * CP <= 4096 else 16), **kw)
        return
    tile = t.end_tile(KP, CP)
    if not tile:
        jit_end._fwd_end_kernel[grid](*args, num_warps=nw, **kw)
        return
    work = torch.empty(math.prod(grid), KP, CP, device=args[0].device, dtype=torch.float32)
    jit_end._fwd_end_kernel[grid](*args, work=work, TILE=tile,
                                  num_warps=t.tile_warps or min(nw, 16), **kw)


def _per_transition(tr: Tensor, CP: int, NPP: int, transpose: bool) -> Tensor:
    """(NPP, CP, CP) -inf padded slices of a (P, C, C) transition, each transposed or not."""
    P, C = tr.shape[0], tr.shape[1]
    out = torch.full((NPP, CP, CP), float("-inf"), device=tr.device, dtype=torch.float32)
    out[:P, :C, :C] = tr.transpose(1, 2) if transpose else tr
    return out


def _sparse_opts(sp: int, programs: int, rows: int, CP: int, dummy: Tensor) -> dict:
    """A periodic kernel's sparse launch options: SP and, with sparse tables, `wsp`: a
    (rows, CP) float32 scratch for each of `programs` programs (common._spread)."""
    wsp = torch.empty(programs * rows * CP, device=dummy.device) if sp else dummy
    return {"SP": sp, "wsp": wsp}


def _sparse_rows(m: Tensor, sp: int):
    """(values, int32 columns) of the first sp entries of every row of m (..., CP) in the
    order finite first, each group by ascending column: rows with fewer finite entries end
    in -inf values (at columns of non-finite entries). GPU operations only, so a graph
    captured over them is right for new values with the same width."""
    order = torch.sort((~torch.isfinite(m)).to(torch.int32), dim=-1, stable=True).indices
    order = order[..., :sp]
    return m.gather(-1, order).contiguous(), order.to(torch.int32).contiguous()


def _per_tables(x: CRFInputs, CP: int, NPP: int, sp: int, dummy: Tensor) -> dict:
    """The periodic kernels' transition operands, (values, columns) each: "f" the forward
    chain's [r, dst, src], "r" the reversed chain's [r, c', c], "b" the backward's [r, src,
    dst]. Dense (sp = 0): padded (NPP, CP, CP) tables (the backward's the (P, C, C) input)
    without columns; sparse: the pred and succ forms (NPP, CP, sp) of chain.py's "Sparse
    periodic transitions"."""
    if not sp:
        return {"f": (_per_transition(x.transition, CP, NPP, transpose=True), dummy),
                "r": (_per_transition(x.transition, CP, NPP, transpose=False), dummy),
                "b": (x.transition.contiguous(), dummy)}
    full = _per_transition(x.transition, CP, NPP, transpose=False)  # [r, src, dst]
    succ = _sparse_rows(full, sp)
    return {"f": _sparse_rows(full.transpose(1, 2), sp), "r": succ, "b": succ}


def _end_state(B: int, n: int, KP: int, CP: int, dev):
    """The end-indexed forward chain's ring, alpha (float32) and normaliser (float64)."""
    return (torch.empty(B, n, KP, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, device=dev, dtype=torch.float64))


def _per_rows(x: CRFInputs, CP: int, NPP: int, n: int):
    """The periodic family's forward rows for n positions per sequence (B, n, ...): gamma^r
    (NPP, CP), alpha (CP) float32 and the normaliser float64."""
    f32 = {"device": x.scores.device, "dtype": torch.float32}
    return (torch.empty(x.batch, n, NPP, CP, **f32), torch.empty(x.batch, n, CP, **f32),
            torch.empty(x.batch, n, device=x.scores.device, dtype=torch.float64))


def _per_row_bytes(CP: int, NPP: int) -> int:
    """Bytes of one periodic-family row: gamma^r (NPP, CP), alpha (CP) float32, N float64."""
    return (NPP + 1) * CP * 4 + 8


def forward(t: Tuning, x: CRFInputs, keep: bool = False, sp: int = 0):
    """log Z and the saved state; keep: the forward rows of [0, M) now, when they fit the
    rows budget (the backward's chains write the rest). sp: t.sparse_width(x)."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    P = t.segment_length(T, K, B, dev, C)
    meet = t.meet
    if meet != 32:  # segments fine enough for the chains to meet near meet / 64 of L
        P = min(P, max(t.min_segment, math.ceil(T / 32)))
    nck = math.ceil(T / P) + 1
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    db = _db_table(x, KP, CP, 2 * KP)
    tabs = _per_tables(x, CP, NPP, sp, dummy)
    (tr_f, ti_f), (tr_r, ti_r) = tabs["f"], tabs["r"]
    rflags = dict(flags, HAS_PS=flags["HAS_PE"], HAS_PE=flags["HAS_PS"])
    ck = {"f": _end_state(B, nck, KP, CP, dev), "r": _chain_state(B, nck, KP, CP, dev)}
    mid = {"f": _end_state(B, 1, KP, CP, dev), "r": _chain_state(B, 1, KP, CP, dev)}
    nw = t.chain_warps(KP, CP)
    # keep: the rows of [0, M) now, of [M, L) in the backward's second half (_backward_per)
    rows = _per_rows(x, CP, NPP, T) if keep and t.rows_fit(x, _per_row_bytes(CP, NPP)) else None

    def fwd():
        _end_chain(t, (B,), (
            scores, allowed, ps, pe, tr_f, db, start, x.lengths, *ck["f"], *mid["f"],
            dummy, dummy, *(rows or (dummy,) * 3), dummy, dummy, dummy, dummy,
            T, C, K, P, nck, 0), nw, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=0, PHASE=0,
            WRITE_ROWS=rows is not None, tidx=ti_f, **_sparse_opts(sp, B, 1, CP, dummy),
            MEET=meet, **flags)

    rk = t.rev_opts(KP, CP, nw, B, dummy, NP)

    def rev():
        chain._fwd_kernel[(B, rk["SPLIT"])](
            scores, allowed, pe, ps, tr_r, db, end, x.lengths, *ck["r"], *mid["r"],
            dummy, dummy, dummy, dummy, dummy, dummy, dummy, T=T, C=C, K=K, P=P, NCK=nck,
            seg0=0, KP=KP, CP=CP, MODE=0, REV=True, PHASE=0, NP=NP, NPP=NPP, tidx=ti_r,
            MEET=meet, **_sparse_opts(sp, B * rk["SPLIT"], NPP, CP, dummy), **rk, **rflags)

    _Both(dev, t.side_streams).run(fwd, rev)
    log_z64 = torch.empty(B, device=dev, dtype=torch.float64)
    (f_ring, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid["f"], mid["r"]
    jit_end._join_end_kernel[(B,)](f_ring, f_alp, f_n, r_ring, r_gam, r_n, x.lengths, log_z64,
                                 C, P, KP=KP, CP=CP, MEET=meet, **t.chain_opts(KP, CP, nw))
    saved = {"ck": ck, "mid": mid, "log_z64": log_z64, "P": P, "nck": nck, "rows": rows,
             "ops": (scores, allowed, ps, pe, db, start, end, tabs, flags, rflags), "sp": sp,
             "tuning": t}
    return log_z64.to(x.scores.dtype), saved


def backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """Both chains' other halves, then the wave backward (with the forward's tuning). With
    the rows of every position kept and Tuning.early_wave, the wave over the segments
    right of the meeting point follows the forward chain's second half on its stream,
    beside the reversed chain's (those segments read the reversed chain's first half
    only); the rest follows both."""
    t = saved["tuning"]
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    P, nck, ck, mid, meet = saved["P"], saved["nck"], saved["ck"], saved["mid"], t.meet
    scores, allowed, ps, pe, db, start, end, tabs, flags, rflags = saved["ops"]
    (tr_f, ti_f), (tr_r, ti_r), (trans, ti_b) = tabs["f"], tabs["r"], tabs["b"]
    sp = saved["sp"]
    nseg = math.ceil(T / P)
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    dummy = torch.empty(1, **f32)
    fin = {"f": (torch.empty(B, CP, **f32), torch.empty(B, **f64)),
           "r": (torch.empty(B, CP, **f32), torch.empty(B, **f64))}
    nw = t.chain_warps(KP, CP)
    full = saved.get("rows")  # the forward wrote the rows of [0, M); this half writes the rest
    if full is not None:
        W, rows = nseg, full
    else:
        W = t.wave_width(x, P, nseg, _per_row_bytes(CP, NPP))
        rows = _per_rows(x, CP, NPP, W * P)
    g32 = torch.where(saved["log_z64"] > float("-inf"), grad_log_z, 0.0).float()
    g_scores, g_ps, g_pe = torch.zeros(3, B, T, C, **f32).unbind(0)
    params = param_grads_wanted(wanted)
    g_db = torch.zeros(B, nck, KP, CP, **f32) if params else dummy
    g_tr = torch.zeros(B, nck, NPP, CP, sp or CP, **f32) if params else dummy
    nw_rec = t.wave_warps(KP, CP, "recompute")
    bw = t.bwd_opts(KP, CP, t.wave_warps(KP, CP, "bwd", params, sp > 0), params, B * nck, dummy,
                    NP, sp > 0)
    rec_sp = _sparse_opts(sp, B * W, 1, CP, dummy)
    bwd_sp = _sparse_opts(sp, B * nck, NPP, CP, dummy)

    def wave(k0: int, w: int) -> None:
        """The backward of checkpoint segments [k0, k0 + w) of every sequence."""
        if full is None:
            _end_chain(t, (B, w), (
                scores, allowed, ps, pe, tr_f, db, start, x.lengths, *ck["f"],
                dummy, dummy, dummy, dummy, dummy, *rows, dummy, dummy, dummy, dummy,
                T, C, K, P, nck, k0), nw_rec, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=1,
                tidx=ti_f, MEET=meet, **rec_sp, **flags)
        chain._bwd_kernel[(B, w)](
            scores, allowed, ps, pe, trans, db, end, x.lengths, g32,
            ck["f"][0], ck["f"][1], ck["f"][2], ck["r"][0], ck["r"][1], ck["r"][3],
            *rows, *fin["f"], saved["log_z64"], g_scores, g_ps, g_pe, g_db, g_tr,
            T=T, C=C, K=K, P=P, NCK=nck, seg0=k0, KP=KP, CP=CP, NP=NP, NPP=NPP, END=True,
            ROWS_FULL=full is not None, tidx=ti_b, MEET=meet, **bwd_sp, **bw, **flags)

    # segments from `right` on lie right of every sequence's meeting point (_split grows
    # with the length), so they need the forward chain's second half and nothing more
    right = -(-nseg * meet // 64)
    early = full is not None and t.early_wave and 0 < right < nseg

    def fwd():
        _end_chain(t, (B,), (
            scores, allowed, ps, pe, tr_f, db, start, x.lengths, *ck["f"], *mid["f"],
            dummy, dummy, *(full or (dummy,) * 3), dummy, dummy, *fin["f"],
            T, C, K, P, nck, 0), nw, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=0, PHASE=1,
            WRITE_ROWS=full is not None, tidx=ti_f, **_sparse_opts(sp, B, 1, CP, dummy),
            MEET=meet, **flags)
        if early:
            wave(right, nseg - right)

    rk = t.rev_opts(KP, CP, nw, B, dummy, NP)

    def rev():
        chain._fwd_kernel[(B, rk["SPLIT"])](
            scores, allowed, pe, ps, tr_r, db, end, x.lengths, *ck["r"], *mid["r"],
            dummy, dummy, dummy, dummy, dummy, *fin["r"], T=T, C=C, K=K, P=P, NCK=nck,
            seg0=0, KP=KP, CP=CP, MODE=0, REV=True, PHASE=1, NP=NP, NPP=NPP, tidx=ti_r,
            MEET=meet, **_sparse_opts(sp, B * rk["SPLIT"], NPP, CP, dummy), **rk, **rflags)

    _Both(dev, t.side_streams).run(fwd, rev)
    for k0 in range(0, right if early else nseg, W):
        wave(k0, min(W, (right if early else nseg) - k0))
    if not params:
        return _gradients(x, g_scores, g_ps, g_pe, None, None)
    transition = g_tr.view(-1, NPP, CP, sp or CP).sum(0, dtype=torch.float64)
    if sp:  # the sparse slots [r, src, s] back to their columns (-inf slots add 0)
        transition = torch.zeros(NPP, CP, CP, **f64).scatter_add_(2, ti_b.long(), transition)
    transition = transition[:NP, :C, :C]
    return _gradients(x, g_scores, g_ps, g_pe, g_db.view(-1, KP, CP).sum(0, dtype=torch.float64),
                      transition)


def _viterbi_setup(t: Tuning, x: CRFInputs, KP: int, CP: int):
    """What both Viterbi forms start from: _common's inputs (the scores folded as the
    tuning asks), the duration table, and the forward chain's state at its end with
    each ring slot's best duration and predecessor (int32 (B, KP, CP))."""
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    scores, flags = t.folded(x, scores, flags)
    common = (scores, allowed, ps, pe, start, end, flags, dummy)
    dev = x.scores.device
    i32 = {"device": dev, "dtype": torch.int32}
    mid = (_end_state(x.batch, 1, KP, CP, dev), torch.empty(x.batch, KP, CP, **i32),
           torch.empty(x.batch, KP, CP, **i32))
    return common, _db_table(x, KP, CP), mid


def viterbi(t: Tuning, x: CRFInputs, sp: int = 0):
    """(score, labels, seg_start); sp: t.sparse_width(x) where t.sparse_viterbi."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    (scores, allowed, ps, pe, start, end, flags, dummy), db, (mid_f, mid_bd, mid_bc) = \
        _viterbi_setup(t, x, KP, CP)
    tabs = _per_tables(x, CP, NPP, sp, dummy)
    (tr_f, ti_f), (tr_r, ti_r) = tabs["f"], tabs["r"]
    rflags = dict(flags, HAS_PS=flags["HAS_PE"], HAS_PE=flags["HAS_PS"])
    mid_r = _chain_state(B, 1, KP, CP, dev)
    bp_d = torch.empty(B, T, NPP, C, device=dev,
                       dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, NPP, C, device=dev,
                       dtype=torch.int16 if NPP * CP < 2**15 else torch.int32)
    nw = t.viterbi_per_warps(KP, CP)

    def fwd():
        _end_chain(t, (B,), (
            scores, allowed, ps, pe, tr_f, db, start, x.lengths, dummy, dummy, dummy,
            *mid_f, mid_bd, mid_bc, dummy, dummy, dummy, bp_d, bp_c, dummy, dummy,
            T, C, K, 1, 1, 0), nw, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=2, tidx=ti_f,
            **_sparse_opts(sp, B, 1, CP, dummy), **flags)

    rk = t.rev_opts(KP, CP, nw, B, dummy)

    def rev():
        chain._fwd_kernel[(B,)](
            scores, allowed, pe, ps, tr_r, db, end, x.lengths, dummy, dummy, dummy, dummy,
            *mid_r, dummy, dummy, dummy, bp_d, bp_c, dummy, dummy, T=T, C=C, K=K, P=1, NCK=1,
            seg0=0, KP=KP, CP=CP, MODE=2, REV=True, NP=NP, NPP=NPP, tidx=ti_r,
            **_sparse_opts(sp, B, NPP, CP, dummy), **rk, **rflags)

    _Both(dev, t.side_streams).run(fwd, rev)
    score = torch.empty(B, device=dev, dtype=torch.float64)
    labels = torch.full((B, T), -1, device=dev, dtype=torch.int64)
    starts = torch.zeros(B, T, device=dev, dtype=torch.bool)
    (f_ring, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid_f, mid_r
    jit_end._viterbi_join_end_kernel[(B, 2)](
        f_ring, mid_bd, mid_bc, f_alp, f_n, r_ring, r_gam, r_n, x.lengths, bp_d, bp_c,
        score, labels, starts.view(torch.uint8), T, C, KP=KP, CP=CP, NPP=NPP, BLOCK=64,
        **t.chain_opts(KP, CP, nw))
    return score.to(x.scores.dtype), labels, starts


def viterbi_tables(t: Tuning, x: CRFInputs, sp: int = 0, init_rows: Tensor | None = None):
    """The forward max-sum of each whole sequence, for certified windows
    (annotate/device_maxsum.py): (bp_d, bp_c, alpha_end). bp_d[b, p, c] / bp_c[b, p, c]
    (B, T, C) int16 or int32: the duration of / the label before the best segment of c
    ending at p + 1 (seams._forward's bp_d[p + 1] / bp_c[p + 1]; bp_d 0 where no allowed
    path ends there; bp_c 0 for a segment from the first boundary); alpha_end (B, CP)
    float32: alpha at L_b, relative to its largest entry. init_rows (B, NPP, CP), -inf
    padded: gamma^r at the first boundary (a window entered after a known label) instead
    of x.start. sp: t.sparse_width(x) where t.sparse_viterbi."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    (scores, allowed, ps, pe, start, _, flags, dummy), db, (mid, mid_bd, mid_bc) = \
        _viterbi_setup(t, x, KP, CP)
    tr_f, ti_f = _per_tables(x, CP, NPP, sp, dummy)["f"]
    bp_d = torch.empty(B, T, C, device=dev, dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, C, device=dev, dtype=torch.int16 if CP < 2**15 else torch.int32)
    init = start if init_rows is None else init_rows.contiguous()
    _end_chain(t, (B,), (
        scores, allowed, ps, pe, tr_f, db, init, x.lengths, dummy, dummy, dummy,
        *mid, mid_bd, mid_bc, dummy, dummy, dummy, bp_d, bp_c, dummy, dummy,
        T, C, K, 1, 1, 0), t.viterbi_per_warps(KP, CP), KP=KP, CP=CP, NP=NP, NPP=NPP,
        MODE=2, tidx=ti_f, WHOLE=True, INIT_ROWS=init_rows is not None,
        **_sparse_opts(sp, B, 1, CP, dummy), **flags)
    return bp_d, bp_c, mid[1][:, 0]
