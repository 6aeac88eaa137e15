"""The numba kernels of the compiled CPU backend: what both forms share (the package
semiseg.crf.numba is the torch-facing side; fac.py and dd.py the passes).

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

import hashlib
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
    ~/.cache/semiseg/numba), in the last two a folder per version of this package's
    sources (sources_digest). Never inside the installed package: numba's default there
    (__pycache__ next to this file) is not in pip's record of the install, so an
    uninstall left a semiseg/ folder behind that shadowed a later editable install."""
    if _numba_config.CACHE_DIR:
        return _numba_config.CACHE_DIR
    if os.environ.get("SEMISEG_CACHE_DIR"):
        return os.path.join(os.environ["SEMISEG_CACHE_DIR"], "numba", _SOURCES)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "semiseg", "numba", _SOURCES)


def sources_digest(folder: str) -> str:
    """12 hex digits of a digest of the .py files in `folder` (names and contents).
    cache_dir() keeps the kernels compiled from each version of this package's sources
    in a folder of its own: numba checks a cached kernel only against the file of the
    function it loads, so a kernel whose helper changed in another module (core.py's,
    used by fac.py and dd.py) would otherwise run its old compiled code."""
    h = hashlib.sha1()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            h.update(name.encode())
            with open(os.path.join(folder, name), "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:12]


_SOURCES = sources_digest(os.path.dirname(os.path.abspath(__file__)))


def use_cache_dir() -> str | None:
    """Point numba's cache at cache_dir() and return the setting it replaced. numba picks a
    function's cache folder when @njit(cache=True) decorates it, so each kernel module
    holds the setting only while it defines its kernels (restore_cache_dir at its end:
    other numba users in the process keep their own). A folder that cannot be written
    makes numba fall back to its usual places."""
    user = _numba_config.CACHE_DIR
    _numba_config.CACHE_DIR = cache_dir()
    return user


def restore_cache_dir(user: str | None) -> None:
    _numba_config.CACHE_DIR = user


_USER_CACHE_DIR = use_cache_dir()

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
    xs = x[ox:ox + n]  # slices, not x[ox + i]: vector loads (fac._dot)
    ys = y[oy:oy + n]
    m = NEG
    for i in range(n):
        m = max(m, xs[i] + ys[i])
    if m == NEG:
        return NEG
    s = 0.0
    for i in range(n):
        s += fexp(xs[i] + ys[i] - m)
    return m + math.log(s)


@njit(cache=True, fastmath=FM)
def _argmax2(x, ox, y, oy, n):
    """(max, first argmax) over i < n of x[ox + i] + y[oy + i]; (-inf, 0) for n = 0.
    One pass (a strict > keeps the first of equal values): 1.5x faster for the Viterbi
    than a vectorised max followed by a search for it."""
    xs = x[ox:ox + n]
    ys = y[oy:oy + n]
    m = NEG
    idx = 0
    for i in range(n):
        v = xs[i] + ys[i]
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


# ------------------------------------------------------- sums and the label marginals


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
    run = np.zeros(C)  # row by row (the arrays' order): the same sums as label by label
    for u in range(L):
        for c in range(C):
            run[c] += g_ps[u, c]
            g_sc[u, c] = run[c]
            run[c] -= g_pe[u, c]


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


restore_cache_dir(_USER_CACHE_DIR)
