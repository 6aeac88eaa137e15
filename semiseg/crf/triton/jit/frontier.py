"""Where the tracebacks of a window's frontier meet (seams._coalesce, one program per
window): the kernel of the certified max-sum's windows on a device
(annotate/device_maxsum.py, crf/triton/frontier.py)."""

import triton
import triton.language as tl

from .common import _paint


@triton.jit
def _coalesce_kernel(bp_d, bp_c, lengths, lows, state, out, T, C,
                     CP: tl.constexpr):
    """seams._coalesce of window b (program id 0) from its backpointers bp_d / bp_c
    (B, T, C), row p for the boundary p + 1 (periodic.viterbi_tables; bp_d 0: no allowed
    path ends there): the latest boundary state (t0, c0), 0 < t0 < lo, that every
    traceback from a finite state (s, c), lo <= s < n, passes, or (0, -1); into out[b].

    `state` (B, T + 1, C) uint8, zero on entry: 1 a marked state (a frontier state, or
    one a traceback reached that was already marked), 2 one a traceback step reached
    first (counted: `pending` counts those below the current boundary). The boundaries
    are walked from n - 1 down, as _coalesce does, and the walk stops where the
    tracebacks meet. A step's tracebacks that reach the same state count once (the
    lanes' keys compared pairwise); its stores are visible to the next step's loads
    after the barrier (one program, one thread block)."""
    b = tl.program_id(0).to(tl.int64)
    n = tl.load(lengths + b).to(tl.int64)
    lo = tl.load(lows + b).to(tl.int64)
    cs = tl.arange(0, CP)
    cm = cs < C
    bpr = bp_d + b * T * C
    bcr = bp_c + b * T * C
    st = state + b * (T + 1) * C
    for t in range(lo, n):  # the frontier: states with an allowed path
        d = tl.load(bpr + (t - 1) * C + cs, mask=cm, other=0)
        tl.store(st + t * C + cs, (d != 0).to(tl.uint8), mask=cm)
    tl.debug_barrier()
    pending = tl.zeros((), tl.int32)
    t = n - 1
    res_t = tl.zeros((), tl.int64)
    res_c = tl.full((), -1, tl.int32)
    go = t > 0
    while go:
        v = tl.load(st + t * C + cs, mask=cm, other=0)
        mk = v != 0
        m_t = tl.sum(mk.to(tl.int32), 0)
        pending -= tl.sum((v == 2).to(tl.int32), 0)
        last = tl.max(tl.where(mk, cs, -1), 0)
        if (t < lo) & (m_t == 1) & (pending == 0):
            res_t = t
            res_c = last
            go = t < 0  # (False, as the loop's i1 tensor: t > 0 here)
        else:
            d = tl.load(bpr + (t - 1) * C + cs, mask=mk, other=1).to(tl.int64)
            c2 = tl.load(bcr + (t - 1) * C + cs, mask=mk, other=0).to(tl.int64)
            s = t - d
            c2 = tl.where(s > 0, c2, 0)
            key = tl.where(mk, s * CP + c2, -1 - cs)  # distinct for the lanes not marked
            dup = (key[:, None] == key[None, :]) & (cs[None, :] < cs[:, None])
            first = mk & (tl.sum(dup.to(tl.int32), 1) == 0)
            old = tl.load(st + s * C + c2, mask=first, other=1)
            new = first & (old == 0)
            tl.debug_barrier()  # every lane's load before any store
            tl.store(st + s * C + c2, tl.full((CP,), 2, tl.uint8), mask=new)
            pending += tl.sum(new.to(tl.int32), 0)
            tl.debug_barrier()
            t -= 1
            go = t > 0
    tl.store(out + 2 * b, res_t)
    tl.store(out + 2 * b + 1, res_c.to(tl.int64))


@triton.jit
def _trace_kernel(bp_d, bp_c, tops, labels, starts, T, C, BLOCK: tl.constexpr):
    """The traceback of window b (program id 0) through its backpointers (B, T, C) (as
    _coalesce_kernel reads them) from the boundary state tops[b] = (t, c) down to the
    window's first boundary: labels[b, s:e] = c for each segment [s, e) of c on the way
    and starts[b, s] = 1 (seams._trace's labels, and the boundaries it passes). Nothing
    where c < 0; a state with no allowed path (duration 0) ends the walk."""
    b = tl.program_id(0).to(tl.int64)
    t = tl.load(tops + 2 * b)
    c = tl.load(tops + 2 * b + 1)
    t = tl.where(c < 0, 0, t)
    lab = labels + b * T
    st = starts + b * (T + 1)
    while t > 0:
        at = (b * T + t - 1) * C + c
        d = tl.load(bp_d + at).to(tl.int64)
        s = t - d
        _paint(lab, st, s, t, c, BLOCK)
        c = tl.load(bp_c + at).to(tl.int64)
        t = tl.where(d > 0, s, 0)
