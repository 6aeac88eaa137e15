"""The duration-dependent family's kernels: one forward chain, the backward segment by
segment from the end, and the Viterbi traceback (the section below has the math).
"""

import triton
import triton.language as tl

from .common import (
    NEG,
    _emission,
    _load_row,
    _logaddexp,
    _lse0,
    _safe_max,
    _through,
)

# ---------------------------------------------------------------------------------------
# Duration-dependent transitions: trans[d-1, src, dst] (K, C, C), d = the destination
# segment's duration. Same ring, checkpoints and normaliser as above, but one forward
# chain from the start and a backward from the end, segment by segment (recompute beside
# the reversed chain): the two-direction schedule of the static kernels is not applied
# here yet.
#
# gamma now depends on the duration, gamma_d[s, c] = logsumexp_c' alpha[s,c'] + trans[d-1,c',c],
# so the forward ring is indexed by a segment's END instead of its start: at step s every
# duration d inserts the segment [s, s+d) into slot (s+d) % KP,
#     A[s+d, c] <- logaddexp(A[s+d, c], gamma_d[s, c] + ps[s, c] + db[d-1, c]),
# then every slot gets the scores of position s (so a slot holds, summed over its starts,
# exactly the scores of the segment's positions seen so far: no long prefix sums), and
# alpha[s+1] is slot (s+1) % KP plus pe[s]. Per step O(K C^2): a loop over the C source
# labels, each a (KP, CP) tensor of the transition slice trans[d-1, c', :] in slot order.
#
# The reversed chain keeps the static kernel's start-indexed ring (H_d[p, c] = the
# segment [p, p+d) with everything after it, slot by slot) and forms
#     beta_alpha[p, c'] = logsumexp_{d, c} trans[d-1, c', c] + H_d[p, c]
#     P(c' ends at p, c starts at p with duration d)
#         = exp(alpha[p,c'] + trans[d-1,c',c] + H_d[p,c] - log Z)
# whose sum over c' is P(p, d, c) (p > 0; at p = 0 it is exp(start[c] + H_d[0, c] - log Z)).
# The transition gradient goes straight into the program's own float64 rows g_tr
# (B, KP, C, C) (no atomics; each slot is a distinct duration).
# ---------------------------------------------------------------------------------------


@triton.jit
def _pick(v, cs1, cc):
    """v[cc] of a (CP,) vector as a scalar (-inf where v[cc] is)."""
    return tl.max(tl.where(cs1 == cc, v, NEG), 0)


@triton.jit
def _fwd_dd_kernel(
    scores, allowed, ps, pe, trans, db, init, lengths,
    ck_ring, ck_alp, ck_n,
    rows_alp, rows_n,
    bp_d, bp_c,
    out_alp, out_n,
    T, C, K, P, NSEG, seg,
    KP: tl.constexpr, CP: tl.constexpr, MODE: tl.constexpr,
    HAS_ALLOWED: tl.constexpr, HAS_PS: tl.constexpr, HAS_PE: tl.constexpr,
):
    """Forward chain with (K, C, C) transitions, one sequence per program; MODEs as
    _fwd_kernel (0: log Z + checkpoints (ring, alpha, N); 1: rows (alpha, N) of segment
    `seg`; 2: Viterbi with backpointers bp_d[t-1, c] (duration of the best segment of c
    ending at t) and bp_c[t-1, c] (the label before it))."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    js = tl.arange(0, KP)[:, None]
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    cmask1 = cs1 < C
    cmask = cs < C
    seq = b * T * C
    ck = b * NSEG
    ini = tl.load(init + cs1, mask=cmask1, other=NEG)
    if MODE == 1:
        t0 = seg * P
        t1 = tl.minimum(t0 + P, L)
        A = tl.load(ck_ring + ((ck + seg) * KP + js) * CP + cs)
        alp = tl.load(ck_alp + (ck + seg) * CP + cs1)
        n = tl.load(ck_n + ck + seg)
    else:
        t0 = 0
        t1 = L
        A = tl.full((KP, CP), NEG, tl.float32)
        alp = tl.full((CP,), NEG, tl.float32)
        n = tl.zeros((), tl.float64)
    if MODE == 2:
        BD = tl.full((KP, CP), 1, tl.int32)
        BC = tl.zeros((KP, CP), tl.int32)
    mprev = tl.zeros((), tl.float32)
    for i in range(t0, t1):
        p = i + tl.zeros((), tl.int64)
        f = _emission(scores + seq, allowed + seq, p, C, cs1, cmask1, HAS_ALLOWED)
        psr = _load_row(ps + seq, p, C, cs1, cmask1, HAS_PS)
        per = _load_row(pe + seq, p, C, cs1, cmask1, HAS_PE)
        if MODE == 0:  # noqa: SIM102 (a constexpr test, then a runtime one)
            if i % P == 0:
                k = i // P
                tl.store(ck_ring + ((ck + k) * KP + js) * CP + cs, A - mprev)
                tl.store(ck_alp + (ck + k) * CP + cs1, alp)
                tl.store(ck_n + ck + k, n)
        if MODE == 1:
            r = b * P + (i - t0)
            tl.store(rows_alp + r * CP + cs1, alp)
            tl.store(rows_n + r, n)
        # duration of the segment [i, i + d) that ends in each slot; valid if d <= K
        d = ((js - i - 1) & (KP - 1)) + 1
        dok = (d <= K) & cmask
        # gamma_d[i, c] for every slot: logsumexp (max for Viterbi) over the source c'
        gm = tl.full((KP, CP), NEG, tl.float32)
        gs = tl.zeros((KP, CP), tl.float32)
        if MODE == 2:
            gc = tl.zeros((KP, CP), tl.int32)
        for cc in range(0, C):  # noqa: PIE808 (Triton's range)
            v = _pick(alp, cs1, cc) + tl.load(trans + ((d - 1) * C + cc) * C + cs,
                                             mask=dok, other=NEG)
            if MODE == 2:
                up = v > gm
                gc = tl.where(up, cc, gc)
                gm = tl.where(up, v, gm)
            else:
                newm = tl.maximum(gm, v)
                newms = tl.where(newm == NEG, 0.0, newm)
                gs = gs * tl.exp(gm - newms) + tl.exp(v - newms)
                gm = newm
        if MODE == 2:
            gd = gm
        else:
            gd = tl.where(gm == NEG, NEG, gm + tl.log(gs))
        gd = tl.where(i == 0, ini[None, :], gd)  # the first segment: start, no transition
        x = gd + psr[None, :] + tl.load(db + (d - 1) * C + cs, mask=dok, other=NEG)
        own = js == (i & (KP - 1))  # slot of end i: read at the last step, now free
        A = A - mprev
        if MODE == 2:
            up = own | (x > A)
            A = tl.where(up, x, A)
            BD = tl.where(up, d, BD)
            BC = tl.where(up, gc, BC)
        else:
            A = tl.where(own, x, _logaddexp(A, x))
        A = A + f[None, :]
        nxt = js == ((i + 1) & (KP - 1))  # slot of end i + 1
        alp = tl.max(tl.where(nxt, A, NEG), 0) + per
        if MODE == 2:
            tl.store(bp_d + seq + p * C + cs1,
                     tl.max(tl.where(nxt, BD, 0), 0).to(bp_d.dtype.element_ty), mask=cmask1)
            tl.store(bp_c + seq + p * C + cs1,
                     tl.max(tl.where(nxt, BC, 0), 0).to(bp_c.dtype.element_ty), mask=cmask1)
        m = _safe_max(alp)
        alp = alp - m
        n = n + m.to(tl.float64)
        mprev = m
    if MODE != 1:
        tl.store(out_alp + b * CP + cs1, alp)
        tl.store(out_n + b, n)


@triton.jit
def _bwd_dd_kernel(
    scores, allowed, ps, pe, trans, db, init, final, lengths, grad_log_z,
    ck_ring, ck_alp, ck_n,
    rows_alp, rows_n, fin_alp, fin_n, log_z,
    st_ring, st_gam, st_n, st_m,
    g_scores, g_ps, g_pe, g_db, g_tr,
    T, C, K, P, NSEG, seg,
    KP: tl.constexpr, CP: tl.constexpr,
    HAS_ALLOWED: tl.constexpr, HAS_PS: tl.constexpr, HAS_PE: tl.constexpr,
):
    """_bwd_kernel for (K, C, C) transitions (same local normaliser and carries). g_db as
    there; g_tr (B, KP, C, C) float64 gets the unweighted d logZ_b / d trans[d-1, c', c]
    added step by step (the program's own rows)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    t0 = seg * P
    if t0 < L:
        t1 = tl.minimum(t0 + P, L)
        js = tl.arange(0, KP)[:, None]
        cs = tl.arange(0, CP)[None, :]
        cs1 = tl.arange(0, CP)
        cmask1 = cs1 < C
        cmask = cs < C
        seq = b * T * C
        gl = tl.load(grad_log_z + b)
        ini = tl.load(init + cs1, mask=cmask1, other=NEG)
        if t1 == L:
            lz = tl.load(log_z + b)
            R = tl.full((KP, CP), NEG, tl.float32)
            gam = tl.load(final + cs1, mask=cmask1, other=NEG)  # beta_alpha[L] = end
            n = tl.zeros((), tl.float64)
            base0 = (tl.load(fin_n + b) - lz).to(tl.float32)
            base0 = tl.where(lz > float("-inf"), base0, NEG)
            pend = tl.exp(tl.load(fin_alp + b * CP + cs1) + gam + base0)
            run = tl.zeros((CP,), tl.float64)
            mprev = tl.zeros((), tl.float32)
        else:
            R = tl.load(st_ring + (b * KP + js) * CP + cs)
            gam = tl.load(st_gam + b * CP + cs1)
            n = tl.load(st_n + b)
            mprev = tl.load(st_m + b)
            ckb = b * NSEG + seg + 1
            nf1 = tl.load(ck_n + ckb)
            bnd = tl.load(ck_alp + ckb * CP + cs1) + gam
            Rb = R - mprev
            i1 = L - 1 - t1
            a = ((i1 - js) & (KP - 1)) + 1  # reversed slot j holds the end e = t1 + a
            # the forward ring at t1 holds, in slot e % KP, every segment ending at e > t1
            # that started before t1 (its scores up to t1 - 1); the reversed ring the rest
            Fa = tl.load(ck_ring + (ckb * KP + ((t1 + a) & (KP - 1))) * CP + cs)
            v2 = tl.where((a <= K - 1) & cmask, Fa + Rb, NEG)
            cross = _lse0(v2)
            zq = _through(cross, bnd)
            lz = nf1 + n + zq.to(tl.float64)
            run = tl.exp(cross - zq).to(tl.float64)
            pend = tl.exp(bnd - zq)
            run = tl.where(zq > float("-inf"), run, 0.0)
            pend = tl.where(zq > float("-inf"), pend, 0.0)
        lz_ok = lz > float("-inf")
        acc_db = tl.zeros((KP, CP), tl.float32)
        for q in range(0, t1 - t0):  # noqa: PIE808 (Triton's range)
            p = (t1 - 1 - q).to(tl.int64)
            i = L - 1 - (t1 - 1 - q)
            f = _emission(scores + seq, allowed + seq, p, C, cs1, cmask1, HAS_ALLOWED)
            psr = _load_row(ps + seq, p, C, cs1, cmask1, HAS_PS)
            per = _load_row(pe + seq, p, C, cs1, cmask1, HAS_PE)
            r = b * P + (p - t0)
            aF = tl.load(rows_alp + r * CP + cs1)
            nF = tl.load(rows_n + r)
            ins = gam + per
            R = tl.where(js == (i & (KP - 1)), ins[None, :], R - mprev) + f[None, :]
            d = ((i - js) & (KP - 1)) + 1
            dok = (d <= K) & cmask
            h = R + tl.load(db + (d - 1) * C + cs, mask=dok, other=NEG) + psr[None, :]
            m = _safe_max(_lse0(h))
            h = h - m  # H_d[p, c] relative to the new normaliser
            n = n + m.to(tl.float64)
            mprev = m
            base = (nF + n - lz).to(tl.float32)
            base = tl.where(lz_ok, base, NEG)
            hb = h + base
            wsum = tl.zeros((KP, CP), tl.float32)
            ba = tl.full((CP,), NEG, tl.float32)
            for cc in range(0, C):  # noqa: PIE808 (Triton's range)
                v = tl.load(trans + ((d - 1) * C + cc) * C + cs, mask=dok, other=NEG) + h
                vm = tl.max(tl.max(v, 1), 0)
                vms = tl.where(vm == NEG, 0.0, vm)
                ba = tl.where(cs1 == cc, vms + tl.log(tl.sum(tl.sum(tl.exp(v - vms), 1), 0)), ba)
                w = tl.exp(v + base + _pick(aF, cs1, cc))
                wsum += w
                gp = g_tr + ((b * KP + d - 1) * C + cc) * C + cs
                tl.store(gp, tl.load(gp, mask=dok, other=0.0) + w.to(tl.float64), mask=dok)
            wsum = tl.where(p == 0, tl.exp(ini[None, :] + hb), wsum)
            pstart = tl.sum(wsum, 0)
            acc_db += tl.gather(wsum, (i - js + cs * 0) & (KP - 1), 0)
            pe_next = pend
            run = run + pe_next.to(tl.float64)
            tl.store(g_scores + seq + p * C + cs1, gl * run.to(tl.float32), mask=cmask1)
            run = run - pstart.to(tl.float64)
            tl.store(g_ps + seq + p * C + cs1, gl * pstart, mask=cmask1)
            tl.store(g_pe + seq + p * C + cs1, gl * pe_next, mask=cmask1)
            gam = ba
            pend = tl.exp(aF + gam + base)
        tl.store(st_ring + (b * KP + js) * CP + cs, R)
        tl.store(st_gam + b * CP + cs1, gam)
        tl.store(st_n + b, n)
        tl.store(st_m + b, mprev)
        gdb_ptr = g_db + (b * KP + js) * CP + cs
        tl.store(gdb_ptr, tl.load(gdb_ptr) + acc_db.to(tl.float64))


@triton.jit
def _traceback_dd_kernel(bp_d, bp_c, best_c, lengths, seg_label, T, C):
    """_traceback_kernel for _fwd_dd_kernel's backpointers (both indexed by the end t-1)."""
    b = tl.program_id(0).to(tl.int64)
    t = tl.load(lengths + b).to(tl.int64)
    c = tl.load(best_c + b).to(tl.int64)
    if c < 0:
        t = t * 0
    base = b * T * C
    while t > 0:
        d = tl.load(bp_d + base + (t - 1) * C + c).to(tl.int64)
        cp = tl.load(bp_c + base + (t - 1) * C + c).to(tl.int64)
        s = t - d
        tl.store(seg_label + b * T + s, c)
        c = cp
        t = s
