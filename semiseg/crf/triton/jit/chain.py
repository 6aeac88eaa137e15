"""Triton kernels of the semi-CRF chain, one program per sequence (and per checkpoint segment
in the backward).

Notation (docs/contract.md): alpha[t, c] = log-weight of all segmentations of [0, t) whose last
segment has label c; gamma[s, c] = log-weight of everything before a segment of label c
that starts at s (gamma[0] = start, gamma[s] = logsumexp_c' alpha[s, c'] + trans[c', c]).

    alpha[t, c] = logsumexp_{d=1..min(K,t)} R_t[t-d, c] + db[d-1, c] + pe[t-1, c]
    R_t[s, c]   = gamma[s, c] + ps[s, c] + sum_{u=s}^{t-1} f[u, c]     (-inf if not allowed)

The ring R holds R_t[s] for the last KP (>= K, a power of two) starts s, slot s % KP, as a
register tensor (KP, CP). Each step t-1 -> t blends the new start into its slot, adds the
scores of position t-1 to every slot (so segment sums are fp32 sums of <= K terms: no
long prefix sums), reads alpha with the duration biases gathered in slot order from the
cache, then shifts alpha and the ring by m = max_c alpha[t] and adds m to a float64
normaliser N. Values are kept relative to N, so they stay O(1) at any T.

The same chain run on the reversed sequence (transition transposed, ps <-> pe,
start <-> end) gives beta: its "alpha" is beta_gamma[s] (weight of a segment starting at s
and all after it) and its "gamma" is beta_alpha[t] (weight of everything after a segment
ending at t). A step is latency-bound (one program per sequence uses B of the SMs), so
the schedule cuts sequential steps (static transitions):
  forward:  the forward chain over [0, M) and the reversed one over [M, L) side by side,
            then log Z where they meet (a boundary at M or a segment across it): L/2 steps;
  backward: each chain over its other half (every checkpoint of both directions exists
            then), then every checkpoint segment of every sequence at once: recompute its
            forward rows (gamma, alpha, N) from the forward checkpoint at its start, run
            the reversed chain from the reversed checkpoint at its end: L/2 + ~2P steps;
  Viterbi:  both halves side by side with backpointers, the best path across M, and the
            traceback from M to either side.
The reversed chain, reading the recomputed forward rows, forms the posteriors
    P_start[s, c] = exp(gamma[s,c] + beta_gamma[s,c] - log Z)
    P_end[t, c]   = exp(alpha[t,c] + beta_alpha[t,c] - log Z)
    P(s, d, c)    = exp(gamma[s,c] + ps[s,c] + (sum f) + db[d-1,c] + pe + beta_alpha[s+d,c] - log Z)
    P(c' ends at t, c starts at t) = exp(alpha[t,c'] + trans[c',c] + beta_gamma[t,c] - log Z)
and accumulates the gradients without atomics (every program owns its rows).
"""

import triton
import triton.language as tl

from .common import (
    NEG,
    _column,
    _combine,
    _copy_tiles,
    _crossing_end_tiled,
    _emission,
    _empty_tiles,
    _exchange,
    _lazy_alpha,
    _load_row,
    _logaddexp,
    _lse0,
    _lse0_parts,
    _lse1,
    _lse_join,
    _lse_outer,
    _paint,
    _plane_steps,
    _planes_by_residue,
    _planes_to_ring,
    _position,
    _res_best,
    _res_max,
    _res_rows,
    _res_sums,
    _ring_tiles,
    _ring_tiles_res,
    _ring_to_planes,
    _safe_max,
    _split,
    _split_lse,
    _spread,
    _step_rows,
    _through,
    _trans3,
)


@triton.jit
def _fwd_kernel(
    scores, allowed, ps, pe, trans, db, init, lengths,
    ck_ring, ck_gam, ck_alp, ck_n,
    mid_ring, mid_gam, mid_alp, mid_n,
    rows_gam, rows_alp, rows_n,
    bp_d, bp_c,
    out_alp, out_n, work,
    T, C, K, P, NCK, seg0,
    KP: tl.constexpr, CP: tl.constexpr, MODE: tl.constexpr, REV: tl.constexpr = False,
    PHASE: tl.constexpr = 0,
    HAS_ALLOWED: tl.constexpr = False, HAS_PS: tl.constexpr = False,
    HAS_PE: tl.constexpr = False,
    GAMMA_ROWS: tl.constexpr = False,
    WRITE_ROWS: tl.constexpr = False, NP: tl.constexpr = 1, NPP: tl.constexpr = 1,
    TILE: tl.constexpr = 0, tidx=None, SP: tl.constexpr = 0, wsp=None,
    xch=None, bar=None, SPLIT: tl.constexpr = 1, KQ: tl.constexpr = 0,
    PARTG: tl.constexpr = 0, PREFETCH: tl.constexpr = 0, LAZY: tl.constexpr = 0,
    XT: tl.constexpr = 0, TAG: tl.constexpr = 0, MEET: tl.constexpr = 32,
):
    """The chain of one sequence (program id 0 = b), left to right, or right to left when
    REV (the host then passes the transposed transition, ps and pe swapped and `end` as
    `init`; step i reads position L - 1 - i, and "alpha" is beta_gamma, "gamma" beta_alpha).

    GAMMA_ROWS: `trans` is the (C, C) [src, dst] matrix and gamma reduces over its rows
    (measured faster at C = 39); else `trans` is the host's padded (CP, CP) transpose and
    gamma reduces over its columns (measured faster at C <= 24).

    The two directions meet at M = _split(L, P, MEET). Checkpoints (ring, gamma, alpha, N) are
    stored at every boundary t = k P the chain passes (t = i forward, L - i reversed),
    before the step that leaves it, in slot k of (B, NCK, ...).
    MODE 0, PHASE 0: the half up to M from the start (forward [0, M), reversed [M, L)),
                     state at M -> mid_*.
    MODE 0, PHASE 1: the other half, resumed from mid_* (the backward pass needs every
                     checkpoint); final alpha (relative) and N -> out_*; WRITE_ROWS: also
                     the rows (gamma, alpha, N) of every position it reads, before the
                     step, into rows_* (B, T, ...) at that position.
    MODE 1: recompute checkpoint segment seg0 + program id 1 (forward only) and write its
            rows (gamma, alpha, N) into block program id 1 of rows_* (B, W, P, ...).
    MODE 2: Viterbi half up to M (P = 1: M = ceil(L / 2)), max instead of logsumexp,
            backpointers for every position it passes, state at M -> mid_*.

    NP > 1 (periodic transitions, only with REV: the forward chain of the periodic family
    is _fwd_end_kernel): the transition into a segment depends on that segment's duration
    mod NP, which the reversed chain knows when it reads the segment, so "alpha" splits
    by residue, bg^r[p, c] = logsumexp over the slots with (d-1) mod NP = r, and
        "gamma"[p, c'] = logsumexp_{r, c} trans[r, c', c] + bg^r[p, c]   (O(NP C^2)),
    `trans` being the host's (NPP, CP, CP) padded [r, c', c] (SP > 0: its sparse succ
    form, columns c in tidx: _trans3). The stored "alpha" is
    logsumexp_r bg^r. MODE 2 stores, per position p, bp_d[p, r, c] (the best duration of a
    segment of c starting at p with residue r) and bp_c[p, 0, c'] = r * CP + c (the best
    successor of a segment of c' ending at p), both (B, T, NPP, C).

    KQ > 0 (NP > 1, MODE 0, TILE 0: kernels._rev_opts): the ring as residue planes
    (NPP, KQ, CP), NP KQ >= KP: step s's entry goes to plane s mod NP, row (s div NP) mod
    KQ. Every entry of a plane then has the same residue (i - plane) mod NP at step i, so
    the split by residue is one logsumexp per plane (_planes_by_residue puts them in
    residue order) instead of a select over (NPP, KP, CP). Checkpoints and the state at
    M stay (KP, CP) rings indexed by step (_planes_to_ring / _ring_to_planes), as every
    other kernel reads them; the planes' durations run to NP KQ < 2 KP (the host's
    duration-bias table has 2 KP rows, -inf beyond K). With SPLIT = NP (kernels._rev_opts)
    program g (id 1) holds plane g alone: each step the programs exchange their planes'
    logsumexp parts (_exchange), then all form the same gamma and alpha from them, and
    program 0 alone stores what is not a plane's (as the static split below). PARTG (split
    only): each program forms instead its plane's residue's part of gamma (one (CP, CP)
    slice of the transition, loaded at the top of the step) and the programs exchange
    those parts and the planes' logsumexps.

    LAZY (NP > 1, MODE 0, no rows written): "gamma" comes from the per-residue a3 (or its
    parts), so alpha, a logsumexp over a3, is formed only where it is stored: at the
    checkpoints and the end, from the last step's a3 (_lazy_alpha; the same values, two
    cross-warp reductions a step fewer; with PARTG a3 stays in plane order until then).
    XT (LAZY, PARTG, TAG): the exchanged parts come back label-major, (CP, NPP), and
    gamma's sum over the planes runs along their second axis (no gain alone; with TAG the
    measured form). TAG (SPLIT > 1): the exchange without a
    counter, each part a word tagged with its step (_exchange). PREFETCH: each step's
    emission, start and end rows are loaded one step ahead, off the step's critical path.

    TILE > 0: the ring lives in this program's (KP, CP) float32 slot of
    `work` (B, or B x W in MODE 1) instead of registers and each step walks it TILE slots
    at a time: insert and add the scores (stored back), then the logsumexp over the slots
    as an online one over the tiles (MODE 2: the max, and the shortest duration that
    reaches it, tile by tile); NP > 1: the same per residue (_ring_tiles_res). For rings
    beyond the register file (the whole-ring step spilled: benchmarks/KERNELS_NOTES.md,
    session 16). The same terms, reduced in another order: not bitwise the register ring's
    results (tests compare both with float64); a barrier ends each step.

    SPLIT > 1 (static, MODE 0; kernels._split_opts; periodic: the planes above): SPLIT
    programs (program id 1 = g) share one sequence's chain, program g holding slots
    [g KP/SPLIT, (g+1) KP/SPLIT) of the ring (in registers when TILE = 0, else walked in
    tiles); each step they exchange their partial logsumexps (max, sum) through `xch`
    (B, 2, SPLIT, 2, CP) float32, by step parity, and wait for each other at
    a counter in `bar` (B,) int32, zero at launch (_split_lse); then each combines the
    SPLIT parts in the same order, so all hold the same alpha and gamma, and program 0
    alone stores the rows, checkpoints and states other than the ring's. Every program of
    the launch must be resident at once (the host keeps B x SPLIT within the SMs).
    """
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P, MEET)
    js = tl.arange(0, KP)[:, None]
    lead = True  # the program that stores what is not its part of the ring
    KS: tl.constexpr = KP // SPLIT  # this program's slots (KP unless split)
    g0 = 0  # the first of them
    if SPLIT > 1:  # program g of a split chain
        g = tl.program_id(1)
        lead = g == 0
        if NP > 1:  # periodic: residue plane g (below)
            tl.static_assert((MODE == 0) & (KQ > 0) & (SPLIT == NP))
        else:  # static: slots [g KS, (g + 1) KS)
            tl.static_assert(MODE == 0)
            g0 = g * KS
            if TILE == 0:  # its part of the ring in registers
                js = g0 + tl.arange(0, KS)[:, None]
    tl.static_assert((PARTG == 0) | ((SPLIT > 1) & (NP > 1)))
    if TILE > 0:
        jt = g0 + tl.arange(0, TILE)[:, None]
        if MODE == 1:
            wp = work + (b * tl.num_programs(1) + tl.program_id(1)) * KP * CP
        else:
            wp = work + b * KP * CP
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    cmask1 = cs1 < C
    cmask = cs < C
    rs = tl.arange(0, CP)[:, None]
    if NP > 1:
        tl.static_assert(REV)
        rr = tl.arange(0, NPP)
        r3 = rr[:, None, None]
        rr2 = rr[:, None]
        if KQ > 0:  # the ring as residue planes (NPP, KQ, CP)
            tl.static_assert((MODE == 0) & (TILE == 0) & (NP * KQ >= KP))
            u3 = tl.arange(0, KQ)[None, :, None]
            cs3 = tl.arange(0, CP)[None, None, :]
            if SPLIT > 1:  # this program's plane, (1, 1, 1)
                pq3 = g + tl.arange(0, 1)[:, None, None]
            else:  # all NPP planes
                pq3 = r3
            qv3 = tl.where(pq3 < NP, pq3, 0)  # the plane as _plane_steps takes it
        if PARTG == 0:  # (PARTG: each step its own residue's slice)
            tr3, ti3 = _trans3(trans, tidx, NPP, CP, SP)
        if SP > 0:
            wsp = wsp + (b * tl.num_programs(1) + tl.program_id(1)) * NPP * CP
    elif GAMMA_ROWS:  # trans as given, tr[src, dst]: gamma reduces over the rows
        tr = tl.load(trans + rs * C + cs, mask=(rs < C) & cmask, other=NEG)
    else:
        # the host's padded transpose tr[dst, src] (CP x CP, -inf pad): gamma reduces over
        # the columns, inside a warp
        tr = tl.load(trans + rs * CP + cs)
    seq = b * T * C
    ck = b * NCK
    if REV:
        half = L - M
    else:
        half = M
    if MODE == 1:
        seg = seg0 + tl.program_id(1)
        t0 = seg * P
        i0 = t0
        i1 = tl.minimum(t0 + P, L)
        if TILE > 0:
            _copy_tiles(wp, ck_ring + (ck + seg) * KP * CP, 0.0, jt, cs, KP, CP, TILE)
        else:
            R = tl.load(ck_ring + ((ck + seg) * KP + js) * CP + cs)
        gam = tl.load(ck_gam + (ck + seg) * CP + cs1)
        alp = tl.load(ck_alp + (ck + seg) * CP + cs1)
        n = tl.load(ck_n + ck + seg)
    elif PHASE == 1:
        i0 = half
        i1 = L
        if TILE > 0:
            _copy_tiles(wp, mid_ring + b * KP * CP, 0.0, jt, cs, KS, CP, TILE)
        elif KQ > 0:
            R = _ring_to_planes(mid_ring + b * KP * CP, i0, pq3, qv3, u3, cs3, NP, KP, CP,
                                KQ)
        else:
            R = tl.load(mid_ring + (b * KP + js) * CP + cs)
        gam = tl.load(mid_gam + b * CP + cs1)
        alp = tl.load(mid_alp + b * CP + cs1)
        n = tl.load(mid_n + b)
    else:
        i0 = 0
        i1 = half
        if TILE > 0:
            _empty_tiles(wp, jt, cs, KS, CP, TILE)
        elif KQ > 0:  # empty planes, from a fully masked load (below)
            R = tl.load(mid_ring + (pq3 * 0 + u3) * CP + cs3, mask=(pq3 + u3 + cs3) < 0,
                        other=NEG)
        elif NP > 1:
            # an empty ring that comes from a (fully masked) load: from tl.full, ptxas
            # allocated 32 registers and spilled ~17 KB per thread (sm_90, triton 3.9;
            # a runtime-opaque tl.where did not help)
            R = tl.load(mid_ring + (b * KP + js) * CP + cs, mask=(js + cs) < 0, other=NEG)
        else:
            R = tl.full((KS, CP), NEG, tl.float32)
        gam = tl.load(init + cs1, mask=cmask1, other=NEG)
        alp = tl.full((CP,), NEG, tl.float32)
        n = tl.zeros((), tl.float64)
    mprev = tl.zeros((), tl.float32)
    # the periodic reversed chain forms gamma from the per-residue a3, so without rows
    # its alpha (logsumexp over a3) is formed only where stored: the checkpoints, the end
    LZ: tl.constexpr = (LAZY != 0) & (NP > 1) & (MODE == 0) & (WRITE_ROWS == 0)
    tl.static_assert((XT == 0) | (LZ & (PARTG != 0) & (TAG != 0)))  # (the rules' only XT)
    tl.static_assert((TAG == 0) | (SPLIT > 1))
    if LZ:  # the last step's normalised a3 (-inf before the first): _lazy_alpha
        if XT:
            a3c = tl.full((CP, NPP), NEG, tl.float32)
        else:
            a3c = tl.full((NPP, CP), NEG, tl.float32)
    if PREFETCH:  # step i0's rows (i0 < i1; else never read)
        fN, sN, eN = _step_rows(scores + seq, allowed + seq, ps + seq, pe + seq,
                                _position(i0, L, REV), C, cs1, cs1 < tl.where(i0 < i1, C, 0),
                                HAS_ALLOWED, HAS_PS, HAS_PE)
    if TILE > 0:
        tl.debug_barrier()
    for i in range(i0, i1):
        p = _position(i, L, REV)
        if PREFETCH:  # this step's rows, loaded a step ahead; the next step's
            f = fN
            psr = sN
            per = eN
            fN, sN, eN = _step_rows(scores + seq, allowed + seq, ps + seq, pe + seq,
                                    _position(tl.minimum(i + 1, i1 - 1), L, REV), C, cs1,
                                    cmask1, HAS_ALLOWED, HAS_PS, HAS_PE)
        else:
            f, psr, per = _step_rows(scores + seq, allowed + seq, ps + seq, pe + seq, p, C,
                                     cs1, cmask1, HAS_ALLOWED, HAS_PS, HAS_PE)
        if PARTG:  # this plane's residue's slice of the transition, ahead of its use
            tq3, tqi3 = _trans3(trans, tidx, 1, CP, SP, (i - g + NP) % NP)
        if MODE == 0:
            if REV:
                tb = L - i
            else:
                tb = i
            if tb % P == 0:
                k = tb // P
                if TILE > 0:
                    _copy_tiles(ck_ring + (ck + k) * KP * CP, wp, mprev, jt, cs, KS, CP, TILE)
                elif KQ > 0:
                    _planes_to_ring(ck_ring + (ck + k) * KP * CP, R - mprev, i, pq3, qv3, u3,
                                    cs3, NP, KP, CP, KQ)
                else:
                    tl.store(ck_ring + ((ck + k) * KP + js) * CP + cs, R - mprev)
                tl.store(ck_gam + (ck + k) * CP + cs1, gam, mask=lead)
                if LZ:
                    tl.store(ck_alp + (ck + k) * CP + cs1,
                             tl.where(i == i0, alp,
                                      _lazy_alpha(a3c, i - 1, NP, NPP, PARTG != 0, XT)),
                             mask=lead)
                else:
                    tl.store(ck_alp + (ck + k) * CP + cs1, alp, mask=lead)
                tl.store(ck_n + ck + k, n, mask=lead)
        if MODE == 1 or WRITE_ROWS:
            if WRITE_ROWS:
                r = b * T + p
            else:
                r = (b * tl.num_programs(1) + tl.program_id(1)) * P + (i - i0)
            tl.store(rows_gam + r * CP + cs1, gam, mask=lead)
            tl.store(rows_alp + r * CP + cs1, alp, mask=lead)
            tl.store(rows_n + r, n, mask=lead)
        # blend the new start into its slot, shift the others, add the scores of p
        ins = gam + psr
        if KQ > 0:  # residue planes: step i's entry in plane i mod NP, row (i div NP) mod KQ
            own = (pq3 == i % NP) & (u3 == (i // NP) & (KQ - 1))
            R = tl.where(own, ins[None, None, :], R - mprev) + f[None, None, :]
            d = i - _plane_steps(i, qv3, u3, NP, KQ) + 1  # (NPP, KQ, 1), <= NP KQ < 2 KP
            v = R + tl.load(db + (d - 1) * CP + cs3)
        elif TILE == 0:  # (else _ring_tiles below, over the ring in memory)
            R = tl.where(js == (i & (KP - 1)), ins[None, :], R - mprev) + f[None, :]
            d = ((i - js) & (KP - 1)) + 1  # duration of the segment in each slot, ending at p
            v = R + tl.load(db + (d - 1) * CP + cs)
        if NP > 1:
            # the reversed chain of the periodic family: split by the residue of d
            if TILE > 0:  # the same over the ring in memory, tile by tile
                a3, esum3, bd3 = _ring_tiles_res(wp, ins, f, mprev, i, db, jt, cs, KP,
                                                 CP, TILE, NP, NPP, MODE == 2)
                if MODE != 2:
                    a3 = _lse_join(a3, esum3)
            elif KQ > 0:  # one logsumexp per plane, then the planes in residue order
                mx3 = tl.max(v, 1)  # (NPP, CP), split: (1, CP)
                es3 = tl.sum(tl.exp(v - tl.where(mx3 == NEG, 0.0, mx3)[:, None, :]), 1)
                if PARTG:
                    # this plane's residue rg and its part of gamma, lse_c trans[rg, c', c]
                    # + bg^rg[c] (not yet normalised), then every plane's two from the
                    # exchange: a3 and the parts (NPP, CP) in plane order
                    a3 = _lse_join(mx3, es3) + per[None, :]
                    a3, gq = _exchange(xch + b * 4 * NPP * CP, bar + b, tl.max(a3, 0),
                                       _lse_outer(_combine(tq3, tqi3, a3, SP, wsp, CP)),
                                       i - i0, g, cs1, CP, SPLIT, NPP, XT, TAG)
                    if XT:  # (CP, NPP)
                        gq = tl.where(tl.arange(0, NPP)[None, :] < NP, gq, NEG)
                    else:
                        gq = tl.where(rr2 < NP, gq, NEG)
                else:
                    if SPLIT > 1:  # every program's plane, (NPP, CP) in plane order
                        mx3, es3 = _exchange(xch + b * 4 * NPP * CP, bar + b,
                                             tl.max(mx3, 0), tl.sum(es3, 0), i - i0, g, cs1,
                                             CP, SPLIT, NPP, 0, TAG)
                    a3 = _lse_join(mx3, es3)
                if (LZ == 0) | (PARTG == 0):  # (LZ with PARTG: plane order, _lazy_alpha)
                    a3 = _planes_by_residue(a3, i, NP, NPP)
            elif MODE == 2:
                a3, bd3 = _res_best(v, d, NP, NPP, KP)
            else:
                # logsumexp over the slots per residue with one exponential per slot
                # (against its own residue's max), one (KP, CP) pass per residue
                # (unrolled) with no (NPP, KP, CP) temporary
                dres = (d - 1) % NP  # (KP, 1)
                mx3, sh = _res_max(v, dres, NP, NPP, KP, CP)
                # log 0 = NEG where a residue is empty
                a3 = (tl.where(mx3 == NEG, 0.0, mx3)
                      + tl.log(_res_sums(tl.exp(v - sh), dres, NP, NPP, CP)))
            if PARTG == 0:  # (PARTG: added above)
                a3 = a3 + per[None, :]
            if XT:
                m = _safe_max(tl.max(a3, 1))
            else:
                m = _safe_max(tl.max(a3, 0))
            a3 = a3 - m
            n = n + m.to(tl.float64)
            mprev = m
            if LZ:
                a3c = a3
            if PARTG:  # gamma from the planes' parts
                if XT:
                    gam = _lse1(gq) - m
                else:
                    gam = _lse0(gq) - m
                if LZ == 0:
                    alp = _lse0(a3)
            elif MODE == 2:
                g3 = _combine(tr3, ti3, a3, SP, wsp, CP)  # [r, c', c] (sparse: [r, c', s])
                gy = tl.max(g3, 2)  # (NPP, CP): best successor label per residue
                gyi = _column(ti3, tl.argmax(g3, 2), SP)
                gam = tl.max(gy, 0)
                gri = tl.argmax(gy, 0)  # best residue per c'
                best_y = tl.sum(tl.where(rr2 == gri[None, :], gyi, 0), 0)
                alp = tl.max(a3, 0)
                bpb = (b * T + p) * NPP * C
                tl.store(bp_d + bpb + rr2 * C + cs, bd3.to(bp_d.dtype.element_ty),
                         mask=(rr2 < NP) & cmask)
                tl.store(bp_c + bpb + cs1, (gri * CP + best_y).to(bp_c.dtype.element_ty),
                         mask=cmask1)
            else:
                gam = _lse_outer(_combine(tr3, ti3, a3, SP, wsp, CP))
                if LZ == 0:
                    alp = _lse0(a3)
        else:
            if TILE > 0:  # the same over the ring in memory
                alp, esum, best_d = _ring_tiles(wp, ins, f, mprev, i, db, jt, cs, KP, CP,
                                                TILE, MODE == 2, KS)
                if SPLIT > 1:
                    alp, esum = _split_lse(xch + b * 4 * SPLIT * CP, bar + b, alp, esum,
                                           i - i0, g, cs1, CP, SPLIT)
                if MODE != 2:
                    alp = _lse_join(alp, esum)
            elif SPLIT > 1:  # this program's slots, then the parts exchanged
                alp, esum = _lse0_parts(v)
                alp, esum = _split_lse(xch + b * 4 * SPLIT * CP, bar + b, alp, esum, i - i0,
                                       g, cs1, CP, SPLIT)
                alp = _lse_join(alp, esum)
            elif MODE == 2:
                alp = tl.max(v, 0)
                best_d = tl.min(tl.where(v == alp[None, :], d, KP + 1), 0)
            else:
                alp = _lse0(v)
            alp = alp + per
            m = _safe_max(alp)
            alp = alp - m
            n = n + m.to(tl.float64)
            mprev = m
            if GAMMA_ROWS:
                g2 = alp[:, None] + tr
                if MODE == 2:
                    gam = tl.max(g2, 0)
                    best_c = tl.argmax(g2, 0)
                else:
                    gam = _lse0(g2)
            else:
                g2 = tr + alp[None, :]
                if MODE == 2:
                    gam = tl.max(g2, 1)
                    best_c = tl.argmax(g2, 1)
                else:
                    gam = _lse1(g2)
            if MODE == 2:
                tl.store(bp_d + seq + p * C + cs1, best_d.to(bp_d.dtype.element_ty),
                         mask=cmask1)
                tl.store(bp_c + seq + p * C + cs1, best_c.to(bp_c.dtype.element_ty),
                         mask=cmask1)
    if LZ:
        alp = tl.where(i1 > i0, _lazy_alpha(a3c, i1 - 1, NP, NPP, PARTG != 0, XT), alp)
    if MODE == 2 or (MODE == 0 and PHASE == 0):
        if TILE > 0:
            _copy_tiles(mid_ring + b * KP * CP, wp, mprev, jt, cs, KS, CP, TILE)
        elif KQ > 0:
            _planes_to_ring(mid_ring + b * KP * CP, R - mprev, i1, pq3, qv3, u3, cs3, NP, KP,
                            CP, KQ)
        else:
            tl.store(mid_ring + (b * KP + js) * CP + cs, R - mprev)
        tl.store(mid_gam + b * CP + cs1, gam, mask=lead)
        tl.store(mid_alp + b * CP + cs1, alp, mask=lead)
        tl.store(mid_n + b, n, mask=lead)
    if MODE == 0 and PHASE == 1:
        tl.store(out_alp + b * CP + cs1, alp, mask=lead)
        tl.store(out_n + b, n, mask=lead)


@triton.jit
def _crossing(F, Rb, t1, i1, K, db, js, cs, cs1, KP: tl.constexpr, CP: tl.constexpr):
    """logsumexp, per label c, of every segment [s, e) of c with s < t1 < e, e - s <= K:
    F = the forward ring at t1 (slot s % KP: gamma[s] + ps[s] + f[s..t1-1], relative),
    Rb = the reversed ring at t1 (slot of end e: f[t1..e-1] + pe[e-1] + beta_alpha[e],
    relative; i1 = the reversed step that read position t1)."""
    db_r = ((i1 - js) & (KP - 1)) + 1  # e - t1 for the end in each reversed slot
    # an online logsumexp per (end slot, label) over the starts: no reduction in the loop
    # (js and Rb may be a tile of the slots: _crossing_tiled). Only starts with
    # a + (e - t1) <= K for some end of the tile: the others' terms are exactly -inf (the
    # duration-bias table is -inf beyond K) and leave es and em bitwise unchanged, so a
    # tiled walk sums a triangle of the (start, end) square, the same bits in half the
    # terms; for the whole ring (min e - t1 = 1) the bound is K, as before.
    es = tl.zeros_like(Rb)
    em = es + NEG
    for a in range(1, tl.minimum(K - tl.min(db_r) + 1, t1 + 1)):  # start s = t1 - a
        s = t1 - a
        Fa = tl.load(F + (s & (KP - 1)) * CP + cs1)
        dd = a + db_r
        v2 = Fa[None, :] + Rb + tl.load(db + (dd - 1) * CP + cs, mask=dd <= KP, other=NEG)
        newm = tl.maximum(em, v2)
        newms = tl.where(newm == NEG, 0.0, newm)
        es = es * tl.exp(em - newms) + tl.exp(v2 - newms)
        em = newm
    cm = tl.max(em, 0)
    cms = tl.where(cm == NEG, 0.0, cm)
    csum = tl.sum(es * tl.exp(em - cms[None, :]), 0)
    return tl.where(cm == NEG, NEG, cms + tl.log(csum))


@triton.jit
def _crossing_tiled(F, Rp, t1, i1, K, db, cs, cs1, KP: tl.constexpr, CP: tl.constexpr,
                    TILE: tl.constexpr):
    """_crossing with the reversed ring read from memory (Rp: its (KP, CP) slots) TILE
    slots at a time, the tiles' results joined by logaddexp (the same terms, summed in
    another order; with TILE = KP exactly _crossing's result: logaddexp(-inf, v) = v)."""
    acc = tl.full((CP,), NEG, tl.float32)
    for j0 in range(0, KP, TILE):
        jt = j0 + tl.arange(0, TILE)[:, None]
        acc = _logaddexp(acc, _crossing(F, tl.load(Rp + jt * CP + cs), t1, i1, K, db, jt, cs,
                                        cs1, KP, CP))
    return acc


@triton.jit
def _cross_part_kernel(f_ring, r_ring, db, lengths, parts, K, P, KP: tl.constexpr,
                       CP: tl.constexpr, TILE: tl.constexpr):
    """One tile of the join's crossing sum (program id 1 = tile t; _join_kernel NT): the
    segments across M = _split(L, P, 32) whose end lies in slots [t TILE, (t + 1) TILE) of
    the reversed ring, per label, into parts (B, NT, CP). The tiles' walks differ in
    length (a triangle: _crossing), so many short programs run what one program per
    sequence ran tile after tile (at K = 8192, 16 sequences: 16 programs of ~K^2 / 2
    terms each)."""
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P, 32)
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    jt = t * TILE + tl.arange(0, TILE)[:, None]
    part = _crossing(f_ring + b * KP * CP, tl.load(r_ring + (b * KP + jt) * CP + cs), M,
                     L - 1 - M, K, db, jt, cs, cs1, KP, CP)
    tl.store(parts + (b * tl.num_programs(1) + t) * CP + cs1, part)


@triton.jit
def _join_kernel(f_ring, f_alp, f_n, r_ring, r_gam, r_n, db, lengths, log_z, C, K, P,
                 KP: tl.constexpr, CP: tl.constexpr, TILE: tl.constexpr = 0, parts=None,
                 NT: tl.constexpr = 0):
    """log Z of one sequence where the static chains' halves meet (M = _split(L, P, 32)): a
    boundary at M (alpha[M] + beta_alpha[M]) or a segment across it, with both chains' normalisers.
    TILE > 0: the crossing sum over the reversed ring TILE slots at a time (else in one
    tile). NT > 0: the crossing sum's NT tiles were summed by _cross_part_kernel into
    parts (B, NT, CP); joined here in tile order, as _crossing_tiled joins them."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P, 32)
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    if NT > 0:
        cross = tl.full((CP,), NEG, tl.float32)
        for t in range(NT):
            cross = _logaddexp(cross, tl.load(parts + (b * NT + t) * CP + cs1))
    else:
        cross = _crossing_tiled(f_ring + b * KP * CP, r_ring + b * KP * CP, M, L - 1 - M, K,
                                db, cs, cs1, KP, CP, TILE if TILE > 0 else KP)
    bnd = tl.load(f_alp + b * CP + cs1) + tl.load(r_gam + b * CP + cs1)
    zq = _through(cross, bnd)
    lz = tl.load(f_n + b) + tl.load(r_n + b) + zq.to(tl.float64)
    tl.store(log_z + b, tl.where(zq == NEG, float("-inf"), lz))


@triton.jit
def _bwd_kernel(
    scores, allowed, ps, pe, trans, db, final, lengths, grad_log_z,
    ck_ring, ck_alp, ck_n, rk_ring, rk_gam, rk_n,
    rows_gam, rows_alp, rows_n, fin_alp, fin_n, log_z,
    g_scores, g_ps, g_pe, g_db, g_tr, work,
    T, C, K, P, NCK, seg0,
    KP: tl.constexpr, CP: tl.constexpr,
    HAS_ALLOWED: tl.constexpr, HAS_PS: tl.constexpr, HAS_PE: tl.constexpr,
    REV: tl.constexpr = False, ROWS_FULL: tl.constexpr = False,
    NP: tl.constexpr = 1, NPP: tl.constexpr = 1, END: tl.constexpr = False,
    PARAM_GRADS: tl.constexpr = True, DB_GLOBAL: tl.constexpr = False,
    TILE: tl.constexpr = 0, tidx=None, SP: tl.constexpr = 0, wsp=None,
    MEET: tl.constexpr = 32,
):
    """Reversed chain (beta) over checkpoint segment seg = seg0 + program id 1 of sequence
    b = program id 0, with gradients; every segment of every sequence runs at once.

    Starts from the reversed checkpoint at the segment's right end t1 (rk_*; at t1 = L the
    chain's own start) and reads the forward rows of the segment: rows_* (B, W, P, ...)
    recomputed for this wave (block program id 1), or, ROWS_FULL, rows_* (B, T, ...) that
    the chains wrote on their second halves. Writes g_b * d logZ_b / d (scores, proj_start,
    proj_end) for the segment's positions and this segment's g_b * d logZ_b /
    d (duration_bias, transition) into its own slot of g_db (B, NCK, KP, CP) and g_tr
    (B, NCK, CP, CP), float32; the host sums the slots in a fixed order (no atomics).

    REV (only with ROWS_FULL): the mirror image, for the segments left of M = _split(L, P, MEET):
    the forward chain with gradients over [t0, t1), from the forward checkpoint at t0,
    reading the rows the reversed chain wrote there. The host passes the reversed chain's
    operands (ps <-> pe, g_ps <-> g_pe, transposed transition, `start` as `final`, the
    checkpoints of the two directions swapped, the reversed chain's final state and log Z
    at 0) and transposes g_tr. Without REV and with ROWS_FULL, the segments left of M
    are left to the REV launch.

    Local normaliser: forward and reversed chains round differently, and over 1e6 steps
    their fp32 drifts would put posteriors off by ~1e-3 against a single log Z. So each
    segment uses log Z recomputed at the boundary its chain starts from (t1; t0 when REV)
    from the very values it multiplies: the other direction's checkpoint ring there and
    the chain's own ring,
        Z = sum_c exp(alpha[t1,c] + beta_alpha[t1,c])                  (a boundary at t1)
          + sum_{s < t1 < e, e-s <= K, c} P~(s, e, c)                  (segments across t1)
    and the label-marginal carry restarts there from the exact crossing probabilities, so
    no sum runs over more than one segment's positions. The segment at the chain's own
    start (t1 = L; t0 = 0 when REV) uses the other chain's own log Z there (from fin_*).
    The REV program of the segment ending at M < L also adds the duration posterior of
    the segments across M, normalised by the forward pass's log Z (`log_z`).
    Below, positions and boundaries are in the chain's frame (mirrored when REV:
    u -> L - 1 - u for positions, t -> L - t for boundaries).

    END (the periodic family, any NP >= 1; never REV): the forward checkpoints are
    _fwd_end_kernel's; ROWS_FULL: one launch for every segment, reading the rows (B, T,
    ...) that the forward chains wrote (WRITE_ROWS), else waves of recomputed rows.
    NP > 1: the reversed chain of _fwd_kernel's NP > 1 branch with its gradients; the
    forward checkpoint rings are _fwd_end_kernel's (indexed by segment end, so the
    segments across u1 are one elementwise sum of the two rings), rows_gam holds
    gamma^r (NPP, CP) per position, and the segment posteriors, P_start = sum_r
    exp(gamma^r + bg^r - log Z), the duration_bias and the transition (per residue, g_tr
    (B, NCK, NPP, CP, CP)) gradients are taken per residue.

    SP > 0 (NP > 1): `trans` / tidx are the sparse succ form [r, src, s] (_trans3) and the
    transition sums go to g_tr (B, NCK, NPP, CP, SP) by slot s (the host scatters them to
    their columns); the gathers go through wsp (B x NCK rows of NPP x CP floats).

    PARAM_GRADS False: only the per-position gradients (scores, proj_start, proj_end:
    what posteriors need); the duration_bias and transition sums are neither formed nor
    written (g_db and g_tr may be dummies), which saves a (KP, CP) gather and a residue
    split per step and an (NPP, CP, CP) exponential.

    DB_GLOBAL (with PARAM_GRADS; g_db zeroed by the host): the duration-bias sum is kept
    in this segment's own slot of g_db instead of registers: each step adds its slots'
    posteriors there in duration order (a load and a store of the (KP, CP) slot, then a
    barrier, since the thread that holds duration d changes every step), and the end
    scales it by g_b. Each element receives the same additions in the same order as the
    register sum: bitwise the same in Triton's interpreter; compiled, the last bits differ
    (the compiler's instruction choices differ; both are deterministic and within float32
    of float64: tests). For long rings, where holding a second (KP, CP) sum made the
    whole backward spill.

    TILE > 0 (DB_GLOBAL with PARAM_GRADS): the reversed ring lives in this segment's
    (KP, CP) float32 slot of `work` (B, NCK, KP, CP) instead of registers, and each step
    walks it TILE slots at a time: insert and add the scores (stored back), the logsumexp
    over the slots as an online one over the tiles (each tile's max and sum per label),
    then, for the duration-bias sum, a second walk that recomputes each tile's
    exponentials against the final max (_db_tiles). A thread then holds TILE x
    CP / threads values of each (TILE, CP) temporary: for rings beyond the register
    file (KP x CP >= 32768), where the whole-ring step spilled. The crossing sums read the
    reversed checkpoint ring from memory in tiles too (_crossing_tiled; END:
    _crossing_end_tiled). NP > 1: the logsumexp per residue (_ring_tiles_res), each
    residue against its own max, and the duration-bias walk against it. The same terms
    as the register ring, summed in another order: not bitwise its results (tests compare
    both with float64).
    """
    b = tl.program_id(0).to(tl.int64)
    seg = seg0 + tl.program_id(1)
    slot = b * NCK + seg  # this segment's slot of g_db and g_tr
    L = tl.load(lengths + b).to(tl.int32)
    t0 = seg * P
    t1 = tl.minimum(t0 + P, L)
    if ROWS_FULL:
        M = _split(L, P, MEET)
        if END:  # one launch for every segment (the periodic family's forward rows)
            mine = t0 < L
        elif REV:
            mine = (t0 < L) & (t1 <= M)
        else:
            mine = (t0 < L) & (t0 >= M)
    else:
        mine = t0 < L
    if mine:  # this sequence has a segment `seg`, and it is this launch's
        if REV:  # the mirror frame: [L - t1, L - t0), its chain starts at L - t0
            u0 = L - t1
            u1 = L - t0
            kb = seg
        else:
            u0 = t0
            u1 = t1
            kb = seg + 1
        js = tl.arange(0, KP)[:, None]
        cs = tl.arange(0, CP)[None, :]
        cs1 = tl.arange(0, CP)
        cmask1 = cs1 < C
        cmask = cs < C
        rs = tl.arange(0, CP)[:, None]
        if END:
            tl.static_assert(not REV)
        if TILE > 0:
            tl.static_assert(DB_GLOBAL or not PARAM_GRADS)
            wp = work + slot * KP * CP  # this segment's ring
            jt = tl.arange(0, TILE)[:, None]
        if NP > 1:
            tl.static_assert(END)
            rr = tl.arange(0, NPP)
            r3 = rr[:, None, None]
            rr2 = rr[:, None]
            rs3 = tl.arange(0, CP)[None, :, None]
            if SP == 0:
                cs3 = tl.arange(0, CP)[None, None, :]
                tr3 = tl.load(trans + (r3 * C + rs3) * C + cs3,  # [r, src, dst]
                              mask=(r3 < NP) & (rs3 < C) & (cs3 < C), other=NEG)
                ti3 = tl.zeros((1, 1, 1), tl.int32)
            else:  # the sparse succ form [r, src, s] (_trans3)
                cs3 = tl.arange(0, SP)[None, None, :]
                tr3, ti3 = _trans3(trans, tidx, NPP, CP, SP)
                wsp = wsp + slot * NPP * CP
        else:
            tr = tl.load(trans + rs * C + cs, mask=(rs < C) & cmask, other=NEG)  # [src, dst]
        seq = b * T * C
        gl = tl.load(grad_log_z + b)
        if u1 == L:  # the chain's own start: nothing after L
            if TILE > 0:
                _empty_tiles(wp, jt, cs, KP, CP, TILE)
            else:
                R = tl.full((KP, CP), NEG, tl.float32)
            gam = tl.load(final + cs1, mask=cmask1, other=NEG)  # beta_alpha[L] = end
            n = tl.zeros((), tl.float64)
            # the other chain's own log Z at L: its final alpha with `end`
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
            if TILE > 0:
                _copy_tiles(wp, rk_ring + ckb * KP * CP, 0.0, jt, cs, KP, CP, TILE)
            else:
                R = tl.load(rk_ring + (ckb * KP + js) * CP + cs)
            gam = tl.load(rk_gam + ckb * CP + cs1)  # beta_alpha[u1]
            n = tl.load(rk_n + ckb)
            bnd = tl.load(ck_alp + ckb * CP + cs1) + gam
            if END:  # TILE = 0: one tile, _crossing_end's result
                cross = _crossing_end_tiled(ck_ring + ckb * KP * CP, rk_ring + ckb * KP * CP,
                                            u1, L, cs, cmask, KP, CP,
                                            TILE if TILE > 0 else KP)
            elif TILE > 0:
                cross = _crossing_tiled(ck_ring + ckb * KP * CP, rk_ring + ckb * KP * CP, u1,
                                        L - 1 - u1, K, db, cs, cs1, KP, CP, TILE)
            else:  # from the register ring (through memory, as one tile, the register
                # backward at 1024 x 16 compiled with 64 registers and twice the stack)
                cross = _crossing(ck_ring + ckb * KP * CP, R, u1, L - 1 - u1, K, db, js, cs,
                                  cs1, KP, CP)
            zq = _through(cross, bnd)
            lz = tl.load(ck_n + ckb) + n + zq.to(tl.float64)
            run = tl.exp(cross - zq).to(tl.float64)  # P(a segment of c crosses u1)
            pend = tl.exp(bnd - zq)  # P_end[u1]
            run = tl.where(zq > float("-inf"), run, 0.0)
            pend = tl.where(zq > float("-inf"), pend, 0.0)
        mprev = tl.zeros((), tl.float32)
        lz_ok = lz > float("-inf")
        if TILE > 0:
            tl.debug_barrier()  # the ring's tiles are read below by other threads
        else:
            acc_db = tl.zeros((KP, CP), tl.float32)  # unchanged (dead) without PARAM_GRADS
        if NP > 1 and SP > 0:
            acc_tr = tl.zeros((NPP, CP, SP), tl.float32)
        elif NP > 1:
            acc_tr = tl.zeros((NPP, CP, CP), tl.float32)
        else:
            acc_tr = tl.zeros((CP, CP), tl.float32)
        if ROWS_FULL:
            rbase = b * T
        else:
            rbase = (b * tl.num_programs(1) + tl.program_id(1)) * P - t0
        for q in range(0, u1 - u0):  # noqa: PIE808 (Triton's range)
            i = L - u1 + q  # step of this chain; it reads position L - 1 - i of its frame
            if REV:
                p = i + tl.zeros((), tl.int64)
            else:
                p = (L - 1 - i).to(tl.int64)
            f = _emission(scores + seq, allowed + seq, p, C, cs1, cmask1, HAS_ALLOWED)
            psr = _load_row(ps + seq, p, C, cs1, cmask1, HAS_PS)
            per = _load_row(pe + seq, p, C, cs1, cmask1, HAS_PE)
            r = rbase + p
            aF = tl.load(rows_alp + r * CP + cs1)
            nF = tl.load(rows_n + r)
            ins = gam + per
            if TILE > 0 and NP > 1:  # per residue, tile by tile (online over the tiles)
                mx3, esum3, _ = _ring_tiles_res(wp, ins, f, mprev, i, db, jt, cs, KP, CP,
                                                TILE, NP, NPP, False)
                mxs3 = tl.where(mx3 == NEG, 0.0, mx3)
            elif TILE > 0:
                # the same, tile by tile, with an online logsumexp over the tiles
                mx, esum, _ = _ring_tiles(wp, ins, f, mprev, i, db, jt, cs, KP, CP, TILE,
                                          False, KP)
                mxs = tl.where(mx == NEG, 0.0, mx)
            else:
                R = tl.where(js == (i & (KP - 1)), ins[None, :], R - mprev) + f[None, :]
                d = ((i - js) & (KP - 1)) + 1
                v = R + tl.load(db + (d - 1) * CP + cs)
                # beta_gamma[p] = logsumexp over the slots + ps; the exponentials are kept
                # for the segment posteriors
                if NP > 1:  # each slot against its own residue's max (below)
                    # one (KP, CP) pass per residue (unrolled), no (NPP, KP, CP) temporary
                    dres = (d - 1) % NP  # (KP, 1): the residue of each slot's duration
                    mx3, sh = _res_max(v, dres, NP, NPP, KP, CP)
                    mxs3 = tl.where(mx3 == NEG, 0.0, mx3)
                    e = tl.exp(v - sh)
                    esum3 = _res_sums(e, dres, NP, NPP, CP)
                else:
                    mx = tl.max(v, 0)
                    mxs = tl.where(mx == NEG, 0.0, mx)
                    e = tl.exp(v - mxs[None, :])
            if NP > 1:
                # split by the residue of each slot's duration, each residue's sum esum3
                # against its own max mx3 (>= 1 where the residue has a finite slot). Not
                # against the max over every residue: a residue far below another (its
                # gamma far above, so its segments still count) underflowed to 0 there,
                # dropping its segments, or to a subnormal whose ratio
                # P_start / esum3 overflowed (NaN duration-bias gradients: fly training at
                # batch 32, 2026-11-28)
                bg3 = tl.where(mx3 == NEG, NEG, mxs3 + tl.log(esum3))
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
                    if TILE > 0:
                        _db_tiles(g_db, wp, db, slot, i, jt, cs, mxs3, fac3, KP, CP, TILE,
                                  NP, NPP)
                    else:
                        w = e * _res_rows(fac3, dres, NP, NPP)  # its residue's factor
                        acc_db = _db_step(acc_db, g_db, slot, w, i, js, cs, KP, CP, DB_GLOBAL)
                # beta_alpha[p, c'] = logsumexp_{r, c} trans[r, c', c] + bg^r[p, c]
                if SP == 0:
                    ba = _lse_outer(tr3 + bg3[:, None, :])
                    if PARAM_GRADS:
                        acc_tr += tl.exp(aF[None, :, None] + tr3 + (bg3 + base)[:, None, :])
                else:  # c = the columns ti3; the gradient's slots are [r, c', s]
                    gb3 = _spread(bg3, ti3, wsp, CP)
                    ba = _lse_outer(tr3 + gb3)
                    if PARAM_GRADS:
                        acc_tr += tl.exp(aF[None, :, None] + tr3 + (gb3 + base))
            else:
                gF = tl.load(rows_gam + r * CP + cs1)
                if TILE == 0:
                    esum = tl.sum(e, 0)
                bg = tl.where(mx == NEG, NEG, mxs + tl.log(esum)) + psr
                m = _safe_max(bg)
                bg = bg - m
                n = n + m.to(tl.float64)
                mprev = m
                base = (nF + n - lz).to(tl.float32)
                base = tl.where(lz_ok, base, NEG)
                pstart = tl.exp(gF + bg + base)
                # P(p, d, c) for every slot = e * pstart / esum (<= 1: no overflow),
                # gathered into duration order
                if PARAM_GRADS and TILE > 0:  # one residue: r = 0 for every slot
                    _db_tiles(g_db, wp, db, slot, i, jt, cs, mxs[None, :],
                              tl.where(esum > 0, pstart / esum, 0.0)[None, :],
                              KP, CP, TILE, 1, 1)
                elif PARAM_GRADS:
                    w = e * tl.where(esum > 0, pstart / esum, 0.0)[None, :]
                    acc_db = _db_step(acc_db, g_db, slot, w, i, js, cs, KP, CP, DB_GLOBAL)
                # beta_alpha[p, c'] = logsumexp_c trans[c', c] + beta_gamma[p, c]
                ba = _lse1(tr + bg[None, :])
                # the transition at this chain's boundary u (position p, or p + 1 when
                # REV): the REV launch's last one is M, which the other launch's first
                # one skips
                if PARAM_GRADS:
                    trw = tl.exp(aF[:, None] + tr + (bg + base)[None, :])
                    if ROWS_FULL and not REV and not END:
                        acc_tr += tl.where(p == M, 0.0, trw)
                    else:
                        acc_tr += trw
            pe_next = pend  # P_end[p + 1]
            run = run + pe_next.to(tl.float64)
            tl.store(g_scores + seq + p * C + cs1, gl * run.to(tl.float32), mask=cmask1)
            run = run - pstart.to(tl.float64)
            tl.store(g_ps + seq + p * C + cs1, gl * pstart, mask=cmask1)
            tl.store(g_pe + seq + p * C + cs1, gl * pe_next, mask=cmask1)
            gam = ba
            pend = tl.exp(aF + gam + base)  # P_end[p]
        if REV and PARAM_GRADS:  # noqa: SIM102 (a constexpr test, then a runtime one)
            if (t1 == M) & (M < L):  # the segments across M, counted by neither launch
                kc = b * NCK + seg + 1  # both chains' checkpoints at M
                shift = (tl.load(rk_n + kc) + tl.load(ck_n + kc) - tl.load(log_z + b))
                shift = tl.where(tl.load(log_z + b) > float("-inf"), shift.to(tl.float32),
                                 NEG)
                if TILE > 0:
                    for j0 in range(0, KP, TILE):
                        _add_in_place(g_db + (slot * KP + j0 + jt) * CP + cs, _crossing_db(
                            rk_ring + kc * KP * CP, ck_ring + kc * KP * CP, M, L, K, db,
                            shift, j0 + jt, cs, cs1, cmask, KP, CP))
                else:
                    xdb = _crossing_db(rk_ring + kc * KP * CP, ck_ring + kc * KP * CP, M,
                                       L, K, db, shift, js, cs, cs1, cmask, KP, CP)
                    if DB_GLOBAL:
                        _add_in_place(g_db + (slot * KP + js) * CP + cs, xdb)
                    else:
                        acc_db += xdb
        if PARAM_GRADS:
            if TILE > 0:
                for j0 in range(0, KP, TILE):
                    dbp = g_db + (slot * KP + j0 + jt) * CP + cs
                    acc_t = gl * tl.load(dbp)
                    tl.debug_barrier()  # as in _add_in_place
                    tl.store(dbp, acc_t)
            else:
                dbp = g_db + (slot * KP + js) * CP + cs
                if DB_GLOBAL:
                    acc_db = tl.load(dbp)
                tl.store(dbp, gl * acc_db)
            if NP > 1 and SP > 0:
                tl.store(g_tr + ((slot * NPP + r3) * CP + rs3) * SP + cs3, gl * acc_tr)
            elif NP > 1:
                tl.store(g_tr + ((slot * NPP + r3) * CP + rs3) * CP + cs3, gl * acc_tr)
            elif REV:  # the mirror frame's transition is the transpose
                tl.store(g_tr + (slot * CP + cs) * CP + rs, gl * acc_tr)
            else:
                tl.store(g_tr + (slot * CP + rs) * CP + cs, gl * acc_tr)


@triton.jit
def _db_tiles(g_db, wp, db, slot, i, jt, cs, mx3, fac3, KP: tl.constexpr,
              CP: tl.constexpr, TILE: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr):
    """The tiled backward's duration-bias step: every slot's segment posterior, its
    exponential recomputed from the ring in memory (wp, after step i) against its residue's
    max, exp(v - mx3[r]) * fac3[r] (fac3 = P_start / the residue's sum), added to g_db's
    slot `slot` in duration order, TILE slots at a time; then a barrier. Static
    transitions: one residue (NP = NPP = 1, (1, CP) mx3 and fac3)."""
    for j0 in range(0, KP, TILE):
        jj = j0 + jt
        dt = ((i - jj) & (KP - 1)) + 1
        vt = tl.load(wp + jj * CP + cs) + tl.load(db + (dt - 1) * CP + cs)
        dres = (dt - 1) % NP
        mt = _res_rows(mx3, dres, NP, NPP)
        ft = _res_rows(fac3, dres, NP, NPP)
        gp = g_db + (slot * KP + dt - 1) * CP + cs
        acc = tl.load(gp) + tl.exp(vt - mt) * ft
        tl.debug_barrier()  # loaded by every (replicated) thread before a store: _tile_step
        tl.store(gp, acc)
    tl.debug_barrier()


@triton.jit
def _add_in_place(ptr, v):
    """*ptr += v, with a barrier between the load and the store (a replicated layout's
    threads all read the old value: common._tile_step) and one after it (the next step's
    threads read what these wrote)."""
    acc = tl.load(ptr) + v
    tl.debug_barrier()
    tl.store(ptr, acc)
    tl.debug_barrier()


@triton.jit
def _db_step(acc_db, g_db, slot, w, i, js, cs, KP: tl.constexpr, CP: tl.constexpr,
             DB_GLOBAL: tl.constexpr):
    """One step of _bwd_kernel's duration-bias sum: w's slots (ring order at step i, slot
    j holding duration ((i - j) mod KP) + 1) added in duration order, to the register sum
    acc_db (returned), or (DB_GLOBAL) to g_db's (KP, CP) slot `slot`."""
    if DB_GLOBAL:
        _add_in_place(g_db + (slot * KP + ((i - js) & (KP - 1))) * CP + cs, w)
    else:
        acc_db += tl.gather(w, (i - js + cs * 0) & (KP - 1), 0)
    return acc_db


@triton.jit
def _crossing_db(F, Rr, M, L, K, db, shift, js, cs, cs1, cmask,
                 KP: tl.constexpr, CP: tl.constexpr):
    """Posterior of the segments across M (s < M < e) summed per duration e - s: a
    (KP, CP) tile, row d - 1, from the forward ring F and the reversed ring Rr at M
    (relative) and shift = their normalisers - log Z."""
    dbt = tl.load(db + js * CP + cs)  # row d - 1
    acc = tl.zeros_like(dbt)  # js may be a tile of the rows
    for a in range(1, tl.minimum(K, M + 1)):  # start s = M - a
        Fa = tl.load(F + ((M - a) & (KP - 1)) * CP + cs1)
        # the reversed ring's slot of the end e = s + d for each duration d = row + 1:
        # the reversed chain's step that read position e - 1 is L - e
        e = M - a + js + 1
        Re = tl.load(Rr + ((L - e) & (KP - 1)) * CP + cs, mask=(js >= a) & (e <= L) & cmask,
                     other=NEG)
        acc += tl.exp(Fa[None, :] + Re + dbt + shift)
    return acc


@triton.jit
def _viterbi_join_kernel(f_ring, f_alp, f_n, r_ring, r_gam, r_n, db, lengths,
                         bp_d, bp_c, score, labels, starts, T, C, K,
                         KP: tl.constexpr, CP: tl.constexpr, BLOCK: tl.constexpr):
    """Best path of one sequence from the two Viterbi halves (meeting at M = ceil(L / 2)):
    the best of a boundary at M and every segment across M, then the traceback to the left
    through the forward backpointers (bp_d[t-1, c]: duration of the best segment of c
    ending at t; bp_c[s-1, c]: the label before a segment of c starting at s) and to the
    right through the reversed ones (bp_d[s, c]: duration of the best segment of c starting
    at s; bp_c[e, c]: the label after a segment of c ending at e). Writes the score
    (float64, -inf if nothing is allowed), each segment's label over its positions into
    labels[b] and 1 at its start into starts[b] (else untouched: -1 and 0)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, 1, 32)
    js = tl.arange(0, KP)[:, None]
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    Rb = tl.load(r_ring + (b * KP + js) * CP + cs)
    F = f_ring + b * KP * CP
    i1 = L - 1 - M
    db_r = ((i1 - js) & (KP - 1)) + 1  # e - M for the end in each reversed slot
    bt = tl.full((KP, CP), NEG, tl.float32)  # best over the starts, per (end slot, label)
    bt_a = tl.zeros((KP, CP), tl.int32)
    for a in range(1, tl.minimum(K, M + 1)):  # segments [M - a, e) across M
        Fa = tl.load(F + ((M - a) & (KP - 1)) * CP + cs1)
        dd = a + db_r
        v2 = Fa[None, :] + Rb + tl.load(db + (dd - 1) * CP + cs, mask=dd <= KP, other=NEG)
        up = v2 > bt
        bt = tl.where(up, v2, bt)
        bt_a = tl.where(up, a, bt_a)
    best_v = tl.max(bt, 0)
    best_j = tl.argmax(bt, 0).to(tl.int32)
    best_a = tl.sum(tl.where(js == best_j[None, :], bt_a, 0), 0)
    bnd = tl.load(f_alp + b * CP + cs1) + tl.load(r_gam + b * CP + cs1)
    bv = tl.max(bnd, 0)
    bc = tl.argmax(bnd, 0).to(tl.int64)
    cv = tl.max(best_v, 0)
    cc = tl.argmax(best_v, 0).to(tl.int64)
    top = tl.maximum(bv, cv)
    total = tl.load(f_n + b) + tl.load(r_n + b) + top.to(tl.float64)
    base = b * T * C
    lab = b * T
    left = tl.program_id(1) == 0  # program 0 traces to the left of M, program 1 right
    if left:
        tl.store(score + b, tl.where(top == NEG, float("-inf"), total))
    if top > NEG:
        if cv > bv:  # a segment [s, e) of cc across M
            a_s = tl.sum(tl.where(cs1 == cc, best_a, 0), 0)
            j_s = tl.sum(tl.where(cs1 == cc, best_j, 0), 0)
            s = (M - a_s).to(tl.int64)
            e = (M + ((i1 - j_s) & (KP - 1)) + 1).to(tl.int64)
            if left:
                _paint(labels + lab, starts + lab, s, e, cc, BLOCK)
            t = s
            c = cc
            if s > 0:
                c = tl.load(bp_c + base + (s - 1) * C + cc).to(tl.int64)
            u = e
            c2 = cc
            if e < L:
                c2 = tl.load(bp_c + base + e * C + cc).to(tl.int64)
        else:  # a boundary at M between bc and its best successor
            t = M.to(tl.int64)
            c = bc
            u = M.to(tl.int64)
            c2 = bc
            if M < L:
                c2 = tl.load(bp_c + base + M * C + bc).to(tl.int64)
        if left:
            while t > 0:
                d = tl.load(bp_d + base + (t - 1) * C + c).to(tl.int64)
                s2 = t - d
                _paint(labels + lab, starts + lab, s2, t, c, BLOCK)
                if s2 > 0:
                    c = tl.load(bp_c + base + (s2 - 1) * C + c).to(tl.int64)
                t = s2
        else:
            while u < L:
                d = tl.load(bp_d + base + u * C + c2).to(tl.int64)
                _paint(labels + lab, starts + lab, u, u + d, c2, BLOCK)
                u = u + d
                if u < L:
                    c2 = tl.load(bp_c + base + u * C + c2).to(tl.int64)
