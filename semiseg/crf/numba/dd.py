"""The fully duration-dependent form's numba kernels (Q >= K; core.py's docstring has the
recursions): the forward pass, its backward and the Viterbi, O(L K C^2) per sequence.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .core import (
    FM,
    NEG,
    _advance,
    _label_marginals,
    _lse_add,
    _rebase,
    _terms,
    _traceback,
    fexp,
    restore_cache_dir,
    use_cache_dir,
)

_USER_CACHE_DIR = use_cache_dir()


@njit(cache=True, fastmath=FM)
def _dd_window(aring, pring_c, tr_rev_c, db_rev_c, j, K, dmax, v0, arg):
    """lse (arg False) or (max, i * C + c') (arg True) over the window i in
    [K - dmax, K) and c' of alpha_{t-d}(c') + transition[d-1, c', c] + P_{t-d}(c)
    + duration_bias[d-1, c] (d = K - i), together with the start term v0."""
    C = aring.shape[1]
    m = v0
    if arg:  # one pass; a strict > keeps the first of equal values (v0 before all)
        best = -1
        for i in range(K - dmax, K):
            b = pring_c[j + i] + db_rev_c[i]
            for k in range(C):
                v = aring[j + i, k] + tr_rev_c[i, k] + b
                if v > m:
                    m = v
                    best = i * C + k
        return m, best
    for i in range(K - dmax, K):
        b = pring_c[j + i] + db_rev_c[i]
        for k in range(C):
            m = max(m, aring[j + i, k] + tr_rev_c[i, k] + b)
    if m == NEG:
        return m, 0
    s = fexp(v0 - m)
    for i in range(K - dmax, K):
        b = pring_c[j + i] + db_rev_c[i] - m
        for k in range(C):
            s += fexp(aring[j + i, k] + tr_rev_c[i, k] + b)
    return m + math.log(s), 0


@njit(cache=True)
def _dd_push(aring, pring, alpha, P, t, K):
    C = alpha.shape[0]
    j = t % K
    for c in range(C):
        a = alpha[c] if t > 0 else NEG  # no predecessor before the first segment
        aring[j, c] = a
        aring[j + K, c] = a
        pring[c, j] = P[c]
        pring[c, j + K] = P[c]


@njit(cache=True)
def _dd_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start,
            aring, pring, lo, S, t0, t1, alphas, Ss):
    """Boundaries [t0, t1) of one chunk from its restored state; like `_fac_run`."""
    C = lo.shape[0]
    K = aring.shape[0] // 2
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    keep = alphas.shape[0] > 0
    for t in range(t0, t1):
        if t > t0:
            _advance(f, alw, has_alw, S, lo, t)
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j = t % K
            for c in range(C):
                dmax = min(K, t - lo[c])
                # a first segment [0, t) of label c, when allowed
                v0 = start[c] + pring[c, j + K - t] + db_rev[c, K - t] if dmax >= t else NEG
                v, _ = _dd_window(aring, pring[c], tr_rev[c], db_rev[c], j, K, dmax, v0,
                                  False)
                alpha[c] = A[c] + v
        if keep:
            for c in range(C):
                alphas[t - t0, c] = alpha[c]
                Ss[t - t0, c] = S[c]
        if t == L:
            break
        _dd_push(aring, pring, alpha, P, t, K)
    return alpha


@njit(cache=True, nogil=True)
def dd_forward(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start, end,
               n, ck_a, ck_p, ck_lo, alpha_end):
    """log Z of one sequence; fills the checkpoints and alpha_L."""
    K, C = ck_a.shape[1], ck_a.shape[2]
    aring = np.full((2 * K, C), NEG)
    pring = np.full((C, 2 * K), NEG)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    none = np.empty((0, C))
    alpha = np.full(C, NEG)
    for k in range((L + n) // n):
        t0 = k * n
        if t0 > 0:
            _advance(f, alw, has_alw, S, lo, t0)
            _rebase(pring, S)
        for c in range(C):
            ck_lo[k, c] = lo[c]
            for i in range(K):
                ck_a[k, i, c] = aring[i, c]
                ck_p[k, c, i] = pring[c, i]
        alpha = _dd_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start,
                        aring, pring, lo, S, t0, min(t0 + n, L + 1), none, none)
    z = NEG
    for c in range(C):
        alpha_end[c] = alpha[c]
        z = _lse_add(z, alpha[c] + end[c])
    return z


@njit(cache=True, fastmath=FM)
def _dd_segments(trp, u, alpha_s, z, w, g_tr, seg, beta, nk):
    """beta_s(c') = lse_{d, c} transition[d-1, c', c] + u[d-1, c], and the marginals of
    the segments at s after c' into g_tr[c', (d-1, c)] and seg[(d-1, c)] (flat over the
    first nk = dtop * C entries; u = P_s + duration_bias + h_{s+d})."""
    C = trp.shape[0]
    for c0 in range(C):
        m = NEG
        for k in range(nk):
            m = max(m, trp[c0, k] + u[k])
        if m == NEG:
            beta[c0] = NEG
            continue
        ft = w * fexp(alpha_s[c0] + m - z)
        sm = 0.0
        for k in range(nk):
            e = fexp(trp[c0, k] + u[k] - m)
            sm += e
            g_tr[c0, k] += e * ft
            seg[k] += e * ft
        beta[c0] = m + math.log(sm)


@njit(cache=True, nogil=True)
def dd_backward(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trp, tr_rev, db, db_rev,
                start, end, n, ck_a, ck_p, ck_lo, alpha_end, z, w,
                g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end):
    """Gradients of w * log Z of one sequence (trp, g_tr as (c', (d-1, c)), g_db (d-1, c))."""
    K, C = ck_a.shape[1], ck_a.shape[2]
    for c in range(C):
        g_end[c] = w * math.exp(alpha_end[c] + end[c] - z)
    aring = np.empty((2 * K, C))
    pring = np.empty((C, 2 * K))
    hring = np.full((2 * K, C), NEG)  # h_{s+d}, d = 1..K at rows [(s+1) mod K, ... + K)
    lo = np.empty(C, np.int64)
    hi = np.full(C, L, np.int64)
    S = np.zeros(C)
    alphas = np.empty((n, C))
    Ss = np.empty((n, C))
    beta = np.empty(C)
    u = np.empty(K * C)
    seg = np.empty(K * C)
    g_dbf = g_db.reshape(K * C)
    for k in range((L + n) // n - 1, -1, -1):
        t0 = k * n
        t1 = min(t0 + n, L + 1)
        for i in range(K):
            for c in range(C):
                aring[i, c] = ck_a[k, i, c]
                aring[i + K, c] = ck_a[k, i, c]
                pring[c, i] = ck_p[k, c, i]
                pring[c, i + K] = ck_p[k, c, i]
        for c in range(C):
            lo[c] = ck_lo[k, c]
        _dd_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start,
                aring, pring, lo, S, t0, t1, alphas, Ss)
        if t1 <= L:  # rebase the closing terms from S[t1] = 0 to S[t0] = 0
            for i in range(2 * K):
                for c in range(C):
                    hring[i, c] += Ss[t1 - 1 - t0, c] + f[t1 - 1, c]
        for c in range(C):
            S[c] = 0.0
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
                dtop = min(K, L - s)
                nk = dtop * C
                for d0 in range(dtop):
                    for c in range(C):
                        P = (ps[s, c] if has_ps else 0.0) - Ss[i, c]
                        ok = d0 < hi[c] - s
                        u[d0 * C + c] = P + db[d0, c] + hring[j + d0, c] if ok else NEG
                        seg[d0 * C + c] = 0.0
                if s == 0:  # the first segment: start in place of a predecessor
                    for d0 in range(dtop):
                        for c in range(C):
                            seg[d0 * C + c] = w * fexp(start[c] + u[d0 * C + c] - z)
                else:
                    _dd_segments(trp, u, alphas[i], z, w, g_tr, seg, beta, nk)
                for c in range(C):
                    g_ps[s, c] = 0.0
                for k2 in range(nk):
                    g_dbf[k2] += seg[k2]
                    g_ps[s, k2 % C] += seg[k2]
                if s == 0:
                    for c in range(C):
                        g_start[c] = g_ps[0, c]
                    break
            jj = s % K
            for c in range(C):
                g_pe[s - 1, c] = w * fexp(alphas[i, c] + beta[c] - z)
                h = Ss[i, c] + (pe[s - 1, c] if has_pe else 0.0) + beta[c]
                hring[jj, c] = h
                hring[jj + K, c] = h
    _label_marginals(g_ps, g_pe, g_sc, L)


@njit(cache=True, nogil=True)
def dd_viterbi(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start, end,
               n, bp_d, bp_c, labels, seg_start):
    """Best score of one sequence; fills its labels and segment starts."""
    C = start.shape[0]
    K = db_rev.shape[1]
    aring = np.full((2 * K, C), NEG)
    pring = np.full((C, 2 * K), NEG)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    for t in range(L + 1):
        if t > 0:
            _advance(f, alw, has_alw, S, lo, t)
            if t % n == 0:
                _rebase(pring, S)
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j = t % K
            for c in range(C):
                dmax = min(K, t - lo[c])
                v0 = start[c] + pring[c, j + K - t] + db_rev[c, K - t] if dmax >= t else NEG
                m, ik = _dd_window(aring, pring[c], tr_rev[c], db_rev[c], j, K, dmax, v0,
                                   True)
                alpha[c] = A[c] + m
                if ik < 0:  # the first segment
                    bp_d[t, c] = t
                    bp_c[t, 0, c] = 0
                else:
                    bp_d[t, c] = K - ik // C
                    bp_c[t, 0, c] = ik % C
        if t == L:
            break
        _dd_push(aring, pring, alpha, P, t, K)
    return _traceback(alpha, end, bp_d, bp_c, L, 1, labels, seg_start, True)


restore_cache_dir(_USER_CACHE_DIR)
