"""Triton kernels of the semi-CRF chain, one program per sequence (and per checkpoint segment
in the backward).

Notation (SPEC.md): alpha[t, c] = log-weight of all segmentations of [0, t) whose last
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

NEG = tl.constexpr(float("-inf"))


@triton.jit
def _lse0(v):
    """logsumexp over axis 0 of a (KP, CP) or (CP, CP) tensor; -inf where all are -inf."""
    mx, esum = _lse0_parts(v)
    return _lse_join(mx, esum)


@triton.jit
def _lse0_parts(v):
    """_lse0's parts: the max over axis 0 and the sum of exp(v - max) (max taken as 0
    where all are -inf), which programs sharing a ring exchange (_split_lse)."""
    mx = tl.max(v, 0)
    return mx, tl.sum(tl.exp(v - tl.where(mx == NEG, 0.0, mx)[None, :]), 0)


@triton.jit
def _lse_join(mx, esum):
    """A logsumexp from its parts (a max and the sum of exponentials against it):
    -inf where the max is (esum 0 there)."""
    return tl.where(mx == NEG, 0.0, mx) + tl.log(esum)


@triton.jit
def _lse1(v):
    mx = tl.max(v, 1)
    mxs = tl.where(mx == NEG, 0.0, mx)
    return mxs + tl.log(tl.sum(tl.exp(v - mxs[:, None]), 1))


@triton.jit
def _lse_outer(v):
    """logsumexp over axes 0 and 2 of a (NPP, CP, CP) tensor -> (CP,) (axis 1 kept)."""
    mx = tl.max(tl.max(v, 2), 0)
    mxs = tl.where(mx == NEG, 0.0, mx)
    return mxs + tl.log(tl.sum(tl.sum(tl.exp(v - mxs[None, :, None]), 2), 0))


@triton.jit
def _lse_last(v):
    """logsumexp over axis 2 of a (NPP, CP, CP) tensor -> (NPP, CP)."""
    mx = tl.max(v, 2)
    mxs = tl.where(mx == NEG, 0.0, mx)
    return mxs + tl.log(tl.sum(tl.exp(v - mxs[:, :, None]), 2))


# Sparse periodic transitions (SP > 0; kernels._sparse_width decides, kernels._per_tables
# builds): a structured model allows few transitions (the 1-bp gene model: 61 of 37 x 37
# per residue, at most 7 into or out of a label), so instead of the (NPP, CP, CP) padded
# table a chain reads (NPP, CP, SP) values and their columns, SP (a power of two) >= the
# most finite entries of a row: pred (the forward chain's [r, dst, s], column = src) or
# succ (the reversed chain's and the backward's [r, src, s], column = dst), the finite
# entries first in ascending column order, then -inf. Each step gathers the vector it
# combines with (alpha, or the reversed chain's per-residue values) at those columns:
# NPP x CP x SP terms instead of NPP x CP x CP. The maxima and their first arguments are
# those of the dense table (ascending columns keep its tie-break), so the Viterbi is the
# same; the logsumexps sum the same terms without the exact zeros, in another order.


@triton.jit
def _trans3(trans, tidx, NPP: tl.constexpr, CP: tl.constexpr, SP: tl.constexpr, r0=0):
    """A periodic chain's transition table: (NPP, CP, CP) from the host's padded table
    (SP = 0; the column index is then a placeholder), else the (NPP, CP, SP) sparse
    values and their int32 columns; residues r0 .. r0 + NPP - 1 (NPP = 1: one slice)."""
    r3 = r0 + tl.arange(0, NPP)[:, None, None]
    j3 = tl.arange(0, CP)[None, :, None]
    if SP == 0:
        tr3 = tl.load(trans + (r3 * CP + j3) * CP + tl.arange(0, CP)[None, None, :])
        ti3 = tl.zeros((1, 1, 1), tl.int32)
    else:
        at = (r3 * CP + j3) * SP + tl.arange(0, SP)[None, None, :]
        tr3 = tl.load(trans + at)
        ti3 = tl.load(tidx + at)
    return tr3, ti3


@triton.jit
def _spread(v2, ti3, wsp, CP: tl.constexpr):
    """v2 (NR = NPP or 1, CP) read at the sparse columns ti3 (NPP, CP, SP): out[r, j, s] =
    v2[r or 0, ti3[r, j, s]], through this program's (NR, CP) float32 scratch wsp in global
    memory (L1): stored, then loaded at the columns, a barrier before each (other threads
    read and write it). (tl.gather of the broadcast vector ran the gene shape's posterior
    pass 10x slower than the dense step on an H100: RESULTS.md, "Sparse periodic
    transition tables".)"""
    rows = tl.arange(0, v2.shape[0])
    tl.debug_barrier()
    tl.store(wsp + rows[:, None] * CP + tl.arange(0, CP)[None, :], v2)
    tl.debug_barrier()
    return tl.load(wsp + rows[:, None, None] * CP + ti3)


@triton.jit
def _combine(tr3, ti3, v2, SP: tl.constexpr, wsp=None, CP: tl.constexpr = 1):
    """The step's terms from v2 (NPP or 1, CP): dense tr3[r, j, k] + v2[r or 0, k],
    sparse tr3[r, j, s] + v2[r or 0, ti3[r, j, s]] (_spread)."""
    if SP == 0:
        g3 = tr3 + v2[:, None, :]
    else:
        g3 = tr3 + _spread(v2, ti3, wsp, CP)
    return g3


@triton.jit
def _column(ti3, k, SP: tl.constexpr):
    """The column of a first argmax k (NPP, CP) over the last axis of _combine's terms."""
    if SP == 0:
        col = k
    else:
        col = tl.sum(tl.where(tl.arange(0, SP)[None, None, :] == k[:, :, None], ti3, 0), 2)
    return col


@triton.jit
def _logaddexp(a, b):
    """log(exp(a) + exp(b)) elementwise with one exponential: max + log(1 + exp(min - max)),
    -inf where both are. The same float32 value as max + log(exp(a - max) + exp(b - max)),
    whose larger term is exp(0) = 1 exactly, for one MUFU exponential less."""
    hi = tl.maximum(a, b)
    his = tl.where(hi == NEG, 0.0, hi)  # no -inf - -inf
    return tl.where(hi == NEG, NEG, his + tl.log(1.0 + tl.exp(tl.minimum(a, b) - his)))


@triton.jit
def _safe_max(x):
    m = tl.max(x, 0)
    return tl.where(m == NEG, 0.0, m)


@triton.jit
def _load_row(base, p, C, cs1, cmask1, HAS: tl.constexpr):
    """Row p (int64) of a (T, C) slice, or zeros when the input is absent."""
    if HAS:
        return tl.load(base + p * C + cs1, mask=cmask1, other=0.0)
    else:
        return tl.zeros(cs1.shape, tl.float32)


@triton.jit
def _emission(scores, allowed, p, C, cs1, cmask1, HAS_ALLOWED: tl.constexpr):
    f = tl.load(scores + p * C + cs1, mask=cmask1, other=0.0)
    if HAS_ALLOWED:
        ok = tl.load(allowed + p * C + cs1, mask=cmask1, other=0)
        f = tl.where(ok != 0, f, NEG)
    return f


@triton.jit
def _step_rows(scores, allowed, ps, pe, p, C, cs1, mask, HAS_ALLOWED: tl.constexpr,
               HAS_PS: tl.constexpr, HAS_PE: tl.constexpr):
    """Row p's emission (-inf where not allowed), start and end scores (_fwd_kernel
    PREFETCH: loaded a step ahead of their use)."""
    return (_emission(scores, allowed, p, C, cs1, mask, HAS_ALLOWED),
            _load_row(ps, p, C, cs1, mask, HAS_PS), _load_row(pe, p, C, cs1, mask, HAS_PE))


@triton.jit
def _position(i, L, REV: tl.constexpr):
    """The position (int64) that step i reads: i, or L - 1 - i in a reversed chain."""
    if REV:
        p = (L - 1 - i).to(tl.int64)
    else:
        p = i + tl.zeros((), tl.int64)
    return p


@triton.jit
def _lazy_alpha(a3c, j, NP: tl.constexpr, NPP: tl.constexpr, PLANES: tl.constexpr,
                XT: tl.constexpr):
    """The reversed periodic chain's alpha after step j from that step's normalised a3c
    (_fwd_kernel LAZY): logsumexp over the residues of a3c, (NPP, CP) in residue order,
    or in plane order (PLANES), or (CP, NPP) in plane order (XT)."""
    if XT:
        a = tl.trans(a3c)
    else:
        a = a3c
    if PLANES:
        a = _planes_by_residue(a, j, NP, NPP)
    return _lse0(a)


@triton.jit
def _split(L, P):
    """Where the two directions meet: M = the first half of the checkpoint segments of a
    sequence of length L (segments of P positions), at least 1 position, at most L."""
    nb = (L + P - 1) // P
    return tl.minimum(((nb + 1) // 2) * P, L)


@triton.jit
def _plane_steps(i, q3, u3, NP: tl.constexpr, KQ: tl.constexpr):
    """The residue planes of the periodic reversed chain (_fwd_kernel KQ > 0): the step
    whose entry plane q3 (< NP), row u3 holds after step i >= -1: the latest s <= i with
    s mod NP = q3 and (s div NP) mod KQ = u3 (negative: never written, -inf there)."""
    N = (i - q3 + NP) // NP - 1  # the latest entry of plane q3 is its N-th (-1: none)
    return q3 + NP * (N - ((N - u3) & (KQ - 1)))


@triton.jit
def _ring_slots(i, r3, qv3, u3, NP: tl.constexpr, KP: tl.constexpr, KQ: tl.constexpr):
    """Where the residue planes' entries sit, after step i - 1, in the (KP, CP)
    start-indexed ring of that step (slot s & (KP - 1) for the entry of step s; r3 the
    planes, qv3 the same with the padding planes >= NP as 0): (slots, mask), the mask
    leaving out the padding planes and entries older than KP steps (durations beyond K).
    Every slot of the ring is covered once (NP KQ >= KP)."""
    s3 = _plane_steps(i - 1, qv3, u3, NP, KQ)
    return s3 & (KP - 1), (r3 < NP) & (i - s3 <= KP)


@triton.jit
def _planes_to_ring(ptr, R3, i, r3, qv3, u3, cs3, NP: tl.constexpr, KP: tl.constexpr,
                    CP: tl.constexpr, KQ: tl.constexpr):
    """Store residue planes R3 (NPP, KQ, CP), as they are after step i - 1, as the
    (KP, CP) ring of that step at ptr (_ring_slots)."""
    slot, ok = _ring_slots(i, r3, qv3, u3, NP, KP, KQ)
    tl.store(ptr + slot * CP + cs3, R3, mask=ok)


@triton.jit
def _ring_to_planes(ptr, i, r3, qv3, u3, cs3, NP: tl.constexpr, KP: tl.constexpr,
                    CP: tl.constexpr, KQ: tl.constexpr):
    """_planes_to_ring's inverse: the planes after step i - 1 from the ring at ptr, -inf
    where _ring_slots' mask leaves them out."""
    slot, ok = _ring_slots(i, r3, qv3, u3, NP, KP, KQ)
    return tl.load(ptr + slot * CP + cs3, mask=ok, other=NEG)


@triton.jit
def _planes_by_residue(vq, i, NP: tl.constexpr, NPP: tl.constexpr):
    """Per-plane logsumexps vq (NPP, CP) reordered by residue: at step i, plane q holds
    the durations d with (d - 1) mod NP = (i - q) mod NP; rows >= NP get -inf."""
    rr = tl.arange(0, NPP)
    qq = tl.arange(0, NPP)
    res = (i + NP - qq) % NP
    pm = (rr[:, None] == res[None, :]) & (qq[None, :] < NP)  # (r, q)
    out = tl.sum(tl.where(pm[:, :, None], vq[None, :, :], 0), 1)
    return tl.where(rr[:, None] < NP, out, NEG)


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
    LEAVE_OUT: tl.constexpr = 0, GAMMA_ROWS: tl.constexpr = False,
    WRITE_ROWS: tl.constexpr = False, NP: tl.constexpr = 1, NPP: tl.constexpr = 1,
    TILE: tl.constexpr = 0, tidx=None, SP: tl.constexpr = 0, wsp=None,
    xch=None, bar=None, SPLIT: tl.constexpr = 1, KQ: tl.constexpr = 0,
    PARTG: tl.constexpr = 0, PREFETCH: tl.constexpr = 0, LAZY: tl.constexpr = 0,
    XT: tl.constexpr = 0, TAG: tl.constexpr = 0,
):
    """The chain of one sequence (program id 0 = b), left to right, or right to left when
    REV (the host then passes the transposed transition, ps and pe swapped and `end` as
    `init`; step i reads position L - 1 - i, and "alpha" is beta_gamma, "gamma" beta_alpha).

    LEAVE_OUT (timing only, wrong results): 1 skips the gamma step, 2 the ring's
    logsumexp (alpha = one slot), 3 the duration-bias gather, 4 the shift.
    GAMMA_ROWS: `trans` is the (C, C) [src, dst] matrix and gamma reduces over its rows
    (measured faster at C = 39); else `trans` is the host's padded (CP, CP) transpose and
    gamma reduces over its columns (measured faster at C <= 24).

    The two directions meet at M = _split(L, P). Checkpoints (ring, gamma, alpha, N) are
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

    TILE > 0 (LEAVE_OUT 0): the ring lives in this program's (KP, CP) float32 slot of
    `work` (B, or B x W in MODE 1) instead of registers and each step walks it TILE slots
    at a time: insert and add the scores (stored back), then the logsumexp over the slots
    as an online one over the tiles (MODE 2: the max, and the shortest duration that
    reaches it, tile by tile); NP > 1: the same per residue (_ring_tiles_res). For rings
    beyond the register file (the whole-ring step spilled: benchmarks/KERNELS_NOTES.md,
    session 16). The same terms, reduced in another order: not bitwise the register ring's
    results (tests compare both with float64); a barrier ends each step.

    SPLIT > 1 (static, MODE 0; kernels._split_opts; periodic: the planes above): SPLIT programs (program id 1 = g)
    share one sequence's chain, program g holding slots [g KP/SPLIT, (g+1) KP/SPLIT) of
    the ring (in registers when TILE = 0, else walked in tiles); each step they exchange
    their partial logsumexps (max, sum) through `xch` (B, 2, SPLIT, 2, CP) float32, by step parity, and wait for each other at
    a counter in `bar` (B,) int32, zero at launch (_split_lse); then each combines the
    SPLIT parts in the same order, so all hold the same alpha and gamma, and program 0
    alone stores the rows, checkpoints and states other than the ring's. Every program of
    the launch must be resident at once (the host keeps B x SPLIT within the SMs).
    """
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
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
            tl.static_assert((MODE == 0) & (LEAVE_OUT == 0))
            g0 = g * KS
            if TILE == 0:  # its part of the ring in registers
                js = g0 + tl.arange(0, KS)[:, None]
    tl.static_assert((PARTG == 0) | ((SPLIT > 1) & (NP > 1)))
    if TILE > 0:
        tl.static_assert(LEAVE_OUT == 0)
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
            tl.static_assert((MODE == 0) & (TILE == 0) & (LEAVE_OUT == 0) & (NP * KQ >= KP))
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
            if LEAVE_OUT == 3:
                v = R + tl.where(d <= K, 0.0, NEG)
            else:
                v = R + tl.load(db + (d - 1) * CP + cs)
        if NP > 1:
            # the reversed chain of the periodic family: split by the residue of d
            if TILE > 0:  # the same over the ring in memory, tile by tile
                a3, esum3, bd3 = _ring_tiles_res(wp, ins, f, mprev, i, db, jt, cs, r3, KP,
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
            else:
                sel = ((d - 1) % NP)[None, :, :] == r3  # (NPP, KP, 1)
                v3 = tl.where(sel, v[None, :, :], NEG)  # (NPP, KP, CP)
                if MODE == 2:
                    a3 = tl.max(v3, 1)
                    bd3 = tl.min(tl.where(v3 == a3[:, None, :], d[None, :, :], KP + 1), 1)
                else:
                    # logsumexp over the slots per residue with one exponential per slot
                    # (against its own residue's max) instead of NPP: the same terms, the
                    # others exactly 0 either way (bitwise the same as exp(v3 - max))
                    mx3 = tl.max(v3, 1)
                    mxs3 = tl.where(mx3 == NEG, 0.0, mx3)
                    e = tl.exp(v - tl.sum(tl.where(sel, mxs3[:, None, :], 0.0), 0))
                    a3 = mxs3 + tl.log(tl.sum(tl.where(sel, e[None, :, :], 0.0), 1))
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
            elif LEAVE_OUT == 2:
                alp = tl.sum(tl.where(js == 0, v, 0.0), 0)
            else:
                alp = _lse0(v)
            alp = alp + per
            if LEAVE_OUT == 4:
                m = tl.zeros((), tl.float32)
            else:
                m = _safe_max(alp)
            alp = alp - m
            n = n + m.to(tl.float64)
            mprev = m
            if LEAVE_OUT == 1:
                gam = alp
            else:
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
def _split_lse(xch, bar, acc, esum, s, g, cs1, CP: tl.constexpr, SPLIT: tl.constexpr):
    """A split chain's step (_fwd_kernel SPLIT, static): _exchange's parts combined in
    the order g = 0, 1, ... Returns (max, sum) over all slots."""
    A, E = _exchange(xch, bar, acc, esum, s, g, cs1, CP, SPLIT, SPLIT)
    mx = tl.max(A, 0)
    mxs = tl.where(mx == NEG, 0.0, mx)
    return mx, tl.sum(E * tl.exp(A - mxs[None, :]), 0)


@triton.jit
def _exchange(xch, bar, acc, esum, s, g, cs1, CP: tl.constexpr, SPLIT: tl.constexpr,
              ROWS: tl.constexpr, XT: tl.constexpr = 0, TAG: tl.constexpr = 0):
    """The exchange of a split chain's step: this program's part of the logsumexp per
    label (max acc, sum esum of exp(v - max), (CP,) each) into row g of xch's half s % 2,
    an arrival at the counter `bar`, a wait until all SPLIT programs have arrived for
    step s, then every program's part: (ROWS, CP) maxima and sums, ROWS (a power of two
    >= SPLIT) rows in the order g = 0, 1, ..., rows >= SPLIT -inf and 0. The halves
    alternate so that a program a step ahead never overwrites a part that another may
    still read (it cannot be two steps ahead: it waits at the counter).

    XT: the parts come back transposed, (CP, ROWS), stored label-major (the layout the
    tagged exchange of _fwd_kernel's parts was measured with; with TAG only). TAG: xch is int64,
    zero at launch; each part goes out as one word with its step's tag s + 1 in the high
    half (_pack) and every thread waits for its own words to carry this step's tag
    (_settled): no counter, no fence (a word is written and read whole). A program is
    then at most a step ahead of another, as with the counter: it has read every part of
    step s - 1, each stored after its program had read step s - 2 (the barrier below)."""
    ok = tl.arange(0, ROWS) < SPLIT
    gc = tl.where(ok, tl.arange(0, ROWS), 0)  # rows >= SPLIT read row 0 (then masked)
    if XT:
        half = xch + (s % 2) * 2 * ROWS * CP
        ok = ok[None, :]
        oa = cs1[:, None] * ROWS + gc[None, :]
        oe = ROWS * CP + oa
        mine_a = cs1 * ROWS + g
        mine_e = ROWS * CP + mine_a
    else:
        half = xch + (s % 2) * 2 * SPLIT * CP
        ok = ok[:, None]
        oa = gc[:, None] * 2 * CP + cs1[None, :]
        oe = oa + CP
        mine_a = g * 2 * CP + cs1
        mine_e = mine_a + CP
    if TAG:
        tag = s + 1
        tl.debug_barrier()  # this program's reads of step s - 2 (the same half) are done
        tl.store(half + mine_a, _pack(acc, tag))
        tl.store(half + mine_e, _pack(esum, tag))
        wa = _settled(tl.load(half + oa, volatile=True), half + oa, tag)
        we = _settled(tl.load(half + oe, volatile=True), half + oe, tag)
        A = tl.where(ok, _unpack(wa), NEG)
        E = tl.where(ok, _unpack(we), 0.0)
    else:
        tl.store(half + mine_a, acc)
        tl.store(half + mine_e, esum)
        _arrive_wait(bar, s, SPLIT)
        A = tl.load(half + oa, mask=ok, other=NEG, volatile=True)
        E = tl.load(half + oe, mask=ok, other=0.0, volatile=True)
    return A, E


@triton.jit
def _settled(w, ptrs, tag):
    """Words w, read from ptrs, each once it carries `tag` in its high half: a thread
    whose word is older re-reads it (volatile, from L2) until it is, in a PTX loop of its
    own, and one whose word is current does no more than compare. Not a reduction over
    the tensor: where a layout holds an element in several threads, Triton reduces over
    one copy, and a thread whose copy was read before the writer's store would go on with
    the old word (seen as a wrong log Z at 8 warps)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred spin_p; .reg .b64 spin_hi; mov.b64 $0, $1; SPIN: shr.s64 spin_hi, $0, 32; "
        "setp.eq.s64 spin_p, spin_hi, $3; @spin_p bra DONE; ld.volatile.global.b64 $0, [$2]; "
        "bra SPIN; DONE: }",
        "=l,l,l,l", [w, ptrs, tl.zeros(ptrs.shape, tl.int64) + tag], dtype=tl.int64,
        is_pure=False, pack=1)


@triton.jit
def _pack(v, tag):
    """float32 v and an int32 tag as one int64 word: tag in the high half, v's bits low."""
    return v.to(tl.uint32, bitcast=True).to(tl.int64) | (tag.to(tl.int64) << 32)


@triton.jit
def _unpack(w):
    """_pack's float32."""
    return w.to(tl.int32).to(tl.float32, bitcast=True)


@triton.jit
def _arrive_wait(bar, s, SPLIT: tl.constexpr):
    """A split chain's step barrier: once every thread's stores for step s are issued, an
    arrival at the counter `bar` (release), then a wait until all SPLIT programs have
    arrived for step s (acquire)."""
    tl.debug_barrier()  # every thread's part is written before the arrival
    tl.atomic_add(bar, 1, sem="release", scope="gpu")
    target = SPLIT * (s + 1)
    seen = tl.atomic_add(bar, 0, sem="acquire", scope="gpu")
    while seen < target:
        seen = tl.atomic_add(bar, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _copy_tiles(dst, src, shift, jt, cs, KP: tl.constexpr, CP: tl.constexpr,
                TILE: tl.constexpr):
    """dst = src - shift over KP slots of a (., CP) ring from slot jt[0], TILE at a time."""
    for j0 in range(0, KP, TILE):
        jr = (j0 + jt) * CP + cs
        tl.store(dst + jr, tl.load(src + jr) - shift)


@triton.jit
def _empty_tiles(dst, jt, cs, KP: tl.constexpr, CP: tl.constexpr, TILE: tl.constexpr):
    """dst = -inf over KP slots of a (., CP) ring from slot jt[0], TILE at a time."""
    for j0 in range(0, KP, TILE):
        tl.store(dst + (j0 + jt) * CP + cs, tl.full((TILE, CP), NEG, tl.float32))


@triton.jit
def _tile_step(wp, jj, ins, f, mprev, i, db, cs, KP: tl.constexpr, CP: tl.constexpr):
    """Step i of a start-indexed ring in memory over its slots jj (a tile): `ins` into slot
    i % KP, the others shifted by -mprev, the scores f added and stored back. Returns the
    slots' values with their duration bias (v) and their durations d."""
    Rt = tl.load(wp + jj * CP + cs)
    Rt = tl.where(jj == (i & (KP - 1)), ins[None, :], Rt - mprev) + f[None, :]
    tl.store(wp + jj * CP + cs, Rt)
    d = ((i - jj) & (KP - 1)) + 1
    return Rt + tl.load(db + (d - 1) * CP + cs), d


@triton.jit
def _ring_tiles(wp, ins, f, mprev, i, db, jt, cs, KP: tl.constexpr,
                CP: tl.constexpr, TILE: tl.constexpr, BEST: tl.constexpr, KS: tl.constexpr):
    """One step of a static chain over its ring in memory (wp, (KP, CP)), TILE slots at
    a time (_fwd_kernel's and _bwd_kernel's TILE): the new start `ins` into slot i % KP,
    the others shifted by -mprev, the scores f added (stored back), and per label over
    the slots of ring + duration bias: the max and the sum of exp(v - max) (an online
    logsumexp over the tiles), or (BEST) the max and the shortest duration reaching it.
    Walks KS slots from slot jt[0] (KS = KP: the whole ring; less: a split chain's part).
    Returns (max, sum, durations); ends with a barrier."""
    acc = tl.full((CP,), NEG, tl.float32)
    esum = tl.zeros((CP,), tl.float32)
    best = tl.full((CP,), KP + 1, tl.int32)
    for j0 in range(0, KS, TILE):
        v, d = _tile_step(wp, j0 + jt, ins, f, mprev, i, db, cs, KP, CP)
        tm = tl.max(v, 0)
        if BEST:
            tb = tl.min(tl.where(v == tm[None, :], d, KP + 1), 0)
            best = tl.where(tm > acc, tb, tl.where(tm == acc, tl.minimum(best, tb), best))
            acc = tl.maximum(acc, tm)
        else:
            nm = tl.maximum(acc, tm)
            nms = tl.where(nm == NEG, 0.0, nm)
            esum = esum * tl.exp(acc - nms) + tl.sum(tl.exp(v - nms[None, :]), 0)
            acc = nm
    tl.debug_barrier()
    return acc, esum, best


@triton.jit
def _ring_tiles_res(wp, ins, f, mprev, i, db, jt, cs, r3, KP: tl.constexpr,
                    CP: tl.constexpr, TILE: tl.constexpr, NP: tl.constexpr,
                    NPP: tl.constexpr, BEST: tl.constexpr):
    """_ring_tiles for the periodic family's reversed chain: the same walk, its reduction
    split by the residue (d - 1) mod NP of each slot's duration d (r3: the residues as an
    (NPP, 1, 1) range). Returns, per (residue, label), (NPP, CP) each: the max and the sum
    of exp(v - max) (one exponential per slot, against its own residue's max), or (BEST)
    the max and the shortest duration reaching it; ends with a barrier."""
    acc = tl.full((NPP, CP), NEG, tl.float32)
    esum = tl.zeros((NPP, CP), tl.float32)
    best = tl.full((NPP, CP), KP + 1, tl.int32)
    for j0 in range(0, KP, TILE):
        v, d = _tile_step(wp, j0 + jt, ins, f, mprev, i, db, cs, KP, CP)
        sel = ((d - 1) % NP)[None, :, :] == r3  # (NPP, TILE, 1)
        v3 = tl.where(sel, v[None, :, :], NEG)
        tm = tl.max(v3, 1)
        if BEST:
            tb = tl.min(tl.where(v3 == tm[:, None, :], d[None, :, :], KP + 1), 1)
            best = tl.where(tm > acc, tb, tl.where(tm == acc, tl.minimum(best, tb), best))
            acc = tl.maximum(acc, tm)
        else:
            nm = tl.maximum(acc, tm)
            nms = tl.where(nm == NEG, 0.0, nm)
            e = tl.exp(v - tl.sum(tl.where(sel, nms[:, None, :], 0.0), 0))
            esum = esum * tl.exp(acc - nms) + tl.sum(tl.where(sel, e[None, :, :], 0.0), 1)
            acc = nm
    tl.debug_barrier()
    return acc, esum, best


@triton.jit
def _through(cross, bnd):
    """log of the total weight through a boundary position t1: logsumexp over the labels
    of the segments across it (cross) and of a boundary at it (bnd); -inf if none."""
    zm = tl.maximum(tl.max(cross, 0), tl.max(bnd, 0))
    zms = tl.where(zm == NEG, 0.0, zm)
    return zms + tl.log(tl.sum(tl.exp(cross - zms), 0) + tl.sum(tl.exp(bnd - zms), 0))


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
    segments across M = _split(L, P) whose end lies in slots [t TILE, (t + 1) TILE) of
    the reversed ring, per label, into parts (B, NT, CP). The tiles' walks differ in
    length (a triangle: _crossing), so many short programs run what one program per
    sequence ran tile after tile (at K = 8192, 16 sequences: 16 programs of ~K^2 / 2
    terms each)."""
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
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
    """log Z of one sequence where the two halves meet (M = _split(L, P)): a boundary at M
    (alpha[M] + beta_alpha[M]) or a segment across it, with both chains' normalisers.
    TILE > 0: the crossing sum over the reversed ring TILE slots at a time (else in one
    tile). NT > 0: the crossing sum's NT tiles were summed by _cross_part_kernel into
    parts (B, NT, CP); joined here in tile order, as _crossing_tiled joins them."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
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

    REV (only with ROWS_FULL): the mirror image, for the segments left of M = _split(L, P):
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
        M = _split(L, P)
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
                mx3, esum3, _ = _ring_tiles_res(wp, ins, f, mprev, i, db, jt, cs, r3, KP, CP,
                                                TILE, NP, NPP, False)
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
                mx = tl.max(v, 0)
                mxs = tl.where(mx == NEG, 0.0, mx)
                e = tl.exp(v - mxs[None, :])
            if NP > 1:
                # split by the residue of each slot's duration
                if TILE > 0:  # esum3 against each residue's own max mx3
                    mxs3 = tl.where(mx3 == NEG, 0.0, mx3)
                    bg3 = tl.where(mx3 == NEG, NEG, mxs3 + tl.log(esum3))
                else:  # esum3 against the max over every residue
                    sel = ((d - 1) % NP)[None, :, :] == r3  # (NPP, KP, 1)
                    esum3 = tl.sum(tl.where(sel, e[None, :, :], 0.0), 1)  # (NPP, CP)
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
                    if TILE > 0:
                        _db_tiles(g_db, wp, db, slot, i, jt, cs, r3, mxs3, fac3, KP, CP, TILE,
                                  NP)
                    else:
                        w = e * tl.sum(tl.where(sel, fac3[:, None, :], 0.0), 0)
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
                    _db_tiles(g_db, wp, db, slot, i, jt, cs, tl.zeros((1, 1, 1), tl.int32),
                              mxs[None, :], tl.where(esum > 0, pstart / esum, 0.0)[None, :],
                              KP, CP, TILE, 1)
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
                    tl.store(dbp, gl * tl.load(dbp))
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
def _db_tiles(g_db, wp, db, slot, i, jt, cs, r3, mx3, fac3, KP: tl.constexpr,
              CP: tl.constexpr, TILE: tl.constexpr, NP: tl.constexpr):
    """The tiled backward's duration-bias step: every slot's segment posterior, its
    exponential recomputed from the ring in memory (wp, after step i) against its residue's
    max, exp(v - mx3[r]) * fac3[r] (fac3 = P_start / the residue's sum), added to g_db's
    slot `slot` in duration order, TILE slots at a time; then a barrier. Static
    transitions: one residue (NP 1, r3 = 0, (1, CP) mx3 and fac3)."""
    for j0 in range(0, KP, TILE):
        jj = j0 + jt
        dt = ((i - jj) & (KP - 1)) + 1
        vt = tl.load(wp + jj * CP + cs) + tl.load(db + (dt - 1) * CP + cs)
        sel = ((dt - 1) % NP)[None, :, :] == r3
        mt = tl.sum(tl.where(sel, mx3[:, None, :], 0.0), 0)
        ft = tl.sum(tl.where(sel, fac3[:, None, :], 0.0), 0)
        gp = g_db + (slot * KP + dt - 1) * CP + cs
        tl.store(gp, tl.load(gp) + tl.exp(vt - mt) * ft)
    tl.debug_barrier()


@triton.jit
def _add_in_place(ptr, v):
    """*ptr += v, then a barrier (the next step's threads read what these wrote)."""
    tl.store(ptr, tl.load(ptr) + v)
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
def _paint(labels, starts, s, e, c, BLOCK: tl.constexpr):
    """labels[s:e] = c and starts[s] = 1 (one segment of the best path)."""
    offs = tl.arange(0, BLOCK)
    for o in range(s, e, BLOCK):
        tl.store(labels + o + offs, c, mask=o + offs < e)
    tl.store(starts + s, 1)


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
    M = _split(L, 1)
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
def _crossing_end(F, Rr, t1, L, js, cs, cmask, KP: tl.constexpr, CP: tl.constexpr):
    """logsumexp per label of the segments [s, e) with s < t1 < e, from the end-indexed
    forward ring F at t1 (slot e % KP: every segment ending at e that started before t1,
    with its duration bias and the scores up to t1 - 1) and the reversed ring Rr at t1
    (slot (L - e) % KP: f[t1..e-1] + pe[e-1] + beta_alpha[e]); both relative."""
    e = t1 + ((js - t1 - 1) & (KP - 1)) + 1  # the end held by each forward slot
    ok = (e - t1 < KP) & (e <= L) & cmask  # e - t1 = KP: the slot of t1 itself (read)
    Fe = tl.load(F + js * CP + cs)
    Re = tl.load(Rr + ((L - e) & (KP - 1)) * CP + cs)
    return _lse0(tl.where(ok, Fe + Re, NEG))


@triton.jit
def _crossing_end_tiled(F, Rr, t1, L, cs, cmask, KP: tl.constexpr, CP: tl.constexpr,
                        TILE: tl.constexpr):
    """_crossing_end TILE slots at a time, the tiles joined by logaddexp (TILE = KP: one
    tile, exactly _crossing_end's result: logaddexp(-inf, v) = v)."""
    acc = tl.full((CP,), NEG, tl.float32)
    for j0 in range(0, KP, TILE):
        acc = _logaddexp(acc, _crossing_end(F, Rr, t1, L, j0 + tl.arange(0, TILE)[:, None],
                                            cs, cmask, KP, CP))
    return acc


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
    tidx=None, SP: tl.constexpr = 0, wsp=None,
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
    best duration and predecessor of every slot -> mid_*."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
    js = tl.arange(0, KP)[:, None]
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
    if MODE == 1:
        seg = seg0 + tl.program_id(1)
        i0 = seg * P
        i1 = tl.minimum(i0 + P, L)
        A = tl.load(ck_ring + ((ck + seg) * KP + js) * CP + cs)
        alp = tl.load(ck_alp + (ck + seg) * CP + cs1)
        n = tl.load(ck_n + ck + seg)
    elif PHASE == 1:
        i0 = M
        i1 = L
        A = tl.load(mid_ring + (b * KP + js) * CP + cs)
        alp = tl.load(mid_alp + b * CP + cs1)
        n = tl.load(mid_n + b)
    else:
        i0 = 0
        if MODE == 2:
            i1 = _split(L, 1)
        else:
            i1 = M
        A = tl.load(mid_ring + (b * KP + js) * CP + cs, mask=(js + cs) < 0, other=NEG)  # empty (see _fwd_kernel)
        alp = tl.full((CP,), NEG, tl.float32)
        n = tl.zeros((), tl.float64)
    # gamma^r at the first boundary: `start` at 0, else from alpha
    gam3 = tl.where(i0 == 0, ini3, _lse_last(_combine(tr3, ti3, alp[None, :], SP, wsp, CP)))
    if MODE == 2:
        BD = tl.full((KP, CP), 1, tl.int32)
        BC = tl.zeros((KP, CP), tl.int32)
        bc3 = tl.zeros((NPP, CP), tl.int32)
    mprev = tl.zeros((), tl.float32)
    for i in range(i0, i1):
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
        if MODE == 1 or WRITE_ROWS:
            _end_rows(rows_gam, rows_alp, rows_n, gam3, alp, n, b, p, i, i0, P, T, rr2, cs,
                      cs1, CP, NPP, MODE)
        # the segments [i, i + d) go into the slots of their ends, with gamma^{(d-1) mod NP}
        d, sel, x, own = _end_insert(js, i, gam3, psr, db, cs, r3, KP, CP, NP)
        A = A - mprev
        if MODE == 2:
            up = own | (x > A)
            A = tl.where(up, x, A)
            BD = tl.where(up, d, BD)
            BC = tl.where(up, tl.sum(tl.where(sel, bc3[:, None, :], 0), 0), BC)
        else:
            A = tl.where(own, x, _logaddexp(A, x))
        A = A + f[None, :]
        nxt = js == ((i + 1) & (KP - 1))  # slot of end i + 1
        alp = tl.max(tl.where(nxt, A, NEG), 0) + per
        if MODE == 2:
            bpb = (b * T + p) * NPP * C
            tl.store(bp_d + bpb + cs1,
                     tl.max(tl.where(nxt, BD, 0), 0).to(bp_d.dtype.element_ty), mask=cmask1)
            tl.store(bp_c + bpb + cs1,
                     tl.max(tl.where(nxt, BC, 0), 0).to(bp_c.dtype.element_ty), mask=cmask1)
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
        tl.store(mid_ring + (b * KP + js) * CP + cs, A - mprev)
        tl.store(mid_alp + b * CP + cs1, alp)
        tl.store(mid_n + b, n)
    if MODE == 2:
        tl.store(mid_bd + (b * KP + js) * CP + cs, BD)
        tl.store(mid_bc + (b * KP + js) * CP + cs, BC)
    if MODE == 0 and PHASE == 1:
        tl.store(out_alp + b * CP + cs1, alp)
        tl.store(out_n + b, n)


@triton.jit
def _join_end_kernel(f_ring, f_alp, f_n, r_ring, r_gam, r_n, lengths, log_z, C, P,
                     KP: tl.constexpr, CP: tl.constexpr, TILE: tl.constexpr = 0):
    """_join_kernel for the periodic family: log Z where the halves meet (M = _split(L, P)),
    the segments across M from _crossing_end, TILE slots at a time (0: at once)."""
    b = tl.program_id(0).to(tl.int64)
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P)
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
    M = _split(L, 1)
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
#     P(c' ends at p, c starts at p with duration d) = exp(alpha[p,c'] + trans[d-1,c',c] + H_d[p,c] - log Z)
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
