"""The compiled CPU backend (numba): forward / backward / viterbi over a `CRFInputs`.

Same contract and semantics as the torch backend (reference.py; dispatch.py's docstring
states the contract): exact log-space recursions in float64 for float32 and float64
inputs, results in the dtype of `scores`. This module turns tensors into float64 numpy
arrays in the layouts the kernels read and back; the recursions themselves are in
fac.py and dd.py (core.py: what they share), one compiled function per pass
over one sequence (it releases the GIL);
the sequences of a batch run in parallel on a small thread pool, each writing only its
own outputs, so results do not depend on the scheduling. Importing this module imports
numba (dispatch.py imports it only when first needed); compiled code is cached on
disk outside the package (core.cache_dir()), so only the first process compiles.

Static (C, C) and periodic (P, C, C), P < K, transitions run the factorised kernels at
O(T (P C^2 + K C)), or O(T (nnz + K C)) with nnz finite transitions (only those are
summed: a gene grammar allows a few percent); fully duration-dependent ones (P >= K)
at O(T K C^2). Memory per sequence: the rings (O(K C P) or O(K C)), checkpoints every
n ~ sqrt(T K) boundaries, one chunk of recomputed per-boundary values (or, where they
fit, every chunk's, kept by the forward: KEEP_ROWS_BYTES), and O(T C) for inputs,
gradients and Viterbi backpointers.
"""

from __future__ import annotations

import math
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

from ..hostmem import empty_small_pages, free_bytes, populate
from ..inputs import CRFInputs, param_grads_wanted
from . import dd, fac
from .core import _label_marginals as core_marginals

# Boundaries per chunk (checkpoint interval); None = about sqrt((T + 1) * K). Tests set
# it small to exercise the chunk boundaries.
CHUNK: int | None = None
# One sequence of at least this many chunks, on two cores, with only the per-position
# gradients wanted: the backward in two halves side by side (_fac_backward, upper).
SPLIT_CHUNKS = 4


# The forward keeps every chunk's rows for the backward (instead of the backward
# recomputing them from the checkpoints: 4.8 s of yeast chrII's 10.7 s posterior pass)
# where they take at most this many bytes and a quarter of the memory free to the
# process (hostmem.free_bytes); the same bits either way. Tests set it to 0 (always
# recompute). In 4 KiB pages, faulted in on the second core while the forward runs
# (hostmem.populate): written fresh in huge pages they cost the forward 3.6 s more.
KEEP_ROWS_BYTES = 4 << 30


def _kept_rows(B: int, T: int, C: int, Q: int):
    """The whole batch's forward rows (alphas (B, T + 1, C), the ring's openings (B, T +
    1, Q, C), prefix sums (B, T + 1, C), float64), or None where they would not fit
    (KEEP_ROWS_BYTES)."""
    need = B * (T + 1) * C * (Q + 2) * 8
    if need > KEEP_ROWS_BYTES:
        return None
    free = free_bytes()
    if free is not None and need > free // 4:
        return None
    return (empty_small_pages((B, T + 1, C)), empty_small_pages((B, T + 1, Q, C)),
            empty_small_pages((B, T + 1, C)))


_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _each(B: int, call) -> list:
    """[call(b) for b in range(B)], the sequences spread over the CPU cores."""
    global _POOL, _POOL_SIZE
    n = min(B, _threads())
    if n <= 1:
        return [call(b) for b in range(B)]
    if _POOL is None or _POOL_SIZE < n:
        _POOL = ThreadPoolExecutor(max_workers=n, thread_name_prefix="semiseg-crf")
        _POOL_SIZE = n
    return list(_POOL.map(call, range(B)))


def _np(t: Tensor | None, dtype=np.float64) -> np.ndarray | None:
    """t as a contiguous numpy array of `dtype` (None: its own: a view where it can)."""
    if t is None:
        return None
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=dtype)


def _lin(a: np.ndarray):
    """(m, exp(a - m[..., None])) with m the maximum over the last axis (0 where -inf)."""
    top = a.max(axis=-1)
    m = np.where(np.isfinite(top), top, 0.0)
    return m, np.exp(a - m[..., None])


def _sparse_rows(a: np.ndarray) -> tuple:
    """The finite entries of a (rows, cols) matrix by row: (ptr, col, value,
    exp(value - the row's maximum), the row's maximum (0 for a row with none)); row i's
    entries are [ptr[i], ptr[i + 1]), columns ascending."""
    rows, cols = np.nonzero(np.isfinite(a))
    ptr = np.zeros(a.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=a.shape[0]), out=ptr[1:])
    val = np.ascontiguousarray(a[rows, cols], dtype=np.float64)
    top, _ = _lin(a)
    return (ptr, cols.astype(np.int64), val, np.exp(val - top[rows]), top)


class _Arrays:
    """The inputs as numpy arrays, parameters (float64) truncated to K_eff = min(K, T).

    The per-position scores, proj_start and proj_end keep the scores' dtype (float32 or
    float64): views of the tensors, not float64 copies (three (T, C) arrays, 2.5 s of
    yeast chrII's 26 s on the 2-core CPU, benchmarks/annotate_profile.py). The kernels
    read each of them only into a float64 sum (core._advance, _terms; fac, dd), so the
    results are the same bits. Missing proj_start / proj_end / allowed are (1, 1, C)
    placeholders with a False flag (one compiled signature for every combination of
    optional inputs, per dtype)."""

    def __init__(self, x: CRFInputs):
        B, T, C = x.scores.shape
        K = min(x.K, T)
        self.B, self.T, self.C, self.K = B, T, C, K
        self.dd = x.duration_dependent
        own = x.scores.dtype in (torch.float32, torch.float64)
        self.f = _np(x.scores, None if own else np.float64)
        self.has_ps = x.proj_start is not None
        self.has_pe = x.proj_end is not None
        self.has_alw = x.allowed is not None
        empty = np.zeros((1, 1, C), self.f.dtype)
        self.ps = _np(x.proj_start, self.f.dtype) if self.has_ps else empty
        self.pe = _np(x.proj_end, self.f.dtype) if self.has_pe else empty
        self.alw = _np(x.allowed, np.bool_) if self.has_alw else np.ones((1, 1, C), np.bool_)
        self.lengths = _np(x.lengths, np.int64)
        self.start = _np(x.start) if x.start is not None else np.zeros(C)
        self.end = _np(x.end) if x.end is not None else np.zeros(C)
        db = _np(x.duration_bias)[:K]
        self.db = np.ascontiguousarray(db)  # (K, C)
        self.db_t = np.ascontiguousarray(db.T)  # (C, K), d = k + 1
        self.db_rev = np.ascontiguousarray(db[::-1].T)  # (C, K), window index i: d = K - i
        # linear-space copies for the factorised kernels: exp(db - dbm[c]) <= 1
        top = db.max(axis=0)
        self.dbm = np.where(np.isfinite(top), top, 0.0)
        self.edb_rev = np.exp(self.db_rev - self.dbm[:, None])
        self.edb_t = np.exp(self.db_t - self.dbm[:, None])
        # each label's finite durations, dr[0, c]..dr[1, c] (1..0: none): the factorised
        # kernels' windows hold only those (a gene grammar's codon and site labels last
        # 1-3 bases, its run tails exactly one length; the rest of K adds exact zeros)
        fin = np.isfinite(db)
        some = fin.any(axis=0)
        self.dr = np.stack([np.where(some, fin.argmax(axis=0) + 1, 1),
                            np.where(some, K - fin[::-1].argmax(axis=0), 0)]).astype(np.int64)
        tr = _np(x.transition)
        if self.dd:
            self.tr = np.ascontiguousarray(tr[:K])  # (K, src, dst)
            self.tr_rev = np.ascontiguousarray(self.tr[::-1].transpose(2, 0, 1))  # (dst, i, src)
            self.trp = np.ascontiguousarray(self.tr.transpose(1, 0, 2)).reshape(C, -1)
        else:
            self.tr = np.ascontiguousarray(tr.reshape(-1, C, C))  # (Q, src, dst)
            self.trp = np.ascontiguousarray(self.tr.transpose(1, 0, 2)).reshape(C, -1)
            # the finite transitions only (gene grammars allow a few percent of them):
            # by row (r, dst) over src for the forward and Viterbi, by src over (r, dst)
            # for the backward
            self.sp = _sparse_rows(self.tr.transpose(0, 2, 1).reshape(-1, C))
            self.sq = _sparse_rows(self.trp)
        # trp: (src, (d-1 or r, dst)) flat, the layout of the backward passes
        self.n = CHUNK or max(1, int(math.sqrt((T + 1) * K)))
        self.n_chunks = -(-(T + 1) // self.n)

    def common(self, b: int):
        """The per-sequence inputs of sequence b, as the kernels take them first."""
        return (self.f[b], self.ps[b % self.ps.shape[0]], self.pe[b % self.pe.shape[0]],
                self.alw[b % self.alw.shape[0]], self.has_ps, self.has_pe, self.has_alw,
                int(self.lengths[b]))


def forward(x: CRFInputs, keep: bool = False):
    """log Z (B,) in the dtype of scores, and the checkpoints for `backward` (`keep`, the
    dispatch contract's hint, is not used)."""
    a = _Arrays(x)
    B, C, K = a.B, a.C, a.K
    alpha_end = np.empty((B, C))
    ck_lo = np.empty((B, a.n_chunks, C), np.int64)
    upper = rows = None
    if a.dd:
        ck = (np.empty((B, a.n_chunks, K, C)), np.empty((B, a.n_chunks, C, K)))
        log_z = _each(B, lambda b: dd.dd_forward(
            *a.common(b), a.tr_rev, a.db_rev, a.start, a.end, a.n, ck[0][b], ck[1][b],
            ck_lo[b], alpha_end[b]))
    else:
        Q = a.tr.shape[0]
        ck = (np.empty((B, a.n_chunks, C, Q, K)),)
        rows = _kept_rows(B, a.T, C, Q) if keep else None
        none = (np.empty((0, C)), np.empty((0, Q, C)), np.empty((0, C)))  # (not kept)

        def one(b, L=None):  # L: a shorter length (0: the kernel's loading call below)
            common = a.common(b) if L is None else (*a.common(b)[:-1], L)
            return fac.fac_forward(*common, a.sp, a.db_rev, a.edb_rev, a.dbm, a.dr,
                                   a.start, a.end, a.n, ck[0][b], ck_lo[b], alpha_end[b],
                                   *(none if rows is None else (r[b] for r in rows)))

        if keep and B == 1 and a.n_chunks >= SPLIT_CHUNKS and _threads() > 1:
            # the forward's kernel loaded (numba: from its cache, then linked in memory)
            # before the second core faults the kept rows in: linked beside those page
            # faults it waited 3-5 s on the 2-core CPU's memory map (yeast chrII, 2026-12-07)
            one(0, 0)  # the length-0 sequence: its rows and checkpoint written again below
            # a backward follows: the reverse pass's state at the sequence's middle
            # chunk, on a second core beside the forward (_upper_state); a backward
            # that wants the parameter sums (not known here: training) leaves it unused
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="semiseg-beta",
                                    initializer=_no_signals) as pool:
                if rows is not None:  # their pages faulted in there, not in the forward
                    pool.submit(populate, rows)
                later = pool.submit(_upper_state, a, 0)
                log_z = [one(0)]
                upper = later.result()
        else:
            log_z = _each(B, one)
    log_z = np.array(log_z, dtype=np.float64)
    saved = (a, ck, ck_lo, alpha_end, log_z, upper, rows)
    return torch.from_numpy(log_z).to(x.scores.dtype), saved


def backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """Gradients of sum_b grad_log_z[b] * log Z_b for every name in inputs.FLOAT_FIELDS;
    without duration_bias and transition in `wanted` (dispatch.py) the factorised kernels
    skip those two sums and leave them out (the duration-dependent ones form all)."""
    a, ck, ck_lo, alpha_end, log_z, upper, rows = saved
    params = a.dd or param_grads_wanted(wanted)
    B, T, C, K = a.B, a.T, a.C, a.K
    w = _np(grad_log_z)
    dtype = x.scores.dtype
    g_ps, g_pe, g_sc = _grad_rows(B, T, C, dtype)
    g_tr = np.zeros((B, *a.trp.shape))  # (src, (r or d-1, dst))
    g_start = np.zeros((B, C))
    g_end = np.zeros((B, C))
    g_db = np.zeros((B, K, C) if a.dd else (B, C, K))

    def one(b):
        if not np.isfinite(log_z[b]) or w[b] == 0.0:
            return  # zero gradient
        grads = (g_ps[b], g_pe[b], g_sc[b], g_tr[b], g_db[b], g_start[b], g_end[b])
        if a.dd:
            dd.dd_backward(*a.common(b), a.trp, a.tr_rev, a.db, a.db_rev, a.start, a.end,
                           a.n, ck[0][b], ck[1][b], ck_lo[b], alpha_end[b], log_z[b], w[b],
                           *grads)
        else:  # one sequence on a machine with more cores: the second one helps
            _fac_backward(a, b, ck[0][b], ck_lo[b], alpha_end[b], log_z[b], w[b], grads,
                          params, two_cores=B == 1 and a.n_chunks > 1 and _threads() > 1,
                          upper=None if params else upper,
                          kept=None if rows is None else tuple(r[b] for r in rows))

    _each(B, one)
    g_tr = g_tr.reshape(B, C, -1, C).transpose(0, 2, 1, 3)  # (B, r or d-1, src, dst)
    if not a.dd:
        g_db = g_db.transpose(0, 2, 1)

    def shared(g: np.ndarray) -> np.ndarray:
        # per-sequence accumulators summed in a fixed order (deterministic)
        out = g[0].copy()
        for b in range(1, B):
            out += g[b]
        return out

    def out(v: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(v)).to(dtype)

    grads = {
        "scores": out(g_sc),
        "start": out(shared(g_start)),
        "end": out(shared(g_end)),
        "proj_start": out(g_ps),
    }
    if wanted is None or "proj_end" in wanted:  # (the posteriors' pass does not ask)
        grads["proj_end"] = out(g_pe)
    if params:
        grads["transition"] = torch.zeros(x.transition.shape, dtype=dtype)
        grads["transition"].view(-1, C, C)[:a.tr.shape[0]] = out(shared(g_tr))
        grads["duration_bias"] = torch.zeros(x.duration_bias.shape, dtype=dtype)
        grads["duration_bias"][:K] = out(shared(g_db))
    return grads


def _no_signals() -> None:
    """Block SIGINT and SIGTERM in the calling (helper) thread."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _fac_backward(a: _Arrays, b: int, ck_ring, ck_lo, alpha_end, z, w, grads, params,
                  two_cores: bool, upper=None, kept=None) -> None:
    """The factorised backward of sequence b (gradients of w * log Z into `grads`):
    chunk by chunk from the last, its forward rows recomputed from its checkpoint
    (fac.fac_recompute), then its reverse pass (fac.fac_reverse_chunk), in two row
    buffers in turn. two_cores: each chunk's recompute runs on a second thread while
    this one runs the reverse pass of the chunk after it; the same calls on the same
    values, so the same bits (tests/test_crf_cpu.py). upper = (m, state), the reverse
    pass's state entering chunk m - 1 (_upper_state; only without the parameter sums):
    chunks m - 1 .. 0 on the second thread from that state, beside chunks last .. m
    here, each recomputing its own rows; the same per-chunk calls, so the same bits.
    kept = the forward's rows of the whole sequence (forward's _kept_rows): each chunk's
    rows are read from them instead of recomputed (fac.fac_forward makes the bits
    fac_recompute would)."""
    g_ps, g_pe, g_sc, g_tr, g_db, g_start, g_end = grads
    common = a.common(b)
    L = common[-1]
    C, Q, K = ck_ring.shape[1], ck_ring.shape[2], ck_ring.shape[3]
    n = a.n
    fac.fac_end_grads(alpha_end, a.end, z, w, g_end)
    bufs = [(np.empty((n, C)), np.empty((n, Q, C)), np.empty((n, C))) for _ in range(2)]

    def recompute(k: int, rows):
        if kept is not None:  # the forward's own rows of chunk k
            return tuple(r[k * n:k * n + n] for r in kept)
        fac.fac_recompute(*common, a.sp, a.db_rev, a.edb_rev, a.dbm, a.dr, a.start,
                          n, ck_ring, ck_lo, k, *rows)
        return rows

    def reverse(k: int, rows, state, gdb) -> None:
        fac.fac_reverse_chunk(*common, a.sq, a.db_t, a.edb_t, a.dbm, a.dr, a.end,
                              n, k, *rows, *state, z, w, g_ps, g_pe, g_tr,
                              gdb, g_start, params, True)

    def chunks(ks, rows, state, gdb) -> None:
        for k in ks:
            reverse(k, recompute(k, rows), state, gdb)

    state = fac.reverse_state(C, Q, K, L)
    last = (L + n) // n - 1
    if upper is not None:  # two halves side by side (the lower one from upper's state)
        m, low_state = upper
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="semiseg-rows",
                                initializer=_no_signals) as pool:
            low = pool.submit(chunks, range(m - 1, -1, -1), bufs[1], low_state,
                              np.zeros_like(g_db))  # (its own g_db: dropped, params off)
            chunks(range(last, m - 1, -1), bufs[0], state, g_db)
            low.result()
        core_marginals(g_ps, g_pe, g_sc, L)
        return
    if not two_cores or kept is not None:
        chunks(range(last, -1, -1), bufs[0], state, g_db)
        core_marginals(g_ps, g_pe, g_sc, L)
        return
    # the helper thread takes no SIGINT / SIGTERM, so they reach the main thread as
    # before (an interrupt there stops the run between chunks, cleanly)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="semiseg-rows",
                            initializer=_no_signals) as pool:
        nxt = pool.submit(recompute, last, bufs[last % 2])
        for k in range(last, -1, -1):
            rows = nxt.result()
            if k > 0:  # the other buffer: its rows were read by the chunk after this one
                nxt = pool.submit(recompute, k - 1, bufs[(k - 1) % 2])
            reverse(k, rows, state, g_db)
    core_marginals(g_ps, g_pe, g_sc, L)


def _grad_rows(B: int, T: int, C: int, dtype):
    """The backward's zeroed (B, T, C) gradients of proj_start and proj_end (float64
    sums) and the label marginals, written in the scores' dtype (float32 or float64) by
    core._label_marginals: each a float64 sum rounded once, the bits of a float64 array
    converted afterwards, without that array (T C float64) or the copy."""
    out = np.float32 if dtype == torch.float32 else np.float64  # (others: float64)
    return np.zeros((B, T, C)), np.zeros((B, T, C)), np.zeros((B, T, C), out)


def _upper_state(a: _Arrays, b: int):
    """(m, state): the reverse pass of sequence b from its end down through chunk m =
    (chunks) // 2, the state alone (fac.fac_reverse_chunk without marginals, each
    chunk's prefix sums from fac.fac_prefix_rows), for _fac_backward's lower half."""
    common = a.common(b)
    L = common[-1]
    C, Q, K, n = a.C, a.tr.shape[0], a.K, a.n
    last = (L + n) // n - 1
    m = (last + 1) // 2
    state = fac.reverse_state(C, Q, K, L)
    rows = (np.zeros((1, C)), np.zeros((1, Q, C)), np.empty((n, C)))
    scratch = (np.zeros((1, C)), np.zeros((1, C)), np.zeros((C, 1)), np.zeros((C, K)),
               np.zeros(C))  # g_ps, g_pe, g_tr, g_db, g_start: not written or dropped
    for k in range(last, m - 1, -1):
        fac.fac_prefix_rows(a.f[b], L, n, k, rows[2])
        fac.fac_reverse_chunk(*common, a.sq, a.db_t, a.edb_t, a.dbm, a.dr, a.end, n, k,
                              *rows, *state, 0.0, 0.0, *scratch, False, False)
    return m, state


def viterbi(x: CRFInputs):
    """Max-plus recursion with int16/int32 backpointers, traced back in the kernel.

    Returns (score (B,) in the dtype of scores, labels (B, T) int64, seg_start (B, T) bool).
    """
    a = _Arrays(x)
    B, T, C, K = a.B, a.T, a.C, a.K
    idx = np.int16 if max(K, C) < 2**15 else np.int32
    labels = np.full((B, T), -1, np.int64)
    seg_start = np.zeros((B, T), np.bool_)
    bp_d = np.zeros((B, T + 1, C), idx)
    if a.dd:
        bp_c = np.zeros((B, T + 1, 1, C), idx)
        score = _each(B, lambda b: dd.dd_viterbi(
            *a.common(b), a.tr_rev, a.db_rev, a.start, a.end, a.n, bp_d[b], bp_c[b],
            labels[b], seg_start[b]))
    else:
        bp_c = np.zeros((B, T + 1, a.tr.shape[0], C), idx)
        score = _each(B, lambda b: fac.fac_viterbi(
            *a.common(b), a.sp, a.db_rev, a.dr, a.start, a.end, a.n, bp_d[b], bp_c[b],
            labels[b], seg_start[b]))
    score = np.array(score, dtype=np.float64)
    return (torch.from_numpy(score).to(x.scores.dtype), torch.from_numpy(labels),
            torch.from_numpy(seg_start))
