"""The Triton helpers the kernel families share (chain.py, end.py, dd.py,
split_end.py): log-sum-exp reductions, sparse transition products, the rows a step reads,
residue planes, split chains' exchanges, rings in tiles, and the joins' crossing sums.
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
    pass 10x slower than the dense step on an H100: RESULTS-log.md, "Sparse periodic
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
def _split(L, P, MEET: tl.constexpr):
    """Where the two directions meet: M = the first ceil(nb MEET / 64) of the nb
    checkpoint segments of a sequence of length L (segments of P positions; MEET = 32:
    the first half), at least 1 position, at most L. The forward chain runs [0, M) in
    the forward pass and the reversed chain [M, L), then each the other part in the
    backward (periodic family: Tuning.meet sets MEET from the two chains' step times;
    every kernel of one call gets the same)."""
    nb = (L + P - 1) // P
    return tl.minimum(((nb * MEET + 63) // 64) * P, L)


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
def _res_rows(x3, dres, NP: tl.constexpr, NPP: tl.constexpr):
    """Per slot, the row of x3 (NPP, CP) named by its residue: dres (slots, 1) each slot's
    (d - 1) mod NP; (slots, CP). NP unrolled selects with no (NPP, slots, CP) temporary
    (a register ring is register-bound: KERNELS_NOTES, Session 29). The bits are those of
    the one-hot sum over residues it replaces (x + 0 = x)."""
    rr2 = tl.arange(0, NPP)[:, None]
    out = tl.where(dres == 0, tl.sum(tl.where(rr2 == 0, x3, 0), 0)[None, :], 0)
    for q in tl.static_range(1, NP):
        out = tl.where(dres == q, tl.sum(tl.where(rr2 == q, x3, 0), 0)[None, :], out)
    return out


@triton.jit
def _res_best(v, d, NP: tl.constexpr, NPP: tl.constexpr, KP: tl.constexpr):
    """Per residue (d - 1) mod NP, the max over its slots of v (slots, CP) and the
    shortest duration d (slots, 1) reaching it: two (NPP, CP), through one (NPP, slots,
    CP) select (the Viterbi's; NP unrolled passes ran 2-2.7x slower, KERNELS_NOTES,
    Session 29)."""
    sel = ((d - 1) % NP)[None, :, :] == tl.arange(0, NPP)[:, None, None]  # (NPP, slots, 1)
    v3 = tl.where(sel, v[None, :, :], NEG)
    tm = tl.max(v3, 1)
    return tm, tl.min(tl.where(v3 == tm[:, None, :], d[None, :, :], KP + 1), 1)


@triton.jit
def _res_max(v, dres, NP: tl.constexpr, NPP: tl.constexpr, SLOTS: tl.constexpr,
             CP: tl.constexpr):
    """Per residue, the max over the slots of that residue of v (SLOTS, CP): mx3 (NPP,
    CP), -inf where a residue has no finite slot; and per slot its own residue's max, 0
    for -inf (the shift of a logsumexp): sh (SLOTS, CP). NP unrolled (SLOTS, CP) passes,
    no (NPP, SLOTS, CP) temporary (KERNELS_NOTES, Session 29)."""
    rr2 = tl.arange(0, NPP)[:, None]
    mx3 = tl.full((NPP, CP), NEG, tl.float32)
    sh = tl.zeros((SLOTS, CP), tl.float32)
    for q in tl.static_range(NP):
        mq = tl.max(tl.where(dres == q, v, NEG), 0)  # (CP,)
        mx3 = tl.where(rr2 == q, mq[None, :], mx3)
        sh = tl.where(dres == q, tl.where(mq == NEG, 0.0, mq)[None, :], sh)
    return mx3, sh


@triton.jit
def _res_sums(e, dres, NP: tl.constexpr, NPP: tl.constexpr, CP: tl.constexpr):
    """Per residue, the sum over the slots of that residue of e (slots, CP): (NPP, CP),
    NP unrolled passes (0 where a residue has no slot)."""
    rr2 = tl.arange(0, NPP)[:, None]
    s3 = tl.zeros((NPP, CP), tl.float32)
    for q in tl.static_range(NP):
        s3 = tl.where(rr2 == q, tl.sum(tl.where(dres == q, e, 0.0), 0)[None, :], s3)
    return s3


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
    # every thread's load before any store: a tile smaller than the program's threads is
    # held by several warps at once (replicated), and a warp that loads after another
    # stored would reduce over the new values (seen compiled, never in the interpreter)
    tl.debug_barrier()
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
def _ring_tiles_res(wp, ins, f, mprev, i, db, jt, cs, KP: tl.constexpr,
                    CP: tl.constexpr, TILE: tl.constexpr, NP: tl.constexpr,
                    NPP: tl.constexpr, BEST: tl.constexpr):
    """_ring_tiles for the periodic family's reversed chain: the same walk, its reduction
    split by the residue (d - 1) mod NP of each slot's duration d (the logsumexp in NP
    unrolled passes: _res_max, _res_rows, _res_sums).
    Returns, per (residue, label), (NPP, CP) each: the max and the sum of exp(v - max)
    (one exponential per slot, against its own residue's max), or (BEST) the max and the
    shortest duration reaching it; ends with a barrier."""
    acc = tl.full((NPP, CP), NEG, tl.float32)
    esum = tl.zeros((NPP, CP), tl.float32)
    best = tl.full((NPP, CP), KP + 1, tl.int32)
    for j0 in range(0, KP, TILE):
        v, d = _tile_step(wp, j0 + jt, ins, f, mprev, i, db, cs, KP, CP)
        if BEST:
            tm, tb = _res_best(v, d, NP, NPP, KP)
            best = tl.where(tm > acc, tb, tl.where(tm == acc, tl.minimum(best, tb), best))
            acc = tl.maximum(acc, tm)
        else:  # NP unrolled (TILE, CP) passes, no (NPP, TILE, CP) temporary
            dres = (d - 1) % NP  # (TILE, 1)
            tm, _ = _res_max(v, dres, NP, NPP, TILE, CP)
            nm = tl.maximum(acc, tm)
            nms = tl.where(nm == NEG, 0.0, nm)
            e = tl.exp(v - _res_rows(nms, dres, NP, NPP))
            esum = esum * tl.exp(acc - nms) + _res_sums(e, dres, NP, NPP, CP)
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
def _paint(labels, starts, s, e, c, BLOCK: tl.constexpr):
    """labels[s:e] = c and starts[s] = 1 (one segment of the best path)."""
    offs = tl.arange(0, BLOCK)
    for o in range(s, e, BLOCK):
        tl.store(labels + o + offs, c, mask=o + offs < e)
    tl.store(starts + s, 1)


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
