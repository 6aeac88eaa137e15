"""The periodic family's end-indexed forward chain and its wave backward (the reversed chain
with the gradients) with their rings in global memory, walked in tiles of TILE slots every
step (chain._fwd_end_kernel and chain._bwd_kernel END keep the whole (KP, CP) ring in
registers).

Why: at the 1-bp gene model's shape (KP x CP = 256 x 64) the register ring, its residue
select and the step's temporaries do not fit in a thread's registers, so ptxas spills
~1.4 KB per thread to local memory and every step streams it (benchmarks/KERNELS_NOTES.md).
Here each program owns a (KP, CP) float32 scratch ring (`work`, L2-resident: B x 64 KB at
the gene shape) and every step loads, updates and stores it TILE slots at a time, so a
thread holds TILE x CP / threads ring values at once and nothing spills. The ring's
values, the order of every floating-point operation on an element and the row read as
alpha are those of chain._fwd_end_kernel, so the results are bitwise the same (tests).
The backward's logsumexp over the ring becomes an online one over the tiles (a running
max per label, the residue sums rescaled when it grows), so its rounding differs from
chain._bwd_kernel's (float32-close, and bitwise deterministic).

A barrier ends each step (the next step's alpha row and tiles are read by other threads
than wrote them). MODE 2 (Viterbi) keeps the best duration and predecessor of each slot
in mid_bd / mid_bc, (B, KP, CP) int32, as its scratch: they are the kernel's output there.
"""

import triton
import triton.language as tl

from .chain import (NEG, _emission, _load_row, _logaddexp, _lse_last, _lse_outer, _safe_max,
                    _split, _through)


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
    HAS_PE: tl.constexpr = False,
):
    """chain._fwd_end_kernel (its docstring has the MODEs and PHASEs) with the ring in
    `work` (one (KP, CP) float32 ring per program: program (b, j) uses ring
    b * num_programs(1) + j)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
    jt = tl.arange(0, TILE)[:, None]
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    cmask1 = cs1 < C
    cmask = cs < C
    rr = tl.arange(0, NPP)
    r3 = rr[:, None, None]
    rr2 = rr[:, None]
    tr3 = tl.load(trans + (r3 * CP + tl.arange(0, CP)[None, :, None]) * CP
                  + tl.arange(0, CP)[None, None, :])  # [r, dst, src]
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
    gam3 = tl.where(i0 == 0, ini3, _lse_last(tr3 + alp[None, None, :]))
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
        if MODE == 1:
            r = (b * tl.num_programs(1) + tl.program_id(1)) * P + (i - i0)
            tl.store(rows_gam + (r * NPP + rr2) * CP + cs, gam3)
            tl.store(rows_alp + r * CP + cs1, alp)
            tl.store(rows_n + r, n)
        for t0 in range(0, KP, TILE):
            js = t0 + jt
            at = js * CP + cs
            A = tl.load(wk + at)
            if MODE == 0:  # noqa: SIM102
                if i % P == 0:
                    tl.store(ck_ring + (ck + k) * KP * CP + at, A - mprev)
            # the segments [i, i + d) go into the slots of their ends, gamma^{(d-1) mod NP}
            d = ((js - i - 1) & (KP - 1)) + 1
            dok = (d <= K) & cmask
            sel = ((d - 1) % NP)[None, :, :] == r3  # (NPP, TILE, 1)
            gsel = tl.sum(tl.where(sel, gam3[:, None, :], 0.0), 0)
            x = gsel + psr[None, :] + tl.load(db + (d - 1) * C + cs, mask=dok, other=NEG)
            own = js == (i & (KP - 1))  # slot of end i: read at the last step, now free
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
        g3 = tr3 + alp[None, None, :]  # [r, dst, src]
        if MODE == 2:
            gam3 = tl.max(g3, 2)
            bc3 = tl.argmax(g3, 2).to(tl.int32)
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


@triton.jit
def _crossing_end_tiled(F, Rr, t1, L, jt, cs, cmask, KP: tl.constexpr, CP: tl.constexpr,
                        TILE: tl.constexpr):
    """chain._crossing_end with the two rings read TILE slots at a time: a pass for the
    max per label, then one for the sum."""
    mx = tl.full((CP,), NEG, tl.float32)
    for t0 in range(0, KP, TILE):
        js = t0 + jt
        e = t1 + ((js - t1 - 1) & (KP - 1)) + 1
        ok = (e - t1 < KP) & (e <= L) & cmask
        v = tl.where(ok, tl.load(F + js * CP + cs) + tl.load(Rr + ((L - e) & (KP - 1)) * CP + cs),
                     NEG)
        mx = tl.maximum(mx, tl.max(v, 0))
    mxs = tl.where(mx == NEG, 0.0, mx)
    acc = tl.zeros((CP,), tl.float32)
    for t0 in range(0, KP, TILE):
        js = t0 + jt
        e = t1 + ((js - t1 - 1) & (KP - 1)) + 1
        ok = (e - t1 < KP) & (e <= L) & cmask
        v = tl.where(ok, tl.load(F + js * CP + cs) + tl.load(Rr + ((L - e) & (KP - 1)) * CP + cs),
                     NEG)
        acc += tl.sum(tl.exp(v - mxs[None, :]), 0)
    return mxs + tl.log(acc)


@triton.jit
def _bwd_end_tiled_kernel(
    scores, allowed, ps, pe, trans, db, final, lengths, grad_log_z,
    ck_ring, ck_alp, ck_n, rk_ring, rk_gam, rk_n,
    rows_gam, rows_alp, rows_n, fin_alp, fin_n, log_z,
    g_scores, g_ps, g_pe, g_db, g_tr,
    work,
    T, C, K, P, NCK, seg0,
    KP: tl.constexpr, CP: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr,
    TILE: tl.constexpr,
    HAS_ALLOWED: tl.constexpr, HAS_PS: tl.constexpr, HAS_PE: tl.constexpr,
    PARAM_GRADS: tl.constexpr = True,
):
    """chain._bwd_kernel with END (the periodic family's wave backward, any NP >= 1: NP = 1
    takes the residue split with one residue) and its ring in `work` (one (KP, CP) ring
    per program). Per step, one pass over the tiles updates the ring and sums the
    exponentials per residue online; with PARAM_GRADS a second pass forms each slot's
    duration posterior with the step's final max and adds it to this segment's slot of
    g_db in duration order (the slot is the accumulator: the host zeroes it; it is scaled
    by the gradient of log Z at the end), the transition posteriors stay in registers.
    Arguments, outputs and the local normaliser as chain._bwd_kernel's docstring."""
    b = tl.program_id(0).to(tl.int64)
    seg = seg0 + tl.program_id(1)
    L = tl.load(lengths + b).to(tl.int32)
    t0 = seg * P
    t1 = tl.minimum(t0 + P, L)
    if t0 < L:
        u0 = t0
        u1 = t1
        kb = seg + 1
        jt = tl.arange(0, TILE)[:, None]
        cs = tl.arange(0, CP)[None, :]
        cs1 = tl.arange(0, CP)
        cmask1 = cs1 < C
        cmask = cs < C
        rr = tl.arange(0, NPP)
        r3 = rr[:, None, None]
        rr2 = rr[:, None]
        rs3 = tl.arange(0, CP)[None, :, None]
        cs3 = tl.arange(0, CP)[None, None, :]
        tr3 = tl.load(trans + (r3 * C + rs3) * C + cs3,  # [r, src, dst]
                      mask=(r3 < NP) & (rs3 < C) & (cs3 < C), other=NEG)
        seq = b * T * C
        gl = tl.load(grad_log_z + b)
        wk = work + (b * tl.num_programs(1) + tl.program_id(1)) * KP * CP
        slot = b * NCK + seg
        acc_db = g_db + slot * KP * CP
        if u1 == L:  # the chain's own start: nothing after L
            for t in range(0, KP, TILE):
                tl.store(wk + (t + jt) * CP + cs, tl.full((TILE, CP), NEG, tl.float32))
            gam = tl.load(final + cs1, mask=cmask1, other=NEG)  # beta_alpha[L] = end
            n = tl.zeros((), tl.float64)
            v0 = tl.load(fin_alp + b * CP + cs1) + gam
            zm0 = tl.max(v0, 0)
            zm0s = tl.where(zm0 == NEG, 0.0, zm0)
            zq0 = zm0s + tl.log(tl.sum(tl.exp(v0 - zm0s), 0))
            lz = tl.load(fin_n + b) + zq0.to(tl.float64)
            lz = tl.where(zm0 == NEG, float("-inf"), lz)
            pend = tl.where(zm0 == NEG, 0.0, tl.exp(v0 - zq0))  # P_end[L]
            run = tl.zeros((CP,), tl.float64)
        else:
            ckb = b * NCK + kb  # both chains' checkpoints at u1
            for t in range(0, KP, TILE):
                at = (t + jt) * CP + cs
                tl.store(wk + at, tl.load(rk_ring + ckb * KP * CP + at))
            gam = tl.load(rk_gam + ckb * CP + cs1)  # beta_alpha[u1]
            n = tl.load(rk_n + ckb)
            bnd = tl.load(ck_alp + ckb * CP + cs1) + gam
            cross = _crossing_end_tiled(ck_ring + ckb * KP * CP, rk_ring + ckb * KP * CP, u1,
                                        L, jt, cs, cmask, KP, CP, TILE)
            zq = _through(cross, bnd)
            lz = tl.load(ck_n + ckb) + n + zq.to(tl.float64)
            run = tl.exp(cross - zq).to(tl.float64)  # P(a segment of c crosses u1)
            pend = tl.exp(bnd - zq)  # P_end[u1]
            run = tl.where(zq > float("-inf"), run, 0.0)
            pend = tl.where(zq > float("-inf"), pend, 0.0)
        tl.debug_barrier()
        mprev = tl.zeros((), tl.float32)
        lz_ok = lz > float("-inf")
        acc_tr = tl.zeros((NPP, CP, CP), tl.float32)  # left unchanged without PARAM_GRADS
        rbase = (b * tl.num_programs(1) + tl.program_id(1)) * P - t0
        for q in range(0, u1 - u0):  # noqa: PIE808 (Triton's range)
            i = L - u1 + q  # step of this chain; it reads position L - 1 - i
            p = (L - 1 - i).to(tl.int64)
            f = _emission(scores + seq, allowed + seq, p, C, cs1, cmask1, HAS_ALLOWED)
            psr = _load_row(ps + seq, p, C, cs1, cmask1, HAS_PS)
            per = _load_row(pe + seq, p, C, cs1, cmask1, HAS_PE)
            r = rbase + p
            aF = tl.load(rows_alp + r * CP + cs1)
            nF = tl.load(rows_n + r)
            ins = gam + per
            own = i & (KP - 1)
            mx = tl.full((CP,), NEG, tl.float32)
            esum3 = tl.zeros((NPP, CP), tl.float32)
            for t in range(0, KP, TILE):
                js = t + jt
                at = js * CP + cs
                A = tl.where(js == own, ins[None, :], tl.load(wk + at) - mprev) + f[None, :]
                tl.store(wk + at, A)
                d = ((i - js) & (KP - 1)) + 1
                v = A + tl.load(db + (d - 1) * C + cs, mask=(d <= K) & cmask, other=NEG)
                new = tl.maximum(mx, tl.max(v, 0))
                news = tl.where(new == NEG, 0.0, new)
                scale = tl.where(mx == NEG, 0.0, tl.exp(mx - news))
                e = tl.exp(v - news[None, :])
                sel = ((d - 1) % NP)[None, :, :] == r3  # (NPP, TILE, 1)
                esum3 = esum3 * scale[None, :] + tl.sum(tl.where(sel, e[None, :, :], 0.0), 1)
                mx = new
            mxs = tl.where(mx == NEG, 0.0, mx)
            bg3 = tl.where(mx[None, :] == NEG, NEG, mxs[None, :] + tl.log(esum3))
            bg3 = bg3 + psr[None, :]
            m = _safe_max(tl.max(bg3, 0))
            bg3 = bg3 - m
            n = n + m.to(tl.float64)
            mprev = m
            base = (nF + n - lz).to(tl.float32)
            base = tl.where(lz_ok, base, NEG)
            gF3 = tl.load(rows_gam + (r * NPP + rr2) * CP + cs)  # gamma^r[p]
            ps3 = tl.exp(gF3 + bg3 + base)  # P(segment of c, residue r, starts at p)
            pstart = tl.sum(ps3, 0)
            if PARAM_GRADS:
                fac3 = tl.where(esum3 > 0, ps3 / esum3, 0.0)
                tl.debug_barrier()
                for t in range(0, KP, TILE):
                    js = t + jt
                    d = ((i - js) & (KP - 1)) + 1
                    v = tl.load(wk + js * CP + cs) + tl.load(db + (d - 1) * C + cs,
                                                             mask=(d <= K) & cmask, other=NEG)
                    sel = ((d - 1) % NP)[None, :, :] == r3
                    w = tl.exp(v - mxs[None, :]) * tl.sum(tl.where(sel, fac3[:, None, :], 0.0), 0)
                    dat = acc_db + (d - 1) * CP + cs  # duration order
                    tl.store(dat, tl.load(dat) + w)
                acc_tr += tl.exp(aF[None, :, None] + tr3 + (bg3 + base)[:, None, :])
            # beta_alpha[p, c'] = logsumexp_{r, c} trans[r, c', c] + bg^r[p, c]
            ba = _lse_outer(tr3 + bg3[:, None, :])
            pe_next = pend  # P_end[p + 1]
            run = run + pe_next.to(tl.float64)
            tl.store(g_scores + seq + p * C + cs1, gl * run.to(tl.float32), mask=cmask1)
            run = run - pstart.to(tl.float64)
            tl.store(g_ps + seq + p * C + cs1, gl * pstart, mask=cmask1)
            tl.store(g_pe + seq + p * C + cs1, gl * pe_next, mask=cmask1)
            gam = ba
            pend = tl.exp(aF + gam + base)  # P_end[p]
            tl.debug_barrier()
        if PARAM_GRADS:
            for t in range(0, KP, TILE):
                at = (t + jt) * CP + cs
                tl.store(acc_db + at, gl * tl.load(acc_db + at))
            tl.store(g_tr + ((slot * NPP + r3) * CP + rs3) * CP + cs3, gl * acc_tr)
