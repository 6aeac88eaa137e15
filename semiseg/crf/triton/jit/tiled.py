"""The periodic family's end-indexed forward chain with its ring in global memory, walked in
tiles of TILE slots every step (end._fwd_end_kernel keeps the whole (KP, CP) ring in
registers).

Why: at the 1-bp gene model's shape (KP x CP = 256 x 64) the register ring, its residue
select and the step's temporaries do not fit in a thread's registers, so ptxas spills
~1.4 KB per thread to local memory and every step streams it (benchmarks/KERNELS_NOTES.md).
Here each program owns a (KP, CP) float32 scratch ring (`work`, L2-resident: B x 64 KB at
the gene shape) and every step loads, updates and stores it TILE slots at a time, so a
thread holds TILE x CP / threads ring values at once and nothing spills. The ring's
values, the order of every floating-point operation on an element and the row read as
alpha are those of end._fwd_end_kernel, so the results are bitwise the same (tests).
Its step is elementwise over the slots (insert, add the scores) plus one row read, so
tiles cost no extra reductions, and it is tiled from 16,384 ring elements. The reversed
chain and the wave backward reduce over every slot each step: tiled (an online
logsumexp per residue over the tiles, common._ring_tiles_res) they lost at the gene shape
(each tile pays a cross-warp max and sum), so they keep register rings up to
CHAIN_TILE_FROM / BWD_TILE_FROM (32,768) and are tiled beyond: benchmarks/KERNELS_NOTES.md.

A barrier ends each step (the next step's alpha row and tiles are read by other threads
than wrote them). MODE 2 (Viterbi) keeps the best duration and predecessor of each slot
in mid_bd / mid_bc, (B, KP, CP) int32, as its scratch: they are the kernel's output there.
"""

import triton
import triton.language as tl

from .common import (
    NEG,
    _column,
    _combine,
    _emission,
    _load_row,
    _logaddexp,
    _lse_last,
    _safe_max,
    _split,
    _trans3,
)
from .end import (
    _end_insert,
    _end_rows,
)


@triton.jit
def _fwd_end_tiled_kernel(
    scores, allowed, ps, pe, trans, db, init, lengths,
    ck_ring, ck_alp, ck_n,
    mid_ring, mid_alp, mid_n, mid_bd, mid_bc,
    rows_gam, rows_alp, rows_n,
    bp_d, bp_c,
    out_alp, out_n,
    work,
    T, C, K, P, NCK, seg0,
    KP: tl.constexpr, CP: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr,
    TILE: tl.constexpr, MODE: tl.constexpr, PHASE: tl.constexpr = 0,
    HAS_ALLOWED: tl.constexpr = False, HAS_PS: tl.constexpr = False,
    HAS_PE: tl.constexpr = False, WRITE_ROWS: tl.constexpr = False,
    tidx=None, SP: tl.constexpr = 0, wsp=None,
):
    """end._fwd_end_kernel (its docstring has the MODEs, PHASEs and WRITE_ROWS) with the ring in
    `work` (one (KP, CP) float32 ring per program: program (b, j) uses ring
    b * num_programs(1) + j)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
    jt = tl.arange(0, TILE)[:, None]
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    cmask1 = cs1 < C
    rr = tl.arange(0, NPP)
    r3 = rr[:, None, None]
    rr2 = rr[:, None]
    tr3, ti3 = _trans3(trans, tidx, NPP, CP, SP)  # [r, dst, src] (sparse: [r, dst, s])
    if SP > 0:
        wsp = wsp + (b * tl.num_programs(1) + tl.program_id(1)) * CP
    ini = tl.load(init + cs1, mask=cmask1, other=NEG)
    ini3 = tl.where(rr2 < NP, ini[None, :], NEG)
    seq = b * T * C
    ck = b * NCK
    wk = work + (b * tl.num_programs(1) + tl.program_id(1)) * KP * CP
    bd = mid_bd + b * KP * CP
    bcw = mid_bc + b * KP * CP
    if MODE == 1:
        seg = seg0 + tl.program_id(1)
        i0 = seg * P
        i1 = tl.minimum(i0 + P, L)
        src = ck_ring + (ck + seg) * KP * CP
        alp = tl.load(ck_alp + (ck + seg) * CP + cs1)
        n = tl.load(ck_n + ck + seg)
    elif PHASE == 1:
        i0 = M
        i1 = L
        src = mid_ring + b * KP * CP
        alp = tl.load(mid_alp + b * CP + cs1)
        n = tl.load(mid_n + b)
    else:
        i0 = 0
        if MODE == 2:
            i1 = _split(L, 1)
        else:
            i1 = M
        src = mid_ring  # not read
        alp = tl.full((CP,), NEG, tl.float32)
        n = tl.zeros((), tl.float64)
    for t0 in range(0, KP, TILE):
        at = (t0 + jt) * CP + cs
        if MODE == 1 or PHASE == 1:
            tl.store(wk + at, tl.load(src + at))
        else:
            tl.store(wk + at, tl.full((TILE, CP), NEG, tl.float32))
        if MODE == 2:
            tl.store(bd + at, tl.full((TILE, CP), 1, tl.int32))
            tl.store(bcw + at, tl.zeros((TILE, CP), tl.int32))
    tl.debug_barrier()
    gam3 = tl.where(i0 == 0, ini3, _lse_last(_combine(tr3, ti3, alp[None, :], SP, wsp, CP)))
    if MODE == 2:
        bc3 = tl.zeros((NPP, CP), tl.int32)
    mprev = tl.zeros((), tl.float32)
    for i in range(i0, i1):
        p = i + tl.zeros((), tl.int64)
        f = _emission(scores + seq, allowed + seq, p, C, cs1, cmask1, HAS_ALLOWED)
        psr = _load_row(ps + seq, p, C, cs1, cmask1, HAS_PS)
        per = _load_row(pe + seq, p, C, cs1, cmask1, HAS_PE)
        k = i // P
        if MODE == 0:  # noqa: SIM102 (a constexpr test, then a runtime one)
            if i % P == 0:
                tl.store(ck_alp + (ck + k) * CP + cs1, alp)
                tl.store(ck_n + ck + k, n)
        if MODE == 1 or WRITE_ROWS:
            _end_rows(rows_gam, rows_alp, rows_n, gam3, alp, n, b, p, i, i0, P, T, rr2, cs,
                      cs1, CP, NPP, MODE)
        for t0 in range(0, KP, TILE):
            js = t0 + jt
            at = js * CP + cs
            A = tl.load(wk + at)
            if MODE == 0:  # noqa: SIM102
                if i % P == 0:
                    tl.store(ck_ring + (ck + k) * KP * CP + at, A - mprev)
            # the segments [i, i + d) go into the slots of their ends, gamma^{(d-1) mod NP}
            d, sel, x, own = _end_insert(js, i, gam3, psr, db, cs, r3, KP, CP, NP)
            A = A - mprev
            if MODE == 2:
                BD = tl.load(bd + at)
                BC = tl.load(bcw + at)
                up = own | (x > A)
                A = tl.where(up, x, A)
                tl.store(bd + at, tl.where(up, d, BD))
                tl.store(bcw + at,
                         tl.where(up, tl.sum(tl.where(sel, bc3[:, None, :], 0), 0), BC))
            else:
                A = tl.where(own, x, _logaddexp(A, x))
            tl.store(wk + at, A + f[None, :])
        tl.debug_barrier()
        nxt = ((i + 1) & (KP - 1)) * CP  # the row of end i + 1
        alp = tl.load(wk + nxt + cs1) + per
        if MODE == 2:
            bpb = (b * T + p) * NPP * C
            tl.store(bp_d + bpb + cs1, tl.load(bd + nxt + cs1).to(bp_d.dtype.element_ty),
                     mask=cmask1)
            tl.store(bp_c + bpb + cs1, tl.load(bcw + nxt + cs1).to(bp_c.dtype.element_ty),
                     mask=cmask1)
        m = _safe_max(alp)
        alp = alp - m
        n = n + m.to(tl.float64)
        mprev = m
        g3 = _combine(tr3, ti3, alp[None, :], SP, wsp, CP)  # [r, dst, src|s]
        if MODE == 2:
            gam3 = tl.max(g3, 2)
            bc3 = _column(ti3, tl.argmax(g3, 2), SP).to(tl.int32)
        else:
            gam3 = _lse_last(g3)
    if MODE == 2 or (MODE == 0 and PHASE == 0):
        for t0 in range(0, KP, TILE):
            at = (t0 + jt) * CP + cs
            tl.store(mid_ring + b * KP * CP + at, tl.load(wk + at) - mprev)
        tl.store(mid_alp + b * CP + cs1, alp)
        tl.store(mid_n + b, n)
    if MODE == 0 and PHASE == 1:
        tl.store(out_alp + b * CP + cs1, alp)
        tl.store(out_n + b, n)

