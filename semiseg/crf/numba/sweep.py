"""The backward pass of both numba forms on one skeleton (core.py's docstring has the
recursions): `_sweep` walks the chunks from the end, recomputes each chunk's forward
values from its checkpoint, rebases the closing terms, and runs the beta recursion
boundary by boundary, writing the end marginals and the ring of closing terms
h_t = A_t + beta_t; what differs between the forms is four steps, each a function of
the form's state:

    _recompute(st, ...)  the chunk's checkpoint into the rings, its alphas (and opening
                         terms) recomputed (fac.py's _fac_run, dd.py's _dd_run)
    _rebase(st, ...)     the closing terms moved from S[t1] = 0 to S[t0] = 0
    _close(st, ...)      at boundary s: the start marginals (proj_start's gradient), the
                         duration-bias and transition sums and beta_s (s > 0)
    _store_h(st, ...)    h_s into the ring of closing terms

The state is a named tuple (_FacState, _DdState) of the form's inputs and work arrays;
numba compiles `_sweep` once per state type and picks each step by that type (the
@overload below), so the skeleton is one function and each compiled sweep is the
form's own code, cached like every kernel. fac_backward and dd_backward build the state
and run the sweep; the arithmetic and its order are those of the two passes as written
before they shared it (the same bits).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.extending import overload

from .core import (
    NEG,
    TINY,
    _axpy,
    _axpy_v,
    _label_marginals,
    _rebase,
    _sum,
    fexp,
    restore_cache_dir,
    use_cache_dir,
)
from .dd import _dd_run, _dd_segments
from .fac import _beta_and_transitions, _close_max, _close_sum, _fac_run, _lin_write, _relinearise

_USER_CACHE_DIR = use_cache_dir()

# the factorised form: rings of opening terms (C, Q, 2K) and of closing terms (C, 2K), each
# with its linear copy and per-label references; per-chunk alphas, opening terms, sums
_FacState = namedtuple("_FacState", [
    "ring", "lring", "R", "hring", "hlin", "Rh", "prod", "fv", "tot", "fr", "idx", "lo", "hi",
    "S", "alphas", "opens", "Ss", "beta", "bg", "eb", "ck_ring", "ck_lo", "trq", "etrq",
    "trqm", "trT", "etrT", "trm", "db_rev", "edb_rev", "db_t", "edb_t", "dbm", "start",
    "g_tr", "g_db", "params"])
# the duration-dependent form: rings of alpha (2K, C), opening terms (C, 2K) and closing
# terms (2K, C); per-chunk alphas and sums; the window u and its segment marginals
_DdState = namedtuple("_DdState", [
    "aring", "pring", "hring", "lo", "hi", "S", "alphas", "Ss", "beta", "u", "seg", "ck_a",
    "ck_p", "ck_lo", "trp", "tr_rev", "db", "db_rev", "start", "g_tr", "g_dbf"])


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
    st = _FacState(
        np.empty((C, Q, 2 * K)), np.empty((C, Q, 2 * K)), np.empty(C),
        np.full((C, 2 * K), NEG),  # h_{s+d}, d = 1..K at [(s+1) mod K, ... + K)
        np.zeros((C, 2 * K)),  # exp(hring - Rh[c]), like the forward's linear ring
        np.zeros(C), np.empty(K), np.empty(K),  # prod; fv: per duration, its residue's factor
        np.empty(Q), np.empty(Q), np.empty(2, np.int64), np.empty(C, np.int64),
        np.full(C, L, np.int64),  # hi: the first disallowed position >= s, per label
        np.zeros(C), np.empty((n, C)), np.empty((n, Q, C)), np.empty((n, C)), np.empty(C),
        np.empty(Q * C),  # bg: beta_gamma^r_s(c) at r * C + c
        np.empty(Q * C), ck_ring, ck_lo, trq, etrq, trqm, trT, etrT, trm, db_rev, edb_rev,
        db_t, edb_t, dbm, start, g_tr, g_db, params)
    _sweep(st, f, ps, pe, alw, has_ps, has_pe, has_alw, L, end, n, K, C, alpha_end, z, w,
           g_ps, g_pe, g_sc, g_start, g_end)


@njit(cache=True, nogil=True)
def dd_backward(f, ps, pe, alw, has_ps, has_pe, has_alw, L, trp, tr_rev, db, db_rev,
                start, end, n, ck_a, ck_p, ck_lo, alpha_end, z, w,
                g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end):
    """Gradients of w * log Z of one sequence (trp, g_tr as (c', (d-1, c)), g_db (d-1, c))."""
    K, C = ck_a.shape[1], ck_a.shape[2]
    st = _DdState(
        np.empty((2 * K, C)), np.empty((C, 2 * K)),
        np.full((2 * K, C), NEG),  # h_{s+d}, d = 1..K at rows [(s+1) mod K, ... + K)
        np.empty(C, np.int64), np.full(C, L, np.int64), np.zeros(C), np.empty((n, C)),
        np.empty((n, C)), np.empty(C), np.empty(K * C), np.empty(K * C), ck_a, ck_p, ck_lo,
        trp, tr_rev, db, db_rev, start, g_tr, g_db.reshape(K * C))
    _sweep(st, f, ps, pe, alw, has_ps, has_pe, has_alw, L, end, n, K, C, alpha_end, z, w,
           g_ps, g_pe, g_sc, g_start, g_end)


@njit(cache=True, nogil=True)
def _sweep(st, f, ps, pe, alw, has_ps, has_pe, has_alw, L, end, n, K, C, alpha_end, z, w,
           g_ps, g_pe, g_sc, g_start, g_end):
    """The backward skeleton (the module docstring) over one sequence, in the form of st."""
    for c in range(C):
        g_end[c] = w * math.exp(alpha_end[c] + end[c] - z)
    S, hi, beta, alphas, Ss = st.S, st.hi, st.beta, st.alphas, st.Ss
    for k in range((L + n) // n - 1, -1, -1):
        t0 = k * n
        t1 = min(t0 + n, L + 1)
        _recompute(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L)
        if t1 <= L:  # rebase the closing terms from S[t1] = 0 to S[t0] = 0
            _rebase_h(st, f, t0, t1)
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
                _close(st, s, i, (s + 1) % K, ps, has_ps, L, z, w, g_ps)
                if s == 0:
                    for c in range(C):
                        g_start[c] = g_ps[0, c]
                    break
            jj = s % K
            for c in range(C):
                g_pe[s - 1, c] = w * fexp(alphas[i, c] + beta[c] - z)
                h = Ss[i, c] + (pe[s - 1, c] if has_pe else 0.0) + beta[c]
                _store_h(st, c, jj, K, h)
    _label_marginals(g_ps, g_pe, g_sc, L)


# ----------------------------------------------------- the four steps of the factorised form


@njit(cache=True)
def _fac_recompute(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L):
    C, Q, K = st.ck_ring.shape[1], st.ck_ring.shape[2], st.ck_ring.shape[3]
    ring, lo = st.ring, st.lo
    for c in range(C):
        for q in range(Q):
            for i in range(K):
                ring[c, q, i] = st.ck_ring[k, c, q, i]
                ring[c, q, i + K] = st.ck_ring[k, c, q, i]
        lo[c] = st.ck_lo[k, c]
    _relinearise(ring, st.lring, st.R)
    _fac_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, st.trT, st.etrT, st.trm, st.db_rev,
             st.edb_rev, st.dbm, st.start, ring, st.lring, st.R, lo, st.S, t0, t1, st.alphas,
             st.opens, st.Ss)


@njit(cache=True)
def _fac_rebase_h(st, f, t0, t1):
    S = st.S
    for c in range(S.shape[0]):
        S[c] = st.Ss[t1 - 1 - t0, c] + f[t1 - 1, c]
        st.Rh[c] += S[c]
    _rebase(st.hring, S)


@njit(cache=True)
def _fac_close(st, s, i, j, ps, has_ps, L, z, w, g_ps):
    """beta_gamma^r_s(c) = P_s(c) + lse_{d-1 = r mod Q} db + h_{s+d}, the marginals of the
    segments (s, d, c) from the same exponentials, then (s > 0) beta_s and the transition
    marginals at s."""
    C, Q, K = st.ck_ring.shape[1], st.ck_ring.shape[2], st.ck_ring.shape[3]
    hring, hlin, Rh, prod, tot, fr, fv = st.hring, st.hlin, st.Rh, st.prod, st.tot, st.fr, st.fv
    bg, g_db, db_t, edb_t, dbm, params = st.bg, st.g_db, st.db_t, st.edb_t, st.dbm, st.params
    for c in range(C):
        P = (ps[s, c] if has_ps else 0.0) - st.Ss[i, c]
        dmax = min(K, st.hi[c] - s)
        sm = 0.0
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
                fr[r] = w * fexp(st.opens[i, r, c] + Rh[c] + dbm[c] - z)
                bg[r * C + c] = P + Rh[c] + dbm[c] + math.log(tot[r])
                sm += tot[r] * fr[r]
                continue
            # exact log space for this residue
            fr[r] = 0.0
            m = _close_max(hring[c], j, db_t[c], r, dmax, Q)
            if m == NEG:
                bg[r * C + c] = NEG
                continue
            f_r = w * fexp(st.opens[i, r, c] + m - z)
            tr_ = _close_sum(hring[c], j, db_t[c], g_db[c], r, dmax, Q, m, f_r)
            bg[r * C + c] = P + m + math.log(tr_)
            sm += tr_ * f_r
        if params and Q == 1:
            _axpy(g_db[c], prod, fr[0], dmax)
        elif params:
            r = 0
            for d0 in range(dmax):
                fv[d0] = fr[r]
                r = r + 1 if r + 1 < Q else 0
            _axpy_v(g_db[c], prod, fv, dmax)
        g_ps[s, c] = sm
    if s > 0:
        _beta_and_transitions(st.trq, st.etrq, st.trqm, bg, st.eb, st.alphas[i], z, w,
                              st.g_tr, st.beta, params)


@njit(cache=True)
def _fac_store_h(st, c, jj, K, h):
    st.idx[0] = jj
    st.idx[1] = jj + K
    st.hring[c, jj] = h
    st.hring[c, jj + K] = h
    _lin_write(st.hlin[c], st.Rh, c, h, st.idx)


# -------------------------------------------- the four steps of the duration-dependent form


@njit(cache=True)
def _dd_recompute(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L):
    K, C = st.ck_a.shape[1], st.ck_a.shape[2]
    aring, pring = st.aring, st.pring
    for i in range(K):
        for c in range(C):
            aring[i, c] = st.ck_a[k, i, c]
            aring[i + K, c] = st.ck_a[k, i, c]
            pring[c, i] = st.ck_p[k, c, i]
            pring[c, i + K] = st.ck_p[k, c, i]
    for c in range(C):
        st.lo[c] = st.ck_lo[k, c]
    _dd_run(f, ps, pe, alw, has_ps, has_pe, has_alw, L, st.tr_rev, st.db_rev, st.start,
            aring, pring, st.lo, st.S, t0, t1, st.alphas, st.Ss)


@njit(cache=True)
def _dd_rebase_h(st, f, t0, t1):
    hring = st.hring
    for i in range(hring.shape[0]):
        for c in range(hring.shape[1]):
            hring[i, c] += st.Ss[t1 - 1 - t0, c] + f[t1 - 1, c]


@njit(cache=True)
def _dd_close(st, s, i, j, ps, has_ps, L, z, w, g_ps):
    """u[d-1, c] = P_s(c) + duration_bias[d-1, c] + h_{s+d}(c), the marginals of the
    segments at s (after each c', or after start at s = 0) and, s > 0, beta_s."""
    K, C = st.ck_a.shape[1], st.ck_a.shape[2]
    u, seg, g_dbf, start = st.u, st.seg, st.g_dbf, st.start
    dtop = min(K, L - s)
    nk = dtop * C
    for d0 in range(dtop):
        for c in range(C):
            P = (ps[s, c] if has_ps else 0.0) - st.Ss[i, c]
            ok = d0 < st.hi[c] - s
            u[d0 * C + c] = P + st.db[d0, c] + st.hring[j + d0, c] if ok else NEG
            seg[d0 * C + c] = 0.0
    if s == 0:  # the first segment: start in place of a predecessor
        for d0 in range(dtop):
            for c in range(C):
                seg[d0 * C + c] = w * fexp(start[c] + u[d0 * C + c] - z)
    else:
        _dd_segments(st.trp, u, st.alphas[i], z, w, st.g_tr, seg, st.beta, nk)
    for c in range(C):
        g_ps[s, c] = 0.0
    for k2 in range(nk):
        g_dbf[k2] += seg[k2]
        g_ps[s, k2 % C] += seg[k2]


@njit(cache=True)
def _dd_store_h(st, c, jj, K, h):
    st.hring[jj, c] = h
    st.hring[jj + K, c] = h


# ------------------------------------------------------- each step picked by the state type


def _is(st, cls) -> bool:
    return isinstance(st, types.BaseNamedTuple) and st.instance_class is cls


def _recompute(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L):
    raise NotImplementedError  # compiled code only (the @overload below)


def _rebase_h(st, f, t0, t1):
    raise NotImplementedError


def _close(st, s, i, j, ps, has_ps, L, z, w, g_ps):
    raise NotImplementedError


def _store_h(st, c, jj, K, h):
    raise NotImplementedError


@overload(_recompute)
def _recompute_by_form(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L):
    if _is(st, _FacState):
        return lambda st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L: \
            _fac_recompute(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L)
    if _is(st, _DdState):
        return lambda st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L: \
            _dd_recompute(st, k, t0, t1, f, ps, pe, alw, has_ps, has_pe, has_alw, L)
    return None


@overload(_rebase_h)
def _rebase_h_by_form(st, f, t0, t1):
    if _is(st, _FacState):
        return lambda st, f, t0, t1: _fac_rebase_h(st, f, t0, t1)
    if _is(st, _DdState):
        return lambda st, f, t0, t1: _dd_rebase_h(st, f, t0, t1)
    return None


@overload(_close)
def _close_by_form(st, s, i, j, ps, has_ps, L, z, w, g_ps):
    if _is(st, _FacState):
        return lambda st, s, i, j, ps, has_ps, L, z, w, g_ps: \
            _fac_close(st, s, i, j, ps, has_ps, L, z, w, g_ps)
    if _is(st, _DdState):
        return lambda st, s, i, j, ps, has_ps, L, z, w, g_ps: \
            _dd_close(st, s, i, j, ps, has_ps, L, z, w, g_ps)
    return None


@overload(_store_h)
def _store_h_by_form(st, c, jj, K, h):
    if _is(st, _FacState):
        return lambda st, c, jj, K, h: _fac_store_h(st, c, jj, K, h)
    if _is(st, _DdState):
        return lambda st, c, jj, K, h: _dd_store_h(st, c, jj, K, h)
    return None


restore_cache_dir(_USER_CACHE_DIR)
