"""The periodic family's end-indexed forward chain (_fwd_end_kernel), its join and its
Viterbi join. The reversed chain and the backward are chain.py's _fwd_kernel and
_bwd_kernel with NP > 1; the section below has the schedule.
"""

import triton
import triton.language as tl

from .common import (
    NEG,
    _column,
    _combine,
    _crossing_end_tiled,
    _emission,
    _load_row,
    _logaddexp,
    _lse_last,
    _paint,
    _safe_max,
    _split,
    _through,
    _trans3,
)

# ---------------------------------------------------------------------------------------
# Periodic transitions: trans[(d-1) mod NP, src, dst] (NP, C, C), NP < K, d = the duration
# of the destination segment (NP = 1 is the static case as a (1, C, C) tensor). The family
# runs the static kernels' two-direction schedule with the wave backward:
#   forward chain  _fwd_end_kernel: the ring is indexed by a segment's END (as the
#       duration-dependent kernels do), so each segment is inserted when it starts, with its
#       duration known: at step s every d inserts gamma^{(d-1) mod NP}[s] + ps[s] + db[d-1]
#       into slot (s + d) % KP, then every slot gets the scores of position s and alpha[s+1]
#       is slot (s + 1) % KP plus pe[s]; gamma^r[s+1] = logsumexp_c' alpha[s+1, c'] +
#       trans[r, c', c] for the NP residues: O(NP C^2 + K C) per step, one ring.
#   reversed chain _fwd_kernel with NP > 1 (REV): start-indexed ring, split by residue at
#       the read (its docstring).
#   join           the forward ring at M holds, per end e > M, every segment that started
#       before M; the reversed ring, per end e, everything from M on: the segments across M
#       are one elementwise sum of the two rings (_crossing_end), O(K C).
#   backward       waves of checkpoint segments: _fwd_end_kernel MODE 1 recomputes the rows
#       (gamma^r, alpha, N), _bwd_kernel with NP > 1 runs the reversed chain with the
#       gradients.
#   Viterbi        both halves with backpointers (the forward's stored at the segment's end,
#       as the duration-dependent kernels do; the reversed chain's per residue), the best
#       path across M from the two rings and the forward ring's per-slot best start and
#       predecessor, then the traceback both ways.
# ---------------------------------------------------------------------------------------


@triton.jit
def _end_rows(rows_gam, rows_alp, rows_n, gam3, alp, n, b, p, i, i0, P, T, rr2, cs, cs1,
              CP: tl.constexpr, NPP: tl.constexpr, MODE: tl.constexpr):
    """The end-indexed chain's rows of position p (step i): gamma^r (NPP, CP), alpha and
    N, at row (b, p) of a (B, T, ...) buffer (WRITE_ROWS), or (MODE 1) at row i - i0 of
    this program's checkpoint segment in the wave's buffer."""
    if MODE == 1:
        r = (b * tl.num_programs(1) + tl.program_id(1)) * P + (i - i0)
    else:
        r = b * T + p
    tl.store(rows_gam + (r * NPP + rr2) * CP + cs, gam3)
    tl.store(rows_alp + r * CP + cs1, alp)
    tl.store(rows_n + r, n)


@triton.jit
def _end_insert(js, i, gam3, psr, db, cs, r3, KP: tl.constexpr, CP: tl.constexpr,
                NP: tl.constexpr):
    """What step i of the end-indexed chain puts into its ring's slots js (all of them,
    or a tile): in each slot, the segment [i, i + d) that ends there (d its duration),
    x = gamma^{(d-1) mod NP}[i] + ps[i] + db[d-1] (-inf for d > K: the host's (KP, CP)
    table, kernels._db_table); also d, the residue
    select sel (NPP, slots, 1) and own, the slot of end i (read at the last step, now
    free). One definition for the register and the tiled ring: their bits must agree."""
    d = ((js - i - 1) & (KP - 1)) + 1
    sel = ((d - 1) % NP)[None, :, :] == r3  # (NPP, slots, 1)
    gsel = tl.sum(tl.where(sel, gam3[:, None, :], 0.0), 0)
    x = gsel + psr[None, :] + tl.load(db + (d - 1) * CP + cs)
    own = js == (i & (KP - 1))
    return d, sel, x, own


@triton.jit
def _keep_new(own, x, A, WHOLE: tl.constexpr):
    """MODE 2's ring update: where the new segment x replaces the slot's best A (its
    slot just freed, or a higher score; WHOLE: or an equal one, the shorter segment
    kept on ties as seams._forward keeps it)."""
    if WHOLE:
        up = own | (x >= A)
    else:
        up = own | (x > A)
    return up


@triton.jit
def _store_bp(bp_d, bp_c, b, T, p, C, cs1, cmask1, vd, vc, alp, NPP: tl.constexpr,
              WHOLE: tl.constexpr):
    """MODE 2's backpointers of position p (duration vd, label before vc): WHOLE at
    (B, T, C), a duration of 0 where alpha is -inf; else slot 0 of (B, T, NPP, C)."""
    if WHOLE:
        bpb = (b * T + p) * C
        vd = tl.where(alp == NEG, 0, vd)
    else:
        bpb = (b * T + p) * NPP * C
    tl.store(bp_d + bpb + cs1, vd.to(bp_d.dtype.element_ty), mask=cmask1)
    tl.store(bp_c + bpb + cs1, vc.to(bp_c.dtype.element_ty), mask=cmask1)


@triton.jit
def _fwd_end_kernel(
    scores, allowed, ps, pe, trans, db, init, lengths,
    ck_ring, ck_alp, ck_n,
    mid_ring, mid_alp, mid_n, mid_bd, mid_bc,
    rows_gam, rows_alp, rows_n,
    bp_d, bp_c,
    out_alp, out_n,
    T, C, K, P, NCK, seg0,
    KP: tl.constexpr, CP: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr,
    MODE: tl.constexpr, PHASE: tl.constexpr = 0,
    HAS_ALLOWED: tl.constexpr = False, HAS_PS: tl.constexpr = False,
    HAS_PE: tl.constexpr = False, WRITE_ROWS: tl.constexpr = False,
    tidx=None, SP: tl.constexpr = 0, wsp=None, work=None, TILE: tl.constexpr = 0,
    WHOLE: tl.constexpr = False, INIT_ROWS: tl.constexpr = False, MEET: tl.constexpr = 32,
):
    """The forward chain with periodic transitions (section comment above), one sequence
    per program (id 0 = b). WRITE_ROWS (MODE 0): also the rows of every position of the
    half into rows_* (B, T, ...), the values MODE 1 would recompute there (bitwise).
    `trans` is the host's (NPP, CP, CP) padded [r, dst, src] (SP > 0: its sparse pred form,
    columns src in tidx: _trans3).
    MODEs and PHASEs as _fwd_kernel without REV: 0/0 the half [0, M) with checkpoints
    (ring, alpha, N; gamma is recomputed from alpha) and the state at M -> mid_*; 0/1 the
    other half from mid_*, with checkpoints, final alpha and N -> out_*; 1 the rows
    (gamma^r (NPP, CP), alpha, N) of checkpoint segment seg0 + program id 1; 2 Viterbi over
    [0, M) (M = ceil(L / 2)): bp_d[p, 0, c] / bp_c[p, 0, c] = the duration of / the label
    before the best segment of c ending at p + 1 (B, T, NPP, C), and at M the ring with the
    best duration and predecessor of every slot -> mid_*. MODE 2 with WHOLE: Viterbi
    over all of [0, L) (the windows of the certified max-sum, annotate/device_maxsum.py),
    bp_d / bp_c (B, T, C) at p, bp_d 0 where no allowed path ends there (alpha -inf, as
    seams._forward marks it), ties kept as seams._forward keeps them (the shorter
    segment, then the smaller label: a chain of equal segments then steps back one
    base at a time, so the frontier's tracebacks meet as the host's do), the ring,
    alpha and N at L -> mid_*. INIT_ROWS: `init` is (B, NPP, CP), gamma^r at each
    sequence's first boundary (a window entered after a known label e: transition[r, e,
    :]), instead of one start vector for every residue.

    TILE = 0: the (KP, CP) ring is a register tensor. TILE > 0: it lives in `work`, one
    (KP, CP) float32 ring per program (program (b, j) uses ring b * num_programs(1) + j),
    and every step loads, updates and stores it TILE slots at a time, so a thread holds
    TILE x CP / threads ring values at once. Why: at the 1-bp gene model's shape (KP x CP
    = 256 x 64) the register ring, its residue select and the step's temporaries do not
    fit in a thread's registers, so ptxas spilled ~1.4 KB per thread to local memory and
    every step streamed it (benchmarks/KERNELS_NOTES.md); the scratch ring is L2-resident
    (B x 64 KB there). The step is elementwise over the slots (insert, add the scores)
    plus one row read, so tiles cost no extra reductions. The ring's values, the order of
    every floating-point operation on an element and the row read as alpha are the same
    either way, so the results are bitwise the same (tests). A barrier ends each tiled
    step (the next step's alpha row and tiles are read by other threads than wrote them);
    tiled MODE 2 keeps the best duration and predecessor of each slot in mid_bd / mid_bc,
    (B, KP, CP) int32, as its scratch: they are the kernel's output there."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P, MEET)
    if TILE == 0:
        js = tl.arange(0, KP)[:, None]
    else:
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
    if INIT_ROWS:
        ini3 = tl.load(init + (b * NPP + rr2) * CP + cs)
    else:
        ini = tl.load(init + cs1, mask=cmask1, other=NEG)
        ini3 = tl.where(rr2 < NP, ini[None, :], NEG)
    seq = b * T * C
    ck = b * NCK
    if TILE > 0:
        wk = work + (b * tl.num_programs(1) + tl.program_id(1)) * KP * CP
        bd = mid_bd + b * KP * CP
        bcw = mid_bc + b * KP * CP
    if MODE == 1:
        seg = seg0 + tl.program_id(1)
        i0 = seg * P
        i1 = tl.minimum(i0 + P, L)
        if TILE == 0:
            A = tl.load(ck_ring + ((ck + seg) * KP + js) * CP + cs)
        else:
            src = ck_ring + (ck + seg) * KP * CP
        alp = tl.load(ck_alp + (ck + seg) * CP + cs1)
        n = tl.load(ck_n + ck + seg)
    elif PHASE == 1:
        i0 = M
        i1 = L
        if TILE == 0:
            A = tl.load(mid_ring + (b * KP + js) * CP + cs)
        else:
            src = mid_ring + b * KP * CP
        alp = tl.load(mid_alp + b * CP + cs1)
        n = tl.load(mid_n + b)
    else:
        i0 = 0
        if MODE == 2 and WHOLE:
            i1 = tl.minimum(L, T)  # (L <= T; a scalar in the interpreter too)
        elif MODE == 2:
            i1 = _split(L, 1, 32)
        else:
            i1 = M
        if TILE == 0:  # empty (see _fwd_kernel)
            A = tl.load(mid_ring + (b * KP + js) * CP + cs, mask=(js + cs) < 0, other=NEG)
        else:
            src = mid_ring  # not read
        alp = tl.full((CP,), NEG, tl.float32)
        n = tl.zeros((), tl.float64)
    if TILE > 0:  # the ring into this program's scratch, tile by tile
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
    # gamma^r at the first boundary: `start` at 0, else from alpha
    gam3 = tl.where(i0 == 0, ini3, _lse_last(_combine(tr3, ti3, alp[None, :], SP, wsp, CP)))
    if MODE == 2:
        if TILE == 0:
            BD = tl.full((KP, CP), 1, tl.int32)
            BC = tl.zeros((KP, CP), tl.int32)
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
                if TILE == 0:  # (tiled: the ring's tiles below)
                    tl.store(ck_ring + ((ck + k) * KP + js) * CP + cs, A - mprev)
                tl.store(ck_alp + (ck + k) * CP + cs1, alp)
                tl.store(ck_n + ck + k, n)
        if MODE == 1 or WRITE_ROWS:
            _end_rows(rows_gam, rows_alp, rows_n, gam3, alp, n, b, p, i, i0, P, T, rr2, cs,
                      cs1, CP, NPP, MODE)
        if TILE == 0:
            # the segments [i, i + d) go into the slots of their ends, gamma^{(d-1) mod NP}
            d, sel, x, own = _end_insert(js, i, gam3, psr, db, cs, r3, KP, CP, NP)
            A = A - mprev
            if MODE == 2:
                up = _keep_new(own, x, A, WHOLE)
                A = tl.where(up, x, A)
                BD = tl.where(up, d, BD)
                BC = tl.where(up, tl.sum(tl.where(sel, bc3[:, None, :], 0), 0), BC)
            else:
                A = tl.where(own, x, _logaddexp(A, x))
            A = A + f[None, :]
            nxt = js == ((i + 1) & (KP - 1))  # slot of end i + 1
            alp = tl.max(tl.where(nxt, A, NEG), 0) + per
            if MODE == 2:
                _store_bp(bp_d, bp_c, b, T, p, C, cs1, cmask1,
                          tl.max(tl.where(nxt, BD, 0), 0), tl.max(tl.where(nxt, BC, 0), 0),
                          alp, NPP, WHOLE)
        else:
            for t0 in range(0, KP, TILE):  # the same, tile by tile over the scratch ring
                js = t0 + jt
                at = js * CP + cs
                A = tl.load(wk + at)
                if MODE == 0:  # noqa: SIM102
                    if i % P == 0:
                        tl.store(ck_ring + (ck + k) * KP * CP + at, A - mprev)
                d, sel, x, own = _end_insert(js, i, gam3, psr, db, cs, r3, KP, CP, NP)
                A = A - mprev
                if MODE == 2:
                    BD = tl.load(bd + at)
                    BC = tl.load(bcw + at)
                    up = _keep_new(own, x, A, WHOLE)
                    A = tl.where(up, x, A)
                    BD = tl.where(up, d, BD)
                    BC = tl.where(up, tl.sum(tl.where(sel, bc3[:, None, :], 0), 0), BC)
                else:
                    A = tl.where(own, x, _logaddexp(A, x))
                # every (replicated) thread's loads of this tile, and of the last step's
                # row, before a store (common._tile_step)
                tl.debug_barrier()
                if MODE == 2:
                    tl.store(bd + at, BD)
                    tl.store(bcw + at, BC)
                tl.store(wk + at, A + f[None, :])
            tl.debug_barrier()
            nxt = ((i + 1) & (KP - 1)) * CP  # the row of end i + 1
            alp = tl.load(wk + nxt + cs1) + per
            if MODE == 2:
                _store_bp(bp_d, bp_c, b, T, p, C, cs1, cmask1, tl.load(bd + nxt + cs1),
                          tl.load(bcw + nxt + cs1), alp, NPP, WHOLE)
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
        if TILE == 0:
            tl.store(mid_ring + (b * KP + js) * CP + cs, A - mprev)
        else:
            for t0 in range(0, KP, TILE):
                at = (t0 + jt) * CP + cs
                tl.store(mid_ring + b * KP * CP + at, tl.load(wk + at) - mprev)
        tl.store(mid_alp + b * CP + cs1, alp)
        tl.store(mid_n + b, n)
    if MODE == 2 and TILE == 0:
        tl.store(mid_bd + (b * KP + js) * CP + cs, BD)
        tl.store(mid_bc + (b * KP + js) * CP + cs, BC)
    if MODE == 0 and PHASE == 1:
        tl.store(out_alp + b * CP + cs1, alp)
        tl.store(out_n + b, n)


@triton.jit
def _join_end_kernel(f_ring, f_alp, f_n, r_ring, r_gam, r_n, lengths, log_z, C, P,
                     KP: tl.constexpr, CP: tl.constexpr, TILE: tl.constexpr = 0,
                     MEET: tl.constexpr = 32):
    """_join_kernel for the periodic family: log Z where the halves meet (M = _split(L, P, MEET)),
    the segments across M from _crossing_end, TILE slots at a time (0: at once)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P, MEET)
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    cross = _crossing_end_tiled(f_ring + b * KP * CP, r_ring + b * KP * CP, M, L, cs, cs < C,
                                KP, CP, TILE if TILE > 0 else KP)
    bnd = tl.load(f_alp + b * CP + cs1) + tl.load(r_gam + b * CP + cs1)
    zq = _through(cross, bnd)
    lz = tl.load(f_n + b) + tl.load(r_n + b) + zq.to(tl.float64)
    tl.store(log_z + b, tl.where(zq == NEG, float("-inf"), lz))


@triton.jit
def _best_across_end(F, Rr, M, L, C, cs, KP: tl.constexpr, CP: tl.constexpr,
                     TILE: tl.constexpr):
    """Per label, the best segment across M of the periodic Viterbi's two rings (the
    end-indexed forward ring F, the reversed ring Rr, both at M) and the forward slot that
    holds it, read TILE slots at a time; on ties the first slot, as one argmax over the
    whole ring would keep. Returns (best value, slot), (CP,) each."""
    best_v = tl.full((CP,), NEG, tl.float32)
    best_j = tl.zeros((CP,), tl.int32)
    for j0 in range(0, KP, TILE):
        js = j0 + tl.arange(0, TILE)[:, None]
        e = M + ((js - M - 1) & (KP - 1)) + 1
        ok = (e - M < KP) & (e <= L) & (cs < C)
        v = tl.where(ok, tl.load(F + js * CP + cs) + tl.load(Rr + ((L - e) & (KP - 1)) * CP
                                                            + cs), NEG)
        tm = tl.max(v, 0)
        up = tm > best_v
        best_j = tl.where(up, j0 + tl.argmax(v, 0).to(tl.int32), best_j)
        best_v = tl.where(up, tm, best_v)
    return best_v, best_j


@triton.jit
def _viterbi_join_end_kernel(f_ring, f_bd, f_bc, f_alp, f_n, r_ring, r_gam, r_n, lengths,
                             bp_d, bp_c, score, labels, starts, T, C,
                             KP: tl.constexpr, CP: tl.constexpr, NPP: tl.constexpr,
                             BLOCK: tl.constexpr, TILE: tl.constexpr = 0):
    """_viterbi_join_kernel for the periodic family. The best of a boundary at M and of
    every segment across M (the forward ring's slot of its end, whose best start and
    predecessor are f_bd / f_bc there, plus the reversed ring: _best_across_end, TILE
    slots at a time, 0: at once); program 0
    traces to the left through the forward backpointers (stored at a segment's end),
    program 1 to the right through the reversed ones (bp_c[u, 0, c'] = r * CP + c, the best
    segment after a segment of c' ending at u, and bp_d[u, r, c] its duration)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, 1, 32)
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    best_v, best_j = _best_across_end(f_ring + b * KP * CP, r_ring + b * KP * CP, M, L, C,
                                      cs, KP, CP, TILE if TILE > 0 else KP)
    bnd = tl.load(f_alp + b * CP + cs1) + tl.load(r_gam + b * CP + cs1)
    bv = tl.max(bnd, 0)
    bc = tl.argmax(bnd, 0).to(tl.int64)
    cv = tl.max(best_v, 0)
    cc = tl.argmax(best_v, 0).to(tl.int64)
    top = tl.maximum(bv, cv)
    total = tl.load(f_n + b) + tl.load(r_n + b) + top.to(tl.float64)
    lab = b * T
    row = NPP * C
    left = tl.program_id(1) == 0
    if left:
        tl.store(score + b, tl.where(top == NEG, float("-inf"), total))
    if top > NEG:
        if cv > bv:  # a segment [s, e) of cc across M
            j_s = tl.sum(tl.where(cs1 == cc, best_j, 0), 0)
            at = (b * KP + j_s) * CP + cc
            e1 = (M + ((j_s - M - 1) & (KP - 1)) + 1).to(tl.int64)
            s1 = e1 - tl.load(f_bd + at).to(tl.int64)
            if left:
                _paint(labels + lab, starts + lab, s1, e1, cc, BLOCK)
            t = s1
            c = tl.load(f_bc + at).to(tl.int64)  # the label before it (if s1 > 0)
            u = e1
            prev = cc
        else:  # a boundary at M after a segment of bc
            t = M.to(tl.int64)
            c = bc
            u = M.to(tl.int64)
            prev = bc
        if left:
            while t > 0:
                at2 = (lab + t - 1) * row + c
                s2 = t - tl.load(bp_d + at2).to(tl.int64)
                _paint(labels + lab, starts + lab, s2, t, c, BLOCK)
                c = tl.load(bp_c + at2).to(tl.int64)
                t = s2
        else:
            while u < L:
                code = tl.load(bp_c + (lab + u) * row + prev).to(tl.int64)
                rres = code // CP
                y = code % CP
                d = tl.load(bp_d + (lab + u) * row + rres * C + y).to(tl.int64)
                _paint(labels + lab, starts + lab, u, u + d, y, BLOCK)
                u = u + d
                prev = y
