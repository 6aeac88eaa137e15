"""The factorised form's numba kernels (static, Q = 1, and periodic, Q = P < K;
core.py's docstring has the recursions): the forward pass, its backward and the
Viterbi, O(L (Q C^2 + K C)) per sequence.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .core import (
    FM,
    HEADROOM,
    NEG,
    TINY,
    _advance,
    _argmax2,
    _axpy,
    _axpy_v,
    _lse2,
    _lse_add,
    _push_ring,
    _rebase,
    _sum,
    _terms,
    _traceback,
    fexp,
    restore_cache_dir,
    use_cache_dir,
)

_USER_CACHE_DIR = use_cache_dir()


@njit(cache=True, fastmath=FM)
def _dot(x, ox, y, oy, n):
    """sum_{i < n} x[ox + i] * y[oy + i]. (Indexing slices, not x[ox + i], lets LLVM
    load whole vectors: 3.5x faster on the 2-core CPU.)"""
    xs = x[ox:ox + n]
    ys = y[oy:oy + n]
    s = 0.0
    for i in range(n):
        s += xs[i] * ys[i]
    return s


@njit(cache=True)
def _relinearise(ring, lring, R):
    """lring = exp(ring - R) per label, R[c] the largest finite entry of label c."""
    C = R.shape[0]
    flat = ring.reshape(C, -1)
    lflat = lring.reshape(C, -1)
    for c in range(C):
        m = NEG
        for i in range(flat.shape[1]):
            m = max(m, flat[c, i])
        R[c] = m if m > NEG else 0.0
        for i in range(flat.shape[1]):
            lflat[c, i] = fexp(flat[c, i] - R[c])


@njit(cache=True)
def _lin_write(lring_c, R, c, v, q, j, K):
    """Write exp(v - R[c]) at slots j and j + K of row q of label c's linear ring
    (lring_c, (rows, 2K)), first moving R[c] up to v when v passes it by more than
    HEADROOM (rescaling the ring)."""
    if v > R[c] + HEADROOM:
        f = fexp(R[c] - v)
        for r in range(lring_c.shape[0]):
            for i in range(lring_c.shape[1]):
                lring_c[r, i] *= f
        R[c] = v
    e = fexp(v - R[c])
    lring_c[q, j] = e
    lring_c[q, j + K] = e


@njit(cache=True, fastmath=FM)
def _gammas(alpha, sp, ea, gam):
    """gam[r, c] = lse_c' alpha[c'] + transition[r, c', c] over the finite transitions
    only (sp = (ptr, src, val, eval, rowmax): the sources of row r * C + c are
    src[ptr[rc]:ptr[rc + 1]], val their log values, eval = exp(val - rowmax[rc])). A row
    of one source is that one sum; more run in linear space (ea = exp(alpha - max
    alpha)) unless that sum is below TINY, then exactly in log space."""
    ptr, src, val, ev, vm = sp
    Q, C = gam.shape
    am = NEG
    for k in range(C):
        am = max(am, alpha[k])
    if am == NEG:
        for r in range(Q):
            for c in range(C):
                gam[r, c] = NEG
        return
    for k in range(C):
        ea[k] = fexp(alpha[k] - am)
    for r in range(Q):
        for c in range(C):
            rc = r * C + c
            a0, a1 = ptr[rc], ptr[rc + 1]
            if a1 - a0 <= 1:
                gam[r, c] = alpha[src[a0]] + val[a0] if a1 > a0 else NEG
                continue
            sm = 0.0
            for i in range(a0, a1):
                sm += ea[src[i]] * ev[i]
            if sm >= TINY:
                gam[r, c] = am + vm[rc] + math.log(sm)
                continue
            m = NEG
            for i in range(a0, a1):
                m = max(m, alpha[src[i]] + val[i])
            if m == NEG:
                gam[r, c] = NEG
                continue
            sm = 0.0
            for i in range(a0, a1):
                sm += fexp(alpha[src[i]] + val[i] - m)
            gam[r, c] = m + math.log(sm)


@njit(cache=True)
def _window(dr, c, run):
    """Label c's window of durations at a boundary whose allowed run is `run` bases:
    (top, n), d = top, top - 1, ..., top - n + 1 = dr[0, c] (its finite ones, _Arrays.dr)."""
    top = min(dr[1, c], run)
    return top, max(0, top - dr[0, c] + 1)


@njit(cache=True)
def _first(r, lo0, Q):
    """The first d - 1 >= lo0 of residue r mod Q."""
    return lo0 + (r - lo0) % Q


@njit(cache=True)
def _residue_sums(prod, lo0, dmax, Q, tot):
    """tot[r] = the sum of prod[d0] over d0 in [lo0, dmax) with d0 = r mod Q, each in
    ascending d0 from 0.0. Q = 3 (the gene models' codon period): the three sums advance
    together, the same bits as one loop per residue but three chains of dependent
    additions side by side (the reverse pass's chunk 6.77 -> 6.26 us a step on yeast; an
    indexed tot[r] += ... in one loop ran 7.8). Other Q: one loop per residue."""
    if Q == 3:
        a = 0.0
        b = 0.0
        c = 0.0
        d0 = lo0
        while d0 + 2 < dmax:
            a += prod[d0]
            b += prod[d0 + 1]
            c += prod[d0 + 2]
            d0 += 3
        if d0 < dmax:
            a += prod[d0]
        if d0 + 1 < dmax:
            b += prod[d0 + 1]
        r = lo0 % 3
        tot[r] = a
        tot[(r + 1) % 3] = b
        tot[(r + 2) % 3] = c
        return
    for r in range(Q):
        acc = 0.0
        for d0 in range(_first(r, lo0, Q), dmax, Q):
            acc += prod[d0]
        tot[r] = acc


@njit(cache=True)
def _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sp, db_rev, edb_rev, dbm, dr,
             start, ring, lring, R, lo, S, t0, t1, alphas, opens, Ss):
    """Boundaries [t0, t1) of one chunk from its restored state (ring, lring, R, lo,
    S = 0). Stores alpha_t, G^r_t and S[t] at row t - t0 of alphas, opens, Ss when those
    have rows (the backward pass); returns alpha at the last boundary processed.

    The window sums run in linear space: lring = exp(ring - R[c]) (entries at most
    exp(HEADROOM)), edb_rev = exp(db_rev - dbm[c]); where such a sum is below TINY the
    terms it lost to underflow might matter, and the exact log-space sum is used. Each
    label's window holds only its finite durations, dr[0, c]..dr[1, c] (_Arrays.dr): the
    others add exact zeros (-inf in log space)."""
    C, Q, K2 = ring.shape
    K = K2 // 2
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    gam = np.empty((Q, C))
    keep = alphas.shape[0] > 0
    ea = np.empty(C)
    for t in range(t0, t1):
        if t > t0:
            _advance(f, alw, has_alw, S, lo, t)
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j, q = t % K, t % Q
            for c in range(C):
                # the window: d = top..dr[0, c] at [j + K - top, j + K - dr[0, c]]
                top, nd = _window(dr, c, t - lo[c])
                sm = _dot(lring[c, q], j + K - top, edb_rev[c], K - top, nd)
                if sm >= TINY:
                    alpha[c] = A[c] + R[c] + dbm[c] + math.log(sm)
                else:
                    alpha[c] = A[c] + _lse2(ring[c, q], j + K - top, db_rev[c], K - top, nd)
        if keep:
            for c in range(C):
                alphas[t - t0, c] = alpha[c]
                Ss[t - t0, c] = S[c]
        if t == L:
            break
        if t == 0:
            for r in range(Q):
                for c in range(C):
                    gam[r, c] = start[c]
        else:
            _gammas(alpha, sp, ea, gam)
        j = t % K
        for c in range(C):
            for q in range(Q):
                v = gam[(q - t - 1) % Q, c] + P[c]
                ring[c, q, j] = v
                ring[c, q, j + K] = v
                _lin_write(lring[c], R, c, v, q, j, K)
        if keep:
            for r in range(Q):
                for c in range(C):
                    opens[t - t0, r, c] = gam[r, c] + P[c]
    return alpha


@njit(cache=True, nogil=True)
def fac_forward(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sp, db_rev, edb_rev, dbm, dr,
                start, end, n, ck_ring, ck_lo, alpha_end, alphas, opens, Ss):
    """log Z of one sequence; fills the checkpoints and alpha_L, and, where alphas has
    rows (L + 1 of them; else none), every chunk's forward rows at rows t of alphas,
    opens, Ss: the bits fac_recompute makes of them (each chunk runs from its
    checkpoint's state restored as fac_recompute restores it), so the backward may read
    them instead of recomputing (crf.numba.forward's keep_rows)."""
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    ring = np.full((C, Q, 2 * K), NEG)
    lring = np.zeros((C, Q, 2 * K))
    R = np.zeros(C)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    alpha = np.full(C, NEG)
    for k in range((L + n) // n):  # chunks of boundaries [k n, min(k n + n, L + 1))
        t0 = k * n
        if t0 > 0:
            _advance(f, alw, has_alw, S, lo, t0)
            _rebase(ring, S)
        for c in range(C):
            ck_lo[k, c] = lo[c]
            for q in range(Q):
                for i in range(K):
                    ck_ring[k, c, q, i] = ring[c, q, i]
        _restore(ck_ring, ck_lo, k, ring, lring, R, lo)
        t1 = min(t0 + n, L + 1)  # (rows not kept: alphas has none, nor its slices)
        alpha = _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sp, db_rev, edb_rev,
                         dbm, dr, start, ring, lring, R, lo, S, t0, t1, alphas[t0:t1],
                         opens[t0:t1], Ss[t0:t1])
    z = NEG
    for c in range(C):
        alpha_end[c] = alpha[c]
        z = _lse_add(z, alpha[c] + end[c])
    return z


@njit(cache=True)
def _restore(ck_ring, ck_lo, k, ring, lring, R, lo):
    """The forward's state entering chunk k from its checkpoint: the ring (both rotated
    halves), its linear copy and scale (_relinearise), the earliest allowed starts."""
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    for c in range(C):
        for q in range(Q):
            for i in range(K):
                ring[c, q, i] = ck_ring[k, c, q, i]
                ring[c, q, i + K] = ck_ring[k, c, q, i]
        lo[c] = ck_lo[k, c]
    _relinearise(ring, lring, R)


@njit(cache=True, fastmath=FM)
def _close_max(hr, j, dbt, r, d0lo, dmax, Q):
    """max over d0lo <= d - 1 < dmax, d - 1 = r mod Q, of h_{s+d} + duration_bias[d-1]."""
    m = NEG
    for d0 in range(_first(r, d0lo, Q), dmax, Q):
        m = max(m, hr[j + d0] + dbt[d0])
    return m


@njit(cache=True, fastmath=FM)
def _close_sum(hr, j, dbt, gdb, r, d0lo, dmax, Q, m, fr):
    """sum of exp(h_{s+d} + duration_bias[d-1] - m) over the durations of residue r in
    d0lo <= d - 1 < dmax, and gdb[d-1] += that exponential * fr (the segment marginals)."""
    tot = 0.0
    for d0 in range(_first(r, d0lo, Q), dmax, Q):
        e = fexp(hr[j + d0] + dbt[d0] - m)
        tot += e
        gdb[d0] += e * fr
    return tot


@njit(cache=True, fastmath=FM)
def _beta_and_transitions(sq, bg, eb, alphas_i, z, w, g_tr, beta, params):
    """beta_s(c') = lse_{r, c} transition[r, c', c] + beta_gamma^r_s(c) over the finite
    transitions only, and (params) their marginals at s into g_tr[c', (r, c)] (sq = (ptr,
    dst, val, eval, rowmax): the targets r * C + c of source c' are dst[ptr[c']:ptr[c' +
    1]], val their log values, eval = exp(val - rowmax[c'])): in linear space, or exactly
    where that sum is below TINY."""
    ptr, dst, val, ev, vm = sq
    C = beta.shape[0]
    QC = bg.shape[0]
    bm = NEG
    for k in range(QC):
        bm = max(bm, bg[k])
    if bm == NEG:
        for c0 in range(C):
            beta[c0] = NEG
        return
    for k in range(QC):
        eb[k] = fexp(bg[k] - bm)
    for c0 in range(C):
        a0, a1 = ptr[c0], ptr[c0 + 1]
        sm = 0.0
        for i in range(a0, a1):
            sm += ev[i] * eb[dst[i]]
        if sm >= TINY:
            beta[c0] = bm + vm[c0] + math.log(sm)
            if params:
                # sum of these marginals = ft * sm <= w, so ft cannot overflow
                ft = w * fexp(alphas_i[c0] + vm[c0] + bm - z)
                for i in range(a0, a1):
                    g_tr[c0, dst[i]] += ft * (ev[i] * eb[dst[i]])
            continue
        m = NEG
        for i in range(a0, a1):
            m = max(m, val[i] + bg[dst[i]])
        if m == NEG:
            beta[c0] = NEG
            continue
        ft = w * fexp(alphas_i[c0] + m - z)
        sm = 0.0
        for i in range(a0, a1):
            e = fexp(val[i] + bg[dst[i]] - m)
            sm += e
            if params:
                g_tr[c0, dst[i]] += e * ft
        beta[c0] = m + math.log(sm)


@njit(cache=True, nogil=True)
def fac_recompute(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sp, db_rev, edb_rev, dbm, dr,
                  start, n, ck_ring, ck_lo, k, alphas, opens, Ss):
    """The forward rows of chunk k (boundaries [k n, min(k n + n, L + 1))) from its
    checkpoint: alpha, the ring's openings G^r and S at rows t - k n of alphas, opens,
    Ss. Reads only the checkpoint, so chunks can be recomputed in any order, or beside
    the reverse pass of another chunk (crf.numba._fac_backward on two cores)."""
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    ring = np.empty((C, Q, 2 * K))
    lring = np.empty((C, Q, 2 * K))
    R = np.empty(C)
    lo = np.empty(C, np.int64)
    S = np.zeros(C)
    t0 = k * n
    t1 = min(t0 + n, L + 1)
    _restore(ck_ring, ck_lo, k, ring, lring, R, lo)
    _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sp, db_rev, edb_rev, dbm, dr,
             start, ring, lring, R, lo, S, t0, t1, alphas, opens, Ss)


def reverse_state(C: int, Q: int, K: int, L: int) -> tuple:
    """The reverse pass's state carried from chunk to chunk (fac_reverse_chunk)."""
    return (np.full((C, 2 * K), NEG),  # hring: h_{s+d}, d = 1..K at [(s+1) mod K, + K)
            np.zeros((C, 2 * K)),  # hlin = exp(hring - Rh[c]), like the forward's lring
            np.zeros(C),  # Rh
            np.full(C, L, np.int64),  # hi: the first disallowed position >= s, per label
            np.empty(C))  # beta


@njit(cache=True, nogil=True)
def fac_prefix_rows(f, L, n, k, Ss):
    """The chunk-relative prefix sums of chunk k at rows t - k n of Ss (as fac_recompute
    leaves them: S = 0 at the chunk's first boundary, then S += f[t - 1], the same
    sums in the same order), for the reverse pass without marginals."""
    C = Ss.shape[1]
    t0 = k * n
    S = np.zeros(C)
    for t in range(t0, min(t0 + n, L + 1)):
        if t > t0:
            for c in range(C):
                S[c] += f[t - 1, c]
        for c in range(C):
            Ss[t - t0, c] = S[c]


@njit(cache=True, nogil=True)
def fac_reverse_chunk(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sq, db_t,
                      edb_t, dbm, dr, end, n, k, alphas, opens, Ss, hring, hlin, Rh, hi, beta,
                      z, w, g_ps, g_pe, g_tr, g_db, g_start, params, marg):
    """The reverse pass over chunk k (positions from its last boundary down to k n), from
    the chunk's forward rows (fac_recompute) and the state the chunk after it left
    (reverse_state: the closing ring h, its linear copy and scale, the disallowed
    positions, beta); accumulates w * the gradients (g_tr as (c', (r, c)), g_db as
    (c, d-1); params False: the duration-bias and transition sums are left out, for the
    caller to drop: the posteriors need only the per-position gradients, the same bits
    either way). marg False: the state alone (no marginals; alphas and opens not read,
    Ss from fac_prefix_rows), the same bits of it as with them. The chunks' driver is
    crf.numba._fac_backward."""
    C = alphas.shape[1]
    Q = opens.shape[1]
    K = hring.shape[1] // 2
    prod = np.empty(K)
    fv = np.empty(K)  # per duration: the factor of its residue
    tot = np.empty(Q)
    fr = np.empty(Q)
    S = np.zeros(C)
    bg = np.empty(Q * C)  # beta_gamma^r_s(c) at r * C + c
    eb = np.empty(Q * C)
    t0 = k * n
    t1 = min(t0 + n, L + 1)
    if t1 <= L:  # rebase the closing terms from S[t1] = 0 to S[t0] = 0
        for c in range(C):
            S[c] = Ss[t1 - 1 - t0, c] + f[t1 - 1, c]
            Rh[c] += S[c]
        _rebase(hring, S)
    for s in range(t1 - 1, t0 - 1, -1):
        i = s - t0
        if s == L:
            for c in range(C):
                beta[c] = end[c]
        else:
            if has_alw:
                for c in range(C):
                    if not alw[s, c]:
                        hi[c] = s
            j = (s + 1) % K
            for c in range(C):
                # beta_gamma^r_s(c) = P_s(c) + lse_{d-1 = r mod Q} db + h_{s+d}, and
                # the marginals of the segments (s, d, c) from the same exponentials
                P = (ps[s, c] if has_ps else 0.0) - Ss[i, c]
                # the label's finite durations only: d - 1 in [lo0, dmax) (_window)
                dmax, nd = _window(dr, c, hi[c] - s)
                lo0 = dmax - nd
                st = 0.0
                # linear space first: prod[d-1] = exp(h_{s+d} + db[d-1] - Rh - dbm)
                hl = hlin[c, j + lo0:j + lo0 + nd]  # slices: vector loads (_dot)
                eb_c = edb_t[c, lo0:lo0 + nd]
                pr = prod[lo0:lo0 + nd]
                for d0 in range(nd):
                    pr[d0] = hl[d0] * eb_c[d0]
                if Q == 1:
                    tot[0] = _sum(pr, nd)
                else:
                    _residue_sums(prod, lo0, dmax, Q, tot)
                for r in range(Q):
                    if tot[r] >= TINY:
                        # sum_d marginal = fr * tot <= w, so fr cannot overflow
                        fr[r] = w * fexp(opens[i, r, c] + Rh[c] + dbm[c] - z) if marg else 0.0
                        bg[r * C + c] = P + Rh[c] + dbm[c] + math.log(tot[r])
                        st += tot[r] * fr[r]
                        continue
                    # exact log space for this residue
                    fr[r] = 0.0
                    m = _close_max(hring[c], j, db_t[c], r, lo0, dmax, Q)
                    if m == NEG:
                        bg[r * C + c] = NEG
                        continue
                    f_r = w * fexp(opens[i, r, c] + m - z) if marg else 0.0
                    tr_ = _close_sum(hring[c], j, db_t[c], g_db[c], r, lo0, dmax, Q, m, f_r)
                    bg[r * C + c] = P + m + math.log(tr_)
                    st += tr_ * f_r
                if params and Q == 1:
                    _axpy(g_db[c, lo0:], pr, fr[0], nd)
                elif params:
                    r = lo0 % Q
                    for d0 in range(nd):
                        fv[d0] = fr[r]
                        r = r + 1 if r + 1 < Q else 0
                    _axpy_v(g_db[c, lo0:], pr, fv, nd)
                if marg:
                    g_ps[s, c] = st
            if s == 0:
                if marg:
                    for c in range(C):
                        g_start[c] = g_ps[0, c]
                return
            _beta_and_transitions(sq, bg, eb, alphas[i if marg else 0], z, w, g_tr, beta,
                                  params and marg)
        jj = s % K
        for c in range(C):
            if marg:
                g_pe[s - 1, c] = w * fexp(alphas[i, c] + beta[c] - z)
            h = Ss[i, c] + (pe[s - 1, c] if has_pe else 0.0) + beta[c]
            hring[c, jj] = h
            hring[c, jj + K] = h
            _lin_write(hlin[c:c + 1], Rh, c, h, 0, jj, K)


@njit(cache=True, nogil=True)
def fac_end_grads(alpha_end, end, z, w, g_end):
    """w * P(the last segment is of label c), the gradient of `end`."""
    for c in range(alpha_end.shape[0]):
        g_end[c] = w * math.exp(alpha_end[c] + end[c] - z)


@njit(cache=True, nogil=True)
def fac_viterbi(f, ps, pe, alw, has_ps, has_pe, has_alw, L, sp, db_rev, dr, start, end,
                n, bp_d, bp_c, labels, seg_start):
    """Best score of one sequence; fills its labels and segment starts."""
    C, Q = bp_c.shape[2], bp_c.shape[1]
    K = db_rev.shape[1]
    ptr, src, val = sp[0], sp[1], sp[2]
    ring = np.full((C, Q, 2 * K), NEG)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    gam = np.empty((Q, C))
    for t in range(L + 1):
        if t > 0:
            _advance(f, alw, has_alw, S, lo, t)
            if t % n == 0:
                _rebase(ring, S)
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j, q = t % K, t % Q
            for c in range(C):  # the label's finite durations only (_fac_run)
                top, nd = _window(dr, c, t - lo[c])
                m, i = _argmax2(ring[c, q], j + K - top, db_rev[c], K - top, nd)
                alpha[c] = A[c] + m
                bp_d[t, c] = top - i
        if t == L:
            break
        for r in range(Q):
            for c in range(C):
                if t == 0:
                    gam[r, c] = start[c]
                else:  # the first best source, as over all of them (strict >)
                    m = NEG
                    i = 0
                    for k in range(ptr[r * C + c], ptr[r * C + c + 1]):
                        v = alpha[src[k]] + val[k]
                        if v > m:
                            m = v
                            i = src[k]
                    gam[r, c] = m
                    bp_c[t, r, c] = i
        _push_ring(ring, gam, P, t % K, t, K)
    return _traceback(alpha, end, bp_d, bp_c, L, Q, labels, seg_start, False)


restore_cache_dir(_USER_CACHE_DIR)
