"""The periodic family's end-indexed forward chain (end._fwd_end_kernel, MODE 0) with its
ring as NP residue planes, one per program: SPLIT = NP programs share one sequence.

Why: that chain inserts every segment [i, e) that starts at step i into the slot of its end
e, with gamma^{(e - i - 1) mod NP}[i]; one program per sequence selects that gamma per slot
over (NPP, KP, CP) and runs a logsumexp insertion over all KP slots each step, ~3 us a step
at (K, C) = (100, 24) and ~7 us at (1000, 16) on an H100, the periodic forward's bound once
its reversed chain was split (benchmarks/RESULTS-log.md, "The residue planes split over
programs"). Here program q holds the ends e with e mod NP = q, row (e div NP) mod KQ of a
(KQ, CP) plane (NP KQ >= KP, KQ a power of two). Every end of a plane has the same residue
(q - i - 1) mod NP at step i, so the program needs one gamma row, gamma^{rq}[i], one
(C, C) logsumexp per step (its residue's slice of the transition, split_end._trans_slice,
loaded at the top of the step before), and
its insertion walks KQ rows instead of KP. The row of end i + 1, alpha[i + 1], lives in
plane (i + 1) mod NP: its program stores that row (a masked store, no reduction) into the
step's half of the exchange buffer, all wait at the counter (common._arrive_wait) and read
it, so every program has the same alpha and normaliser, the unsplit chain's values.
TAG: that row goes out as words tagged with the step (common._exchange's TAG) into 2 NPP
slots, each thread waiting for its own words (common._settled), no counter; PREFETCH: the
step's rows are loaded a step ahead (chain._fwd_kernel's).

The planes hold, before step i, the ends [i, i + NP KQ); the row of end i (read at the
last step) is reset to end i + NP KQ (duration NP KQ < 2 KP: the host's duration-bias
table has 2 KP rows, -inf beyond K). Checkpoints and the state at M are the unsplit
chain's (KP, CP) ring of ends [i, i + KP) (ends beyond hold -inf in both), so MODE 1, the
joins and the backward read them unchanged. Program 0 stores what is not a plane's (alpha,
N, the rows' alpha and N); each program stores its own gamma row of the rows.
"""

import triton
import triton.language as tl

from .common import (
    NEG,
    _arrive_wait,
    _logaddexp,
    _lse1,
    _pack,
    _safe_max,
    _settled,
    _split,
    _step_rows,
    _unpack,
)


@triton.jit
def _trans_slice(trans, tidx, r, CP: tl.constexpr, SP: tl.constexpr):
    """Residue r's slice of a periodic table (_trans3's layouts): (CP, CP) dense values, or
    (CP, SP) sparse values and their columns (dense: a placeholder). Loaded at the top of
    the step before its use, so that its latency hides behind the ring's work."""
    rs = tl.arange(0, CP)[:, None]
    if SP == 0:
        t2 = tl.load(trans + (r * CP + rs) * CP + tl.arange(0, CP)[None, :])
        ti2 = tl.zeros((1, 1), tl.int32)
    else:
        at = (r * CP + rs) * SP + tl.arange(0, SP)[None, :]
        t2 = tl.load(trans + at)
        ti2 = tl.load(tidx + at)
    return t2, ti2


@triton.jit
def _lse_slice(t2, ti2, v, wsp, CP: tl.constexpr, SP: tl.constexpr):
    """logsumexp over the last axis of t2[j, k] + v[k] (dense) or t2[j, s] + v[ti2[j, s]]
    (sparse, v gathered through this program's scratch wsp as _spread does): (CP,). As
    (CP, .) tensors: the (1, CP, CP) form kept ptxas at 32 registers and ~11 KB of spills
    a thread in this chain (sm_90, triton 3.9; compile_report.py), while the reversed
    chain's split planes ran 1.4-1.8x slower with this form (and its slice loaded at the
    top of the step) than with the (1, CP, CP) one (H200)."""
    if SP == 0:
        w = t2 + v[None, :]
    else:
        tl.debug_barrier()
        tl.store(wsp + tl.arange(0, CP), v)
        tl.debug_barrier()
        w = t2 + tl.load(wsp + ti2)
    return _lse1(w)


@triton.jit
def _plane_ends(i, q, us, NP: tl.constexpr, KQ: tl.constexpr):
    """The end held by row us of plane q before step i: the e in [i, i + NP KQ) with
    e mod NP = q and (e div NP) mod KQ = us."""
    n0 = (i - q + NP - 1) // NP  # the first end of plane q at or after i is q + NP n0
    return q + NP * (n0 + ((us - n0) & (KQ - 1)))


@triton.jit
def _end_slots(i, q, us, NP: tl.constexpr, KP: tl.constexpr, KQ: tl.constexpr):
    """Where plane q's rows us sit before step i in the unsplit chain's (KP, CP) ring of
    ends [i, i + KP) (slot e mod KP for end e): (slots, mask), the mask leaving out the
    ends from i + KP on (-inf in the planes: no segment reaches them yet)."""
    e = _plane_ends(i, q, us, NP, KQ)
    return e & (KP - 1), e - i < KP


@triton.jit
def _fwd_end_split_kernel(
    scores, allowed, ps, pe, trans, db, init, lengths,
    ck_ring, ck_alp, ck_n,
    mid_ring, mid_alp, mid_n, mid_bd, mid_bc,
    rows_gam, rows_alp, rows_n,
    bp_d, bp_c,
    out_alp, out_n,
    xch, bar,
    T, C, K, P, NCK, seg0,
    KP: tl.constexpr, CP: tl.constexpr, NP: tl.constexpr, NPP: tl.constexpr,
    KQ: tl.constexpr, MODE: tl.constexpr, PHASE: tl.constexpr = 0,
    HAS_ALLOWED: tl.constexpr = False, HAS_PS: tl.constexpr = False,
    HAS_PE: tl.constexpr = False, WRITE_ROWS: tl.constexpr = False,
    tidx=None, SP: tl.constexpr = 0, wsp=None,
    PREFETCH: tl.constexpr = 0, TAG: tl.constexpr = 0, MEET: tl.constexpr = 32,
):
    """end._fwd_end_kernel MODE 0 (PHASE 0: [0, M) from the start, state at M -> mid_*;
    PHASE 1: [M, L) from mid_*, final alpha and N -> out_*; checkpoints, WRITE_ROWS) over
    the grid (B, NP): program (b, q) holds plane q (module docstring). xch (B, 2, CP)
    float32 and bar (B,) int32, zero at launch: alpha's row by step parity, and the step
    counter (kernels._exchange_buffers); TAG: xch (B, 2 NPP, CP) int64, zero at launch
    (bar unused)."""
    tl.static_assert((MODE == 0) & (NP > 1) & (NP * KQ >= KP))
    b = tl.program_id(0).to(tl.int64)
    q = tl.program_id(1)
    lead = q == 0
    L = tl.load(lengths + b).to(tl.int32)
    M = _split(L, P, MEET)
    us = tl.arange(0, KQ)[:, None]
    cs = tl.arange(0, CP)[None, :]
    cs1 = tl.arange(0, CP)
    cmask1 = cs1 < C
    rr2 = tl.arange(0, NPP)[:, None]
    if SP > 0:
        wsp = wsp + (b * tl.num_programs(1) + q) * CP
    # the exchange's row slots: 2 by step parity, each step behind a counter; TAG: 2 NPP.
    # Without a counter a program at step t has read row t - 1, whose writer had read row
    # t - 2, and so on: of any NP consecutive rows each program wrote one, so every
    # program has read the rows before t - NP and NP + 1 slots are never overwritten
    # unread (a barrier after the wait keeps a program's warps within a step)
    XS: tl.constexpr = 2 * NPP if TAG else 2
    xb = xch + b * XS * CP
    seq = b * T * C
    ck = b * NCK
    if PHASE == 1:
        i0 = M
        i1 = L
        slot, ok = _end_slots(i0, q, us, NP, KP, KQ)
        A = tl.load(mid_ring + (b * KP + slot) * CP + cs, mask=ok, other=NEG)
        alp = tl.load(mid_alp + b * CP + cs1)
        n = tl.load(mid_n + b)
    else:
        i0 = 0
        i1 = M
        A = tl.load(mid_ring + (b * KP + us) * CP + cs, mask=(us + cs) < 0, other=NEG)
        alp = tl.full((CP,), NEG, tl.float32)
        n = tl.zeros((), tl.float64)
    rq = (q - i0 - 1 + NP * (i0 + 1)) % NP  # the residue of this plane's ends at step i0
    ini = tl.load(init + cs1, mask=cmask1, other=NEG)
    t2, ti2 = _trans_slice(trans, tidx, rq, CP, SP)
    gq = tl.where(i0 == 0, ini, _lse_slice(t2, ti2, alp, wsp, CP, SP))
    mprev = tl.zeros((), tl.float32)
    if PREFETCH:  # step i0's rows (chain._fwd_kernel PREFETCH)
        fN, sN, eN = _step_rows(scores + seq, allowed + seq, ps + seq, pe + seq,
                                i0 + tl.zeros((), tl.int64), C, cs1, cs1 < tl.where(i0 < i1, C, 0),
                                HAS_ALLOWED, HAS_PS, HAS_PE)
    for i in range(i0, i1):
        p = i + tl.zeros((), tl.int64)
        if PREFETCH:
            f = fN
            psr = sN
            per = eN
            fN, sN, eN = _step_rows(scores + seq, allowed + seq, ps + seq, pe + seq,
                                    tl.minimum(i + 1, i1 - 1) + tl.zeros((), tl.int64), C,
                                    cs1, cmask1, HAS_ALLOWED, HAS_PS, HAS_PE)
        else:
            f, psr, per = _step_rows(scores + seq, allowed + seq, ps + seq, pe + seq, p, C,
                                     cs1, cmask1, HAS_ALLOWED, HAS_PS, HAS_PE)
        rq1 = (rq + NP - 1) % NP  # the residue at step i + 1, and its slice (used below)
        t2, ti2 = _trans_slice(trans, tidx, rq1, CP, SP)
        e = _plane_ends(i, q, us, NP, KQ)  # (KQ, 1), in [i, i + NP KQ)
        if i % P == 0:  # checkpoint: the planes as the ring of ends [i, i + KP)
            k = i // P
            slot, ok = _end_slots(i, q, us, NP, KP, KQ)
            tl.store(ck_ring + ((ck + k) * KP + slot) * CP + cs, A - mprev, mask=ok)
            tl.store(ck_alp + (ck + k) * CP + cs1, alp, mask=lead)
            tl.store(ck_n + ck + k, n, mask=lead)
        if WRITE_ROWS:  # gamma^rq from each program, alpha and N from program 0
            r = b * T + p
            tl.store(rows_gam + (r * NPP + rq) * CP + cs1, gq)
            tl.store(rows_gam + (r * NPP + rr2) * CP + cs, tl.full((NPP, CP), NEG, tl.float32),
                     mask=(rr2 >= NP) & lead)
            tl.store(rows_alp + r * CP + cs1, alp, mask=lead)
            tl.store(rows_n + r, n, mask=lead)
        # the segments [i, e) into their ends' rows; the row of end i restarts as end
        # i + NP KQ
        d = e - i
        own = d == 0
        d = tl.where(own, NP * KQ, d)
        x = gq[None, :] + psr[None, :] + tl.load(db + (d - 1) * CP + cs)
        A = A - mprev
        A = tl.where(own, x, _logaddexp(A, x))
        A = A + f[None, :]
        # alpha[i + 1]: the row of end i + 1, stored by its plane's program alone (a
        # masked store, no reduction) into this step's half of the exchange, read by all
        half = xb + ((i - i0) % XS) * CP
        if TAG:  # the row with its step as a tag (common._exchange TAG), polled
            tag = i - i0 + 1
            tl.store(half + us * 0 + cs, _pack(A, tag), mask=e == i + 1)
            alp = _unpack(_settled(tl.load(half + cs1, volatile=True), half + cs1, tag)) + per
            tl.debug_barrier()  # the program's warps a step apart at most (the slots)
        else:
            tl.store(half + us * 0 + cs, A, mask=e == i + 1)
            _arrive_wait(bar + b, i - i0, NP)
            alp = tl.load(half + cs1, volatile=True) + per
        m = _safe_max(alp)
        alp = alp - m
        n = n + m.to(tl.float64)
        mprev = m
        rq = rq1
        gq = _lse_slice(t2, ti2, alp, wsp, CP, SP)  # gamma^rq[i + 1]
    if PHASE == 0:
        slot, ok = _end_slots(i1, q, us, NP, KP, KQ)
        tl.store(mid_ring + (b * KP + slot) * CP + cs, A - mprev, mask=ok)
        tl.store(mid_alp + b * CP + cs1, alp, mask=lead)
        tl.store(mid_n + b, n, mask=lead)
    else:
        tl.store(out_alp + b * CP + cs1, alp, mask=lead)
        tl.store(out_n + b, n, mask=lead)
