"""The numba kernels of the compiled CPU backend (cpu.py is the torch-facing side).

One function per sequence and pass, in float64 log space, and a driver per pass that
runs the sequences of a batch in parallel (`prange`). Notation as in reference.py:
boundary t = 0..L sits between positions; with chunk-relative prefix sums S,

    A_t(c) = S[t] + proj_end[t-1, c]      (closes a segment at t)
    P_s(c) = proj_start[s, c] - S[s]      (opens a segment at s)

Factorised form (static, Q = 1, and periodic, Q = P < K), O(L (Q C^2 + K C)):

    G^r_s(c)  = gamma^r_s(c) + P_s(c),  gamma^r_0 = start,
                gamma^r_s(c) = lse_c' alpha_s(c') + transition[r, c', c]
    alpha_t(c) = A_t(c) + lse_{d=1..dmax(c)} G^{(d-1) mod Q}_{t-d}(c) + duration_bias[d-1, c]

The ring `ring[c, q, 0:2K]` holds G in Q rotated copies (copy q, slot s: residue
(q - s - 1) mod Q), each slot written twice (s mod K and s mod K + K), so that boundary
t reads copy t mod Q over the contiguous window [t mod K, t mod K + K), ordered
d = K..1. `allowed` costs nothing: lo[c] is the earliest start a segment of c ending at
t may have (one past the last disallowed position), so dmax(c) = min(K, t - lo[c]).

Fully duration-dependent form (Q >= K), O(L K C^2): rings of alpha_s (slot-major,
(2K, C)) and P_s ((C, 2K)); the first segment (s = 0) takes start[c] in place of a
predecessor.

Prefix sums restart at every chunk of n boundaries; the opening terms in the ring are
then rebased by the chunk's sum. The forward pass keeps the ring at every chunk start
(the checkpoints); the backward pass walks the chunks from the end, recomputes each
chunk's alphas and opening terms from its checkpoint, and runs the beta recursion with a
ring of closing terms h_t = A_t + beta_t (beta_L = end), accumulating the gradients
(reference.py's module docstring derives them). Nothing is O(T K C).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

NEG = -np.inf


# ------------------------------------------------------------------ small helpers


@njit(cache=True)
def _lse_add(a, b):
    """log(exp(a) + exp(b))."""
    if a == NEG:
        return b
    if b == NEG:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True)
def _gammas(alpha, trT, gam):
    """gam[r, c] = lse_c' alpha[c'] + trT[r, c, c'] (trT is transition[r] transposed)."""
    Q, C = gam.shape
    for r in range(Q):
        for c in range(C):
            m = NEG
            for k in range(C):
                v = alpha[k] + trT[r, c, k]
                if v > m:
                    m = v
            if m == NEG:
                gam[r, c] = NEG
                continue
            s = 0.0
            for k in range(C):
                s += math.exp(alpha[k] + trT[r, c, k] - m)
            gam[r, c] = m + math.log(s)


@njit(cache=True)
def _gammas_max(alpha, trT, gam, arg):
    """Max-plus `_gammas`, with the best predecessor in arg[r, c]."""
    Q, C = gam.shape
    for r in range(Q):
        for c in range(C):
            m = NEG
            best = 0
            for k in range(C):
                v = alpha[k] + trT[r, c, k]
                if v > m:
                    m = v
                    best = k
            gam[r, c] = m
            arg[r, c] = best


@njit(cache=True)
def _push_ring(ring, gam, P, j, t, K):
    """Write G^r_t = gam[r] + P into slot j of every rotated copy."""
    C, Q = ring.shape[0], ring.shape[1]
    for c in range(C):
        for q in range(Q):
            r = (q - t - 1) % Q
            v = gam[r, c] + P[c]
            ring[c, q, j] = v
            ring[c, q, j + K] = v


@njit(cache=True)
def _window_lse(row, db, j, K, dmax):
    """lse_{d=1..dmax} row[j + K - d] + db[K - d]."""
    m = NEG
    for i in range(K - dmax, K):
        v = row[j + i] + db[i]
        if v > m:
            m = v
    if m == NEG:
        return NEG
    s = 0.0
    for i in range(K - dmax, K):
        s += math.exp(row[j + i] + db[i] - m)
    return m + math.log(s)


@njit(cache=True)
def _advance(f, alw, has_alw, S, lo, t):
    """Move the prefix sums and the earliest allowed starts over position t - 1."""
    C = S.shape[0]
    for c in range(C):
        S[c] += f[t - 1, c]
    if has_alw:
        for c in range(C):
            if not alw[t - 1, c]:
                lo[c] = t


@njit(cache=True)
def _terms(ps, pe, has_ps, has_pe, S, t, L, A, P):
    """A_t and P_t for the current chunk-relative prefix sums S."""
    C = S.shape[0]
    for c in range(C):
        A[c] = S[c] + (pe[t - 1, c] if has_pe and t > 0 else 0.0)
        P[c] = (ps[t, c] if has_ps and t < L else 0.0) - S[c]


# ------------------------------------------------------- factorised: forward pass


@njit(cache=True)
def _fac_step(ring, db_rev, lo, A, t, K, alpha):
    """alpha_t (t >= 1) from the ring."""
    C, Q = ring.shape[0], ring.shape[1]
    j = t % K
    q = t % Q
    for c in range(C):
        dmax = min(K, t - lo[c])
        if dmax <= 0:
            alpha[c] = NEG
        else:
            alpha[c] = A[c] + _window_lse(ring[c, q], db_rev[c], j, K, dmax)


@njit(cache=True)
def _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, db_rev, start, n,
             ring, lo, S, t0, t1, alphas, opens, Ss):
    """Boundaries [t0, t1) of one chunk from its restored state (ring, lo, S = 0).
    Stores alpha_t, G^r_t and S[t] at row t - t0 of alphas, opens, Ss when those have
    rows (the backward pass); returns alpha at the last boundary processed."""
    C, Q, K2 = ring.shape
    K = K2 // 2
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    gam = np.empty((Q, C))
    keep = alphas.shape[0] > 0
    for t in range(t0, t1):
        if t > t0:
            _advance(f, alw, has_alw, S, lo, t)
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            _fac_step(ring, db_rev, lo, A, t, K, alpha)
        if keep:
            i = t - t0
            for c in range(C):
                alphas[i, c] = alpha[c]
                Ss[i, c] = S[c]
        if t == L:
            break
        if t == 0:
            for r in range(Q):
                for c in range(C):
                    gam[r, c] = start[c]
        else:
            _gammas(alpha, trT, gam)
        _push_ring(ring, gam, P, t % K, t, K)
        if keep:
            for r in range(Q):
                for c in range(C):
                    opens[t - t0, r, c] = gam[r, c] + P[c]
    return alpha


@njit(cache=True)
def _fac_forward_seq(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, db_rev, start, end,
                     n, ck_ring, ck_lo, alpha_end):
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    ring = np.full((C, Q, 2 * K), NEG)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    none = np.empty((0, C))
    none3 = np.empty((0, Q, C))
    alpha = np.full(C, NEG)
    for k in range((L + n) // n):  # chunks of boundaries [k n, min(k n + n, L + 1))
        t0 = k * n
        t1 = min(t0 + n, L + 1)
        if t0 > 0:
            _advance(f, alw, has_alw, S, lo, t0)
            for c in range(C):  # rebase the opening terms to S[t0] = 0
                for q in range(Q):
                    for i in range(2 * K):
                        ring[c, q, i] += S[c]
                S[c] = 0.0
        ck_ring[k] = ring[:, :, :K]
        ck_lo[k] = lo
        alpha = _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, db_rev, start, n,
                         ring, lo, S, t0, t1, none, none3, none)
    z = NEG
    for c in range(C):
        alpha_end[c] = alpha[c]
        z = _lse_add(z, alpha[c] + end[c])
    return z


@njit(parallel=True, cache=True)
def fac_forward(f, ps, pe, alw, has_ps, has_pe, has_alw, lengths, trT, db_rev, start, end,
                n, ck_ring, ck_lo, alpha_end, log_z):
    for b in prange(f.shape[0]):
        log_z[b] = _fac_forward_seq(f[b], ps[b % ps.shape[0]], pe[b % pe.shape[0]],
                                    alw[b % alw.shape[0]], has_ps, has_pe, has_alw,
                                    lengths[b], trT, db_rev, start, end, n, ck_ring[b],
                                    ck_lo[b], alpha_end[b])


# ------------------------------------------------------ factorised: backward pass


@njit(cache=True)
def _fac_backward_seq(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr, trT, db_rev, db_t,
                      start, end, n, ck_ring, ck_lo, alpha_end, z, w,
                      g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end):
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    for c in range(C):
        g_end[c] = w * math.exp(alpha_end[c] + end[c] - z)
    ring = np.empty((C, Q, 2 * K))
    hring = np.full((C, 2 * K), NEG)  # h_{s+d}, d = 1..K at [(s+1) mod K, ... + K)
    lo = np.empty(C, np.int64)
    hi = np.full(C, L, np.int64)  # the first disallowed position >= s, per label
    S = np.zeros(C)
    alphas = np.empty((n, C))
    opens = np.empty((n, Q, C))
    Ss = np.empty((n, C))
    beta = np.empty(C)
    bg = np.empty((Q, C))
    tot = np.empty(Q)
    fac = np.empty(Q)
    mr = np.empty(Q)
    P = np.empty(C)
    n_chunks = (L + n) // n
    for k in range(n_chunks - 1, -1, -1):
        t0 = k * n
        t1 = min(t0 + n, L + 1)
        for c in range(C):
            for q in range(Q):
                for i in range(K):
                    ring[c, q, i] = ck_ring[k, c, q, i]
                    ring[c, q, i + K] = ck_ring[k, c, q, i]
            lo[c] = ck_lo[k, c]
            S[c] = 0.0
        _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, db_rev, start, n,
                 ring, lo, S, t0, t1, alphas, opens, Ss)
        if t1 <= L:  # rebase the closing terms from S[t1] = 0 to S[t0] = 0
            for c in range(C):
                D = Ss[t1 - 1 - t0, c] + f[t1 - 1, c]
                for i in range(2 * K):
                    hring[c, i] += D
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
                for c in range(C):
                    P[c] = (ps[s, c] if has_ps else 0.0) - Ss[i, c]
                j = (s + 1) % K
                for c in range(C):
                    # beta_gamma^r_s(c) = P_s(c) + lse_{d = r+1 mod Q} db + h_{s+d}, and
                    # the marginals of the segments (s, d, c) from the same exponentials
                    dmax = min(K, hi[c] - s)
                    for r in range(Q):
                        mr[r] = NEG
                    r = 0
                    for d in range(1, dmax + 1):
                        v = hring[c, j + d - 1] + db_t[c, d - 1]
                        if v > mr[r]:
                            mr[r] = v
                        r += 1
                        if r == Q:
                            r = 0
                    for r in range(Q):
                        tot[r] = 0.0
                        fac[r] = 0.0 if mr[r] == NEG else w * math.exp(opens[i, r, c] + mr[r] - z)
                    r = 0
                    for d in range(1, dmax + 1):
                        if mr[r] != NEG:
                            e = math.exp(hring[c, j + d - 1] + db_t[c, d - 1] - mr[r])
                            tot[r] += e
                            g_db[c, d - 1] += e * fac[r]
                        r += 1
                        if r == Q:
                            r = 0
                    st = 0.0
                    for r in range(Q):
                        st += tot[r] * fac[r]
                        bg[r, c] = P[c] + mr[r] + math.log(tot[r]) if tot[r] > 0.0 else NEG
                    g_ps[s, c] = st
                if s == 0:
                    for c in range(C):
                        g_start[c] = g_ps[0, c]
                    break
                # beta_s(c') = lse_{r, c} transition[r, c', c] + beta_gamma^r_s(c), and the
                # marginals of the transitions at s
                for c0 in range(C):
                    m = NEG
                    for r in range(Q):
                        for c in range(C):
                            v = tr[r, c0, c] + bg[r, c]
                            if v > m:
                                m = v
                    if m == NEG:
                        beta[c0] = NEG
                        continue
                    ft = w * math.exp(alphas[i, c0] + m - z)
                    sm = 0.0
                    for r in range(Q):
                        for c in range(C):
                            e = math.exp(tr[r, c0, c] + bg[r, c] - m)
                            sm += e
                            g_tr[r, c0, c] += e * ft
                    beta[c0] = m + math.log(sm)
            jj = s % K
            for c in range(C):
                a = alphas[i, c]
                g_pe[s - 1, c] = w * math.exp(a + beta[c] - z)
                h = Ss[i, c] + (pe[s - 1, c] if has_pe else 0.0) + beta[c]
                hring[c, jj] = h
                hring[c, jj + K] = h
    _label_marginals(g_ps, g_pe, g_sc, L)


@njit(cache=True)
def _label_marginals(g_ps, g_pe, g_sc, L):
    """d log Z / d scores[u] = segments started at or before u minus ended before u."""
    C = g_ps.shape[1]
    for c in range(C):
        run = 0.0
        for u in range(L):
            run += g_ps[u, c]
            g_sc[u, c] = run
            run -= g_pe[u, c]


@njit(parallel=True, cache=True)
def fac_backward(f, ps, pe, alw, has_ps, has_pe, has_alw, lengths, tr, trT, db_rev, db_t,
                 start, end, n, ck_ring, ck_lo, alpha_end, log_z, w,
                 g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end):
    for b in prange(f.shape[0]):
        if log_z[b] == NEG or w[b] == 0.0:
            continue
        _fac_backward_seq(f[b], ps[b % ps.shape[0]], pe[b % pe.shape[0]],
                          alw[b % alw.shape[0]], has_ps, has_pe, has_alw, lengths[b], tr, trT,
                          db_rev, db_t, start, end, n, ck_ring[b], ck_lo[b], alpha_end[b],
                          log_z[b], w[b], g_ps[b], g_pe[b], g_sc[b], g_tr[b], g_db[b],
                          g_start[b], g_end[b])


# ------------------------------------------------------------ factorised: Viterbi


@njit(cache=True)
def _fac_viterbi_seq(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, db_rev, start, end,
                     n, bp_d, bp_c, labels, seg_start):
    C, Q = bp_c.shape[2], bp_c.shape[1]
    K = db_rev.shape[1]
    ring = np.full((C, Q, 2 * K), NEG)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    gam = np.empty((Q, C))
    arg = np.zeros((Q, C), np.int64)
    for t in range(L + 1):
        if t > 0:
            _advance(f, alw, has_alw, S, lo, t)
            if t % n == 0:
                for c in range(C):
                    for q in range(Q):
                        for i in range(2 * K):
                            ring[c, q, i] += S[c]
                    S[c] = 0.0
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j = t % K
            q = t % Q
            for c in range(C):
                dmax = min(K, t - lo[c])
                best = NEG
                bd = 0
                row = ring[c, q]
                for i in range(K - dmax, K):
                    v = row[j + i] + db_rev[c, i]
                    if v > best:
                        best = v
                        bd = K - i
                alpha[c] = A[c] + best
                bp_d[t, c] = bd
        if t == L:
            break
        if t == 0:
            for r in range(Q):
                for c in range(C):
                    gam[r, c] = start[c]
        else:
            _gammas_max(alpha, trT, gam, arg)
            for r in range(Q):
                for c in range(C):
                    bp_c[t, r, c] = arg[r, c]
        _push_ring(ring, gam, P, t % K, t, K)
    return _traceback(alpha, end, bp_d, bp_c, L, Q, labels, seg_start, False)


@njit(cache=True)
def _traceback(alpha, end, bp_d, bp_c, L, Q, labels, seg_start, dd):
    """Best final label, then back along the duration and predecessor pointers."""
    C = alpha.shape[0]
    best = NEG
    c = 0
    for k in range(C):
        v = alpha[k] + end[k]
        if v > best:
            best = v
            c = k
    if best == NEG:
        return best
    t = L
    while t > 0:
        d = np.int64(bp_d[t, c])
        s = t - d
        for u in range(s, t):
            labels[u] = c
        seg_start[s] = True
        if s > 0:
            c = np.int64(bp_c[t, 0, c]) if dd else np.int64(bp_c[s, (d - 1) % Q, c])
        t = s
    return best


@njit(parallel=True, cache=True)
def fac_viterbi(f, ps, pe, alw, has_ps, has_pe, has_alw, lengths, trT, db_rev, start, end,
                n, bp_d, bp_c, labels, seg_start, score):
    for b in prange(f.shape[0]):
        score[b] = _fac_viterbi_seq(f[b], ps[b % ps.shape[0]], pe[b % pe.shape[0]],
                                    alw[b % alw.shape[0]], has_ps, has_pe, has_alw,
                                    lengths[b], trT, db_rev, start, end, n, bp_d[b], bp_c[b],
                                    labels[b], seg_start[b])


# -------------------------------------------- fully duration-dependent: forward pass


@njit(cache=True)
def _dd_step(aring, pring, tr_rev, db_rev, start, lo, A, t, K, alpha):
    """alpha_t (t >= 1): lse over (d, c') of alpha_{t-d}(c') + transition[d-1, c', c]
    + P_{t-d}(c) + duration_bias[d-1, c], and the first segment's start term."""
    C = alpha.shape[0]
    j = t % K
    for c in range(C):
        dmax = min(K, t - lo[c])
        m = NEG
        v0 = NEG
        if dmax >= t:  # a first segment [0, t) of label c
            v0 = start[c] + pring[c, j + K - t] + db_rev[c, K - t]
            m = v0
        for i in range(K - dmax, K):
            base = pring[c, j + i] + db_rev[c, i]
            for k in range(C):
                v = aring[j + i, k] + tr_rev[c, i, k] + base
                if v > m:
                    m = v
        if m == NEG:
            alpha[c] = NEG
            continue
        s = math.exp(v0 - m)
        for i in range(K - dmax, K):
            base = pring[c, j + i] + db_rev[c, i] - m
            for k in range(C):
                s += math.exp(aring[j + i, k] + tr_rev[c, i, k] + base)
        alpha[c] = A[c] + m + math.log(s)


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
            _dd_step(aring, pring, tr_rev, db_rev, start, lo, A, t, K, alpha)
        if keep:
            for c in range(C):
                alphas[t - t0, c] = alpha[c]
                Ss[t - t0, c] = S[c]
        if t == L:
            break
        _dd_push(aring, pring, alpha, P, t, K)
    return alpha


@njit(cache=True)
def _dd_forward_seq(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start, end,
                    n, ck_a, ck_p, ck_lo, alpha_end):
    K, C = ck_a.shape[1], ck_a.shape[2]
    aring = np.full((2 * K, C), NEG)
    pring = np.full((C, 2 * K), NEG)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    none = np.empty((0, C))
    alpha = np.full(C, NEG)
    for k in range((L + n) // n):
        t0 = k * n
        t1 = min(t0 + n, L + 1)
        if t0 > 0:
            _advance(f, alw, has_alw, S, lo, t0)
            for c in range(C):
                for i in range(2 * K):
                    pring[c, i] += S[c]
                S[c] = 0.0
        ck_a[k] = aring[:K]
        ck_p[k] = pring[:, :K]
        ck_lo[k] = lo
        alpha = _dd_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start,
                        aring, pring, lo, S, t0, t1, none, none)
    z = NEG
    for c in range(C):
        alpha_end[c] = alpha[c]
        z = _lse_add(z, alpha[c] + end[c])
    return z


@njit(parallel=True, cache=True)
def dd_forward(f, ps, pe, alw, has_ps, has_pe, has_alw, lengths, tr_rev, db_rev, start, end,
               n, ck_a, ck_p, ck_lo, alpha_end, log_z):
    for b in prange(f.shape[0]):
        log_z[b] = _dd_forward_seq(f[b], ps[b % ps.shape[0]], pe[b % pe.shape[0]],
                                   alw[b % alw.shape[0]], has_ps, has_pe, has_alw, lengths[b],
                                   tr_rev, db_rev, start, end, n, ck_a[b], ck_p[b], ck_lo[b],
                                   alpha_end[b])


# ------------------------------------------- fully duration-dependent: backward pass


@njit(cache=True)
def _dd_backward_seq(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr, tr_rev, db, db_rev,
                     start, end, n, ck_a, ck_p, ck_lo, alpha_end, z, w,
                     g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end):
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
    u = np.empty((K, C))
    seg = np.empty((K, C))
    P = np.empty(C)
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
            S[c] = 0.0
        _dd_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start,
                aring, pring, lo, S, t0, t1, alphas, Ss)
        if t1 <= L:
            for c in range(C):
                D = Ss[t1 - 1 - t0, c] + f[t1 - 1, c]
                for i in range(2 * K):
                    hring[i, c] += D
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
                for c in range(C):
                    P[c] = (ps[s, c] if has_ps else 0.0) - Ss[i, c]
                for d in range(dtop):
                    for c in range(C):
                        if d < hi[c] - s:
                            u[d, c] = P[c] + db[d, c] + hring[j + d, c]
                        else:
                            u[d, c] = NEG
                        seg[d, c] = 0.0
                if s == 0:
                    for d in range(dtop):
                        for c in range(C):
                            seg[d, c] = w * math.exp(start[c] + u[d, c] - z)
                else:
                    for c0 in range(C):
                        m = NEG
                        for d in range(dtop):
                            for c in range(C):
                                v = tr[d, c0, c] + u[d, c]
                                if v > m:
                                    m = v
                        if m == NEG:
                            beta[c0] = NEG
                            continue
                        ft = w * math.exp(alphas[i, c0] + m - z)
                        sm = 0.0
                        for d in range(dtop):
                            for c in range(C):
                                e = math.exp(tr[d, c0, c] + u[d, c] - m)
                                sm += e
                                g_tr[d, c0, c] += e * ft
                                seg[d, c] += e * ft
                        beta[c0] = m + math.log(sm)
                for c in range(C):
                    st = 0.0
                    for d in range(dtop):
                        st += seg[d, c]
                        g_db[d, c] += seg[d, c]
                    g_ps[s, c] = st
                if s == 0:
                    for c in range(C):
                        g_start[c] = g_ps[0, c]
                    break
            jj = s % K
            for c in range(C):
                g_pe[s - 1, c] = w * math.exp(alphas[i, c] + beta[c] - z)
                h = Ss[i, c] + (pe[s - 1, c] if has_pe else 0.0) + beta[c]
                hring[jj, c] = h
                hring[jj + K, c] = h
    _label_marginals(g_ps, g_pe, g_sc, L)


@njit(parallel=True, cache=True)
def dd_backward(f, ps, pe, alw, has_ps, has_pe, has_alw, lengths, tr, tr_rev, db, db_rev,
                start, end, n, ck_a, ck_p, ck_lo, alpha_end, log_z, w,
                g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end):
    for b in prange(f.shape[0]):
        if log_z[b] == NEG or w[b] == 0.0:
            continue
        _dd_backward_seq(f[b], ps[b % ps.shape[0]], pe[b % pe.shape[0]],
                         alw[b % alw.shape[0]], has_ps, has_pe, has_alw, lengths[b], tr,
                         tr_rev, db, db_rev, start, end, n, ck_a[b], ck_p[b], ck_lo[b],
                         alpha_end[b], log_z[b], w[b], g_ps[b], g_pe[b], g_sc[b], g_tr[b],
                         g_db[b], g_start[b], g_end[b])


# ------------------------------------------------ fully duration-dependent: Viterbi


@njit(cache=True)
def _dd_viterbi_seq(f, ps, pe, alw, has_ps, has_pe, has_alw, L, tr_rev, db_rev, start, end,
                    n, bp_d, bp_c, labels, seg_start):
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
                for c in range(C):
                    for i in range(2 * K):
                        pring[c, i] += S[c]
                    S[c] = 0.0
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j = t % K
            for c in range(C):
                dmax = min(K, t - lo[c])
                m = NEG
                bd = 0
                bc = 0
                if dmax >= t:
                    m = start[c] + pring[c, j + K - t] + db_rev[c, K - t]
                    bd = t
                for i in range(K - dmax, K):
                    base = pring[c, j + i] + db_rev[c, i]
                    for k in range(C):
                        v = aring[j + i, k] + tr_rev[c, i, k] + base
                        if v > m:
                            m = v
                            bd = K - i
                            bc = k
                alpha[c] = A[c] + m
                bp_d[t, c] = bd
                bp_c[t, 0, c] = bc
        if t == L:
            break
        _dd_push(aring, pring, alpha, P, t, K)
    return _traceback(alpha, end, bp_d, bp_c, L, 1, labels, seg_start, True)


@njit(parallel=True, cache=True)
def dd_viterbi(f, ps, pe, alw, has_ps, has_pe, has_alw, lengths, tr_rev, db_rev, start, end,
               n, bp_d, bp_c, labels, seg_start, score):
    for b in prange(f.shape[0]):
        score[b] = _dd_viterbi_seq(f[b], ps[b % ps.shape[0]], pe[b % pe.shape[0]],
                                   alw[b % alw.shape[0]], has_ps, has_pe, has_alw, lengths[b],
                                   tr_rev, db_rev, start, end, n, bp_d[b], bp_c[b], labels[b],
                                   seg_start[b])
