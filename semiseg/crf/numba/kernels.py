"""The numba kernels of the compiled CPU backend (the package semiseg.crf.numba is the torch-facing side).

One compiled function per pass, each over one sequence, in float64; they release the
GIL, and the package runs the sequences of a batch on a thread pool. Notation as in
reference.py: boundary t = 0..L sits between positions; with chunk-relative prefix sums S,

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

Speed (static/periodic): the window sums over K durations and the sums over labels in
the transitions run in linear space. Each label keeps its ring also as exp(ring - R[c])
(R[c] a per-label reference, moved up whenever a new entry passes it by more than
HEADROOM, and shifted by the prefix-sum rebase), duration_bias and transition as
exp(. - their maximum); a sum is then a dot product, and its log plus the references is
the logsumexp. A term lost to underflow there is below exp(HEADROOM - 708) of the
reference, negligible against any sum >= TINY = 1e-250; a sum below TINY (a label whose
only live terms sit far below its reference, e.g. after -inf durations or a long
disallowed stretch) is recomputed exactly in log space. Every log-space logsumexp is a
maximum pass and a sum of `fexp(v - max)`, a polynomial exp that LLVM vectorises
(math.exp is a scalar libm call). The duration-dependent kernels are all log space.
"""

from __future__ import annotations

import math
import os

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import config as _numba_config
from numba.core import types
from numba.extending import intrinsic


def cache_dir() -> str:
    """Where the compiled kernels are cached: $NUMBA_CACHE_DIR when set (numba's own
    setting), else $SEMISEG_CACHE_DIR/numba, else $XDG_CACHE_HOME/semiseg/numba (default
    ~/.cache/semiseg/numba). Never inside the installed package: numba's default there
    (__pycache__ next to this file) is not in pip's record of the install, so an
    uninstall left a semiseg/ folder behind that shadowed a later editable install."""
    if _numba_config.CACHE_DIR:
        return _numba_config.CACHE_DIR
    if os.environ.get("SEMISEG_CACHE_DIR"):
        return os.path.join(os.environ["SEMISEG_CACHE_DIR"], "numba")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "semiseg", "numba")


# numba picks a function's cache folder when @njit(cache=True) decorates it, so the
# setting is held only while this module defines its kernels (restored at its end: other
# numba users in the process keep their own). A folder that cannot be written makes
# numba fall back to its usual places.
_USER_CACHE_DIR = _numba_config.CACHE_DIR
_numba_config.CACHE_DIR = cache_dir()

NEG = -np.inf
# fast-math flags of the reduction loops: reassociation lets LLVM vectorise sums and
# maxima (fixed order for a given build, so still deterministic); never "ninf": -inf
# is a value here
FM = {"nnan", "nsz", "reassoc", "contract"}
# linear-space window sums: ring entries are kept within exp(HEADROOM) of their label's
# reference, and a sum below TINY falls back to the exact log-space one (a term lost to
# underflow is below exp(HEADROOM - 708), negligible against TINY = exp(-575))
HEADROOM = 64.0
TINY = 1e-250


# ------------------------------------------------------------------ exp and friends


@intrinsic
def _bits(typingctx, x):
    """The int64 bit pattern of a float64."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, x):
    """The float64 with a given int64 bit pattern."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


_LOG2E = 1.4426950408889634
_ROUND = 6755399441055744.0  # 1.5 * 2^52: adding it rounds to an integer in the low bits
_LN2_HI = 0.6931471804855391  # ln 2 in two parts; n * _LN2_HI is exact for |n| < 2^20
_LN2_LO = 7.440617110012397e-11


@njit(cache=True, fastmath={"contract"})
def fexp(x):
    """exp(x) to about 3e-16 relative for -708 <= x <= 709, and 0 below -708 (-inf too).

    x = n ln 2 + r with |r| <= ln(2) / 2: exp(r) by its Taylor polynomial of degree 12,
    2^n by writing n + 1023 into the exponent bits. Branch-free, so loops over it
    vectorise. (No reassociation here: it would undo the rounding trick.)
    """
    xc = max(x, -708.0)
    t = xc * _LOG2E + _ROUND
    nf = t - _ROUND
    r = xc - nf * _LN2_HI - nf * _LN2_LO
    p = 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    scale = _from_bits((_bits(t) + 1023) << 52)  # 2^n (the low 12 bits of t hold n)
    return p * scale if x >= -708.0 else 0.0


@njit(cache=True, fastmath=FM)
def _lse2(x, ox, y, oy, n):
    """lse_{i < n} x[ox + i] + y[oy + i] (-inf for n = 0)."""
    m = NEG
    for i in range(n):
        m = max(m, x[ox + i] + y[oy + i])
    if m == NEG:
        return NEG
    s = 0.0
    for i in range(n):
        s += fexp(x[ox + i] + y[oy + i] - m)
    return m + math.log(s)


@njit(cache=True, fastmath=FM)
def _argmax2(x, ox, y, oy, n):
    """(max, first argmax) over i < n of x[ox + i] + y[oy + i]; (-inf, 0) for n = 0.
    One pass (a strict > keeps the first of equal values): 1.5x faster for the Viterbi
    than a vectorised max followed by a search for it."""
    m = NEG
    idx = 0
    for i in range(n):
        v = x[ox + i] + y[oy + i]
        if v > m:
            m = v
            idx = i
    return m, idx


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


# ------------------------------------------------------------ per-boundary pieces


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


@njit(cache=True)
def _push_ring(ring, gam, P, j, t, K):
    """Write G^r_t = gam[r] + P into slot j of every rotated copy."""
    C, Q = ring.shape[0], ring.shape[1]
    for c in range(C):
        for q in range(Q):
            v = gam[(q - t - 1) % Q, c] + P[c]
            ring[c, q, j] = v
            ring[c, q, j + K] = v


@njit(cache=True)
def _rebase(ring, S):
    """ring[c, ...] += S[c], then S = 0 (a new chunk's prefix sums start at 0)."""
    C = S.shape[0]
    flat = ring.reshape(C, -1)
    for c in range(C):
        for i in range(flat.shape[1]):
            flat[c, i] += S[c]
        S[c] = 0.0


# ------------------------------------------------------- factorised: forward pass


@njit(cache=True, fastmath=FM)
def _dot(x, ox, y, oy, n):
    """sum_{i < n} x[ox + i] * y[oy + i]."""
    s = 0.0
    for i in range(n):
        s += x[ox + i] * y[oy + i]
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
def _lin_write(lring_c, R, c, v, idx):
    """Write exp(v - R[c]) at the flat positions idx of label c's linear ring, first
    moving R[c] up to v when v passes it by more than HEADROOM (rescaling the ring)."""
    if v > R[c] + HEADROOM:
        f = fexp(R[c] - v)
        for i in range(lring_c.shape[0]):
            lring_c[i] *= f
        R[c] = v
    e = fexp(v - R[c])
    for i in idx:
        lring_c[i] = e


@njit(cache=True)
def _gammas(alpha, trT, etrT, trm, ea, gam):
    """gam[r, c] = lse_c' alpha[c'] + transition[r, c', c], in linear space
    (etrT = exp(trT - trm), ea = exp(alpha - max alpha)) unless that sum is below TINY."""
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
            sm = _dot(ea, 0, etrT[r, c], 0, C)
            if sm >= TINY:
                gam[r, c] = am + trm[r, c] + math.log(sm)
            else:
                gam[r, c] = _lse2(alpha, 0, trT[r, c], 0, C)


@njit(cache=True)
def _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, etrT, trm, db_rev, edb_rev,
             dbm, start, ring, lring, R, lo, S, t0, t1, alphas, opens, Ss):
    """Boundaries [t0, t1) of one chunk from its restored state (ring, lring, R, lo,
    S = 0). Stores alpha_t, G^r_t and S[t] at row t - t0 of alphas, opens, Ss when those
    have rows (the backward pass); returns alpha at the last boundary processed.

    The window sums run in linear space: lring = exp(ring - R[c]) (entries at most
    exp(HEADROOM)), edb_rev = exp(db_rev - dbm[c]); where such a sum is below TINY the
    terms it lost to underflow might matter, and the exact log-space sum is used."""
    C, Q, K2 = ring.shape
    K = K2 // 2
    A = np.empty(C)
    P = np.empty(C)
    alpha = np.full(C, NEG)
    gam = np.empty((Q, C))
    keep = alphas.shape[0] > 0
    idx = np.empty(2, np.int64)
    ea = np.empty(C)
    for t in range(t0, t1):
        if t > t0:
            _advance(f, alw, has_alw, S, lo, t)
        _terms(ps, pe, has_ps, has_pe, S, t, L, A, P)
        if t > 0:
            j, q = t % K, t % Q
            for c in range(C):
                dmax = min(K, t - lo[c])  # the window: d = dmax..1 at [j + K - dmax, j + K)
                sm = _dot(lring[c, q], j + K - dmax, edb_rev[c], K - dmax, dmax)
                if sm >= TINY:
                    alpha[c] = A[c] + R[c] + dbm[c] + math.log(sm)
                else:
                    alpha[c] = A[c] + _lse2(ring[c, q], j + K - dmax, db_rev[c], K - dmax,
                                            dmax)
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
            _gammas(alpha, trT, etrT, trm, ea, gam)
        j = t % K
        for c in range(C):
            lr = lring[c].reshape(Q * K2)
            for q in range(Q):
                v = gam[(q - t - 1) % Q, c] + P[c]
                ring[c, q, j] = v
                ring[c, q, j + K] = v
                idx[0] = q * K2 + j
                idx[1] = q * K2 + j + K
                _lin_write(lr, R, c, v, idx)
        if keep:
            for r in range(Q):
                for c in range(C):
                    opens[t - t0, r, c] = gam[r, c] + P[c]
    return alpha


@njit(cache=True, nogil=True)
def fac_forward(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, etrT, trm, db_rev,
                edb_rev, dbm, start, end, n, ck_ring, ck_lo, alpha_end):
    """log Z of one sequence; fills the checkpoints and alpha_L."""
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    ring = np.full((C, Q, 2 * K), NEG)
    lring = np.zeros((C, Q, 2 * K))
    R = np.zeros(C)
    lo = np.zeros(C, np.int64)
    S = np.zeros(C)
    none = np.empty((0, C))
    alpha = np.full(C, NEG)
    for k in range((L + n) // n):  # chunks of boundaries [k n, min(k n + n, L + 1))
        t0 = k * n
        if t0 > 0:
            _advance(f, alw, has_alw, S, lo, t0)
            for c in range(C):
                R[c] += S[c]
            _rebase(ring, S)
        for c in range(C):
            ck_lo[k, c] = lo[c]
            for q in range(Q):
                for i in range(K):
                    ck_ring[k, c, q, i] = ring[c, q, i]
        alpha = _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, etrT, trm, db_rev,
                         edb_rev, dbm, start, ring, lring, R, lo, S, t0, min(t0 + n, L + 1), none,
                         none.reshape(0, 1, C), none)
    z = NEG
    for c in range(C):
        alpha_end[c] = alpha[c]
        z = _lse_add(z, alpha[c] + end[c])
    return z


# ------------------------------------------------------ factorised: backward pass


@njit(cache=True, fastmath=FM)
def _close_max(hr, j, dbt, r, dmax, Q):
    """max over d - 1 = r, r + Q, ... < dmax of h_{s+d} + duration_bias[d-1]."""
    m = NEG
    if Q == 1:
        for d0 in range(dmax):
            m = max(m, hr[j + d0] + dbt[d0])
    else:
        for d0 in range(r, dmax, Q):
            m = max(m, hr[j + d0] + dbt[d0])
    return m


@njit(cache=True, fastmath=FM)
def _close_sum(hr, j, dbt, gdb, r, dmax, Q, m, fr):
    """sum of exp(h_{s+d} + duration_bias[d-1] - m) over the durations of residue r, and
    gdb[d-1] += that exponential * fr (the segment marginals)."""
    tot = 0.0
    if Q == 1:
        for d0 in range(dmax):
            e = fexp(hr[j + d0] + dbt[d0] - m)
            tot += e
            gdb[d0] += e * fr
    else:
        for d0 in range(r, dmax, Q):
            e = fexp(hr[j + d0] + dbt[d0] - m)
            tot += e
            gdb[d0] += e * fr
    return tot


@njit(cache=True, fastmath=FM)
def _beta_and_transitions(trq, etrq, trqm, bg, eb, alphas_i, z, w, g_tr, beta, params):
    """beta_s(c') = lse_{r, c} transition[r, c', c] + beta_gamma^r_s(c), and (params) the
    transition marginals at s into g_tr[c', (r, c)] (trq is transition as (c', (r, c)),
    etrq = exp(trq - trqm)): in linear space, or exactly where that sum is below TINY."""
    C, QC = trq.shape
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
        sm = 0.0
        for k in range(QC):
            sm += etrq[c0, k] * eb[k]
        if sm >= TINY:
            beta[c0] = bm + trqm[c0] + math.log(sm)
            if params:
                # sum of these marginals = ft * sm <= w, so ft cannot overflow
                ft = w * fexp(alphas_i[c0] + trqm[c0] + bm - z)
                for k in range(QC):
                    g_tr[c0, k] += ft * (etrq[c0, k] * eb[k])
            continue
        m = NEG
        for k in range(QC):
            m = max(m, trq[c0, k] + bg[k])
        if m == NEG:
            beta[c0] = NEG
            continue
        ft = w * fexp(alphas_i[c0] + m - z)
        sm = 0.0
        for k in range(QC):
            e = fexp(trq[c0, k] + bg[k] - m)
            sm += e
            if params:
                g_tr[c0, k] += e * ft
        beta[c0] = m + math.log(sm)


@njit(cache=True, nogil=True)
def fac_backward(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trq, etrq, trqm, trT, etrT,
                 trm, db_rev, edb_rev, db_t, edb_t, dbm, start, end, n, ck_ring, ck_lo,
                 alpha_end, z, w,
                 g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end, params=True):
    """Gradients of w * log Z of one sequence (g_tr as (c', (r, c)), g_db as (c, d-1));
    params False: the duration-bias and transition sums are left out (g_db and g_tr are
    then incomplete, for the caller to drop; the posteriors need only the per-position
    gradients, which are the same bits either way)."""
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    for c in range(C):
        g_end[c] = w * math.exp(alpha_end[c] + end[c] - z)
    ring = np.empty((C, Q, 2 * K))
    lring = np.empty((C, Q, 2 * K))
    R = np.empty(C)
    hring = np.full((C, 2 * K), NEG)  # h_{s+d}, d = 1..K at [(s+1) mod K, ... + K)
    hlin = np.zeros((C, 2 * K))  # exp(hring - Rh[c]), like the forward's linear ring
    Rh = np.zeros(C)
    prod = np.empty(K)
    fv = np.empty(K)  # per duration: the factor of its residue
    tot = np.empty(Q)
    fr = np.empty(Q)
    idx = np.empty(2, np.int64)
    lo = np.empty(C, np.int64)
    hi = np.full(C, L, np.int64)  # the first disallowed position >= s, per label
    S = np.zeros(C)
    alphas = np.empty((n, C))
    opens = np.empty((n, Q, C))
    Ss = np.empty((n, C))
    beta = np.empty(C)
    bg = np.empty(Q * C)  # beta_gamma^r_s(c) at r * C + c
    eb = np.empty(Q * C)
    for k in range((L + n) // n - 1, -1, -1):
        t0 = k * n
        t1 = min(t0 + n, L + 1)
        for c in range(C):
            for q in range(Q):
                for i in range(K):
                    ring[c, q, i] = ck_ring[k, c, q, i]
                    ring[c, q, i + K] = ck_ring[k, c, q, i]
            lo[c] = ck_lo[k, c]
        _relinearise(ring, lring, R)
        _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, etrT, trm, db_rev, edb_rev,
                 dbm, start, ring, lring, R, lo, S, t0, t1, alphas, opens, Ss)
        if t1 <= L:  # rebase the closing terms from S[t1] = 0 to S[t0] = 0
            for c in range(C):
                S[c] = Ss[t1 - 1 - t0, c] + f[t1 - 1, c]
                Rh[c] += S[c]
            _rebase(hring, S)
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
                for c in range(C):
                    # beta_gamma^r_s(c) = P_s(c) + lse_{d-1 = r mod Q} db + h_{s+d}, and
                    # the marginals of the segments (s, d, c) from the same exponentials
                    P = (ps[s, c] if has_ps else 0.0) - Ss[i, c]
                    dmax = min(K, hi[c] - s)
                    st = 0.0
                    # linear space first: prod[d-1] = exp(h_{s+d} + db[d-1] - Rh - dbm)
                    for d0 in range(dmax):
                        prod[d0] = hlin[c, j + d0] * edb_t[c, d0]
                    if Q == 1:
                        tot[0] = _sum(prod, dmax)
                    else:
                        for r in range(Q):
                            acc = 0.0
                            for d0 in range(r, dmax, Q):
                                acc += prod[d0]
                            tot[r] = acc
                    for r in range(Q):
                        if tot[r] >= TINY:
                            # sum_d marginal = fr * tot <= w, so fr cannot overflow
                            fr[r] = w * fexp(opens[i, r, c] + Rh[c] + dbm[c] - z)
                            bg[r * C + c] = P + Rh[c] + dbm[c] + math.log(tot[r])
                            st += tot[r] * fr[r]
                            continue
                        # exact log space for this residue
                        fr[r] = 0.0
                        m = _close_max(hring[c], j, db_t[c], r, dmax, Q)
                        if m == NEG:
                            bg[r * C + c] = NEG
                            continue
                        f_r = w * fexp(opens[i, r, c] + m - z)
                        tr_ = _close_sum(hring[c], j, db_t[c], g_db[c], r, dmax, Q, m, f_r)
                        bg[r * C + c] = P + m + math.log(tr_)
                        st += tr_ * f_r
                    if params and Q == 1:
                        _axpy(g_db[c], prod, fr[0], dmax)
                    elif params:
                        r = 0
                        for d0 in range(dmax):
                            fv[d0] = fr[r]
                            r = r + 1 if r + 1 < Q else 0
                        _axpy_v(g_db[c], prod, fv, dmax)
                    g_ps[s, c] = st
                if s == 0:
                    for c in range(C):
                        g_start[c] = g_ps[0, c]
                    break
                _beta_and_transitions(trq, etrq, trqm, bg, eb, alphas[i], z, w, g_tr, beta,
                                      params)
            jj = s % K
            idx[0] = jj
            idx[1] = jj + K
            for c in range(C):
                g_pe[s - 1, c] = w * fexp(alphas[i, c] + beta[c] - z)
                h = Ss[i, c] + (pe[s - 1, c] if has_pe else 0.0) + beta[c]
                hring[c, jj] = h
                hring[c, jj + K] = h
                _lin_write(hlin[c], Rh, c, h, idx)
    _label_marginals(g_ps, g_pe, g_sc, L)


@njit(cache=True, fastmath=FM)
def _sum(x, n):
    s = 0.0
    for i in range(n):
        s += x[i]
    return s


@njit(cache=True, fastmath=FM)
def _axpy(y, x, a, n):
    """y[:n] += a * x[:n]."""
    for i in range(n):
        y[i] += a * x[i]


@njit(cache=True, fastmath=FM)
def _axpy_v(y, x, a, n):
    """y[:n] += a[:n] * x[:n]."""
    for i in range(n):
        y[i] += a[i] * x[i]


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


# ------------------------------------------------------------ factorised: Viterbi


@njit(cache=True, nogil=True)
def fac_viterbi(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trT, db_rev, start, end,
                n, bp_d, bp_c, labels, seg_start):
    """Best score of one sequence; fills its labels and segment starts."""
    C, Q = bp_c.shape[2], bp_c.shape[1]
    K = db_rev.shape[1]
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
            for c in range(C):
                dmax = min(K, t - lo[c])
                m, i = _argmax2(ring[c, q], j + K - dmax, db_rev[c], K - dmax, dmax)
                alpha[c] = A[c] + m
                bp_d[t, c] = dmax - i
        if t == L:
            break
        for r in range(Q):
            for c in range(C):
                if t == 0:
                    gam[r, c] = start[c]
                else:
                    m, i = _argmax2(alpha, 0, trT[r, c], 0, C)
                    gam[r, c] = m
                    bp_c[t, r, c] = i
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


# -------------------------------------------- fully duration-dependent: forward pass


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


# ------------------------------------------- fully duration-dependent: backward pass


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


# ------------------------------------------------ fully duration-dependent: Viterbi


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


_numba_config.CACHE_DIR = _USER_CACHE_DIR
