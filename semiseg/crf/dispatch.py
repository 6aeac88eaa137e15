"""Backend choice, autograd wiring and the public functions of docs/contract.md.

Every backend is a module with three functions over a `CRFInputs` (inputs.py):

    forward(x, keep=False) -> (log_z (B,), saved)
        log Z per sequence (-inf where no segmentation is allowed) and whatever the
        backward pass needs (checkpoints); nothing O(T*K*C). `keep`: the caller will run
        the backward; a backend may then save more for it within a memory budget (the
        Triton one: the periodic family's forward rows, O(T*C), so that the backward
        recomputes none) or ignore it.
    backward(x, saved, grad_log_z (B,), wanted=None) -> dict[str, Tensor]
        the gradient of sum_b grad_log_z[b] * log Z_b with respect to every floating
        input named in inputs.FLOAT_FIELDS, in the shape and dtype of that input.
        `wanted` (None: all) names the gradients the caller will read; a backend may
        leave the others out (the Triton and numba ones skip duration_bias and
        transition, sums over every position, when neither is wanted: posteriors need
        only the per-position ones), and returns the wanted ones unchanged by the choice.
        "proj_start" and "proj_end", when wanted, are returned even when x has none
        (as if they were zeros): d log Z / d proj_start[b, t, c] is the probability that a segment
        of label c starts at t, which gives the boundary marginals. A sequence whose
        log Z is -inf contributes zero gradient.
    viterbi(x) -> (score (B,), labels (B, T) int64, seg_start (B, T) bool)
        the best score, the label of every position (-1 at t >= L_b) and whether a
        segment of the best path starts at t.

The torch backend is `reference.py`; the Triton one is the package `triton/`,
imported only when first used (it imports triton); the compiled CPU backend is `numba/`
(numba), likewise imported only when first used.

"auto" picks Triton for float32 CUDA tensors the kernels support, the compiled CPU
backend for CPU tensors (float32 and float64: it computes in float64) when numba is
installed, and the torch backend otherwise.
"""

from __future__ import annotations

import itertools
import os
import warnings
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import torch
from torch import Tensor

from .inputs import FLOAT_FIELDS, CRFInputs, check_inputs

BACKENDS = ("auto", "torch", "triton", "numba")


class Segmentation:
    """The best segmentation of each sequence.

    score:    (B,) tensor, the score of the best segmentation (-inf where none is allowed)
    segments: list (one per sequence) of sequences of (start, duration, label) tuples of
              Python ints, in order, covering [0, L_b); empty where no segmentation is
              allowed. From `viterbi` each is a `SegmentList` (read-only, equal to the
              list of the same tuples), built on first read as one int64 host array
              (on a GPU the rows are formed on the device behind the Viterbi and copied,
              a batch of more than 65,536 positions its counts first); tuples
              are made as they are read, so a sequence's segments cost host time only
              when a caller walks them.
    labels:   (B, T) int64, the label of each position, -1 at t >= L_b

    `segment_tensors()` gives the segments as flat tensors on the device of `labels`:
    (batch_index, start, duration, label), int64, ordered by sequence then start.
    """

    __slots__ = ("score", "labels", "_segments", "_starts", "_lengths")

    def __init__(self, score: Tensor, segments=None, labels: Tensor | None = None, *,
                 seg_start: Tensor | None = None, lengths: Tensor | None = None):
        self.score = score
        self.labels = labels
        self._segments = segments
        self._starts = seg_start  # (B, T) bool: a segment starts at t (t < L_b, score finite)
        self._lengths = lengths
        if segments is None and seg_start is None:
            raise ValueError("Segmentation needs segments or seg_start")

    @property
    def lengths(self) -> Tensor | None:
        """(B,) the sequence lengths the segments cover (None when built from lists)."""
        return self._lengths

    @property
    def segments(self) -> list[list[tuple[int, int, int]]]:
        if self._segments is None:
            self._segments = _segment_lists(self.labels, self._starts, self._lengths)
        return self._segments

    @segments.setter
    def segments(self, value):
        self._segments = value

    def segment_tensors(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(batch_index, start, duration, label) int64 tensors, one entry per segment,
        ordered by sequence then start, on the device of `labels` (torch ops only)."""
        if self._starts is None:  # constructed from lists
            flat = [(b, s, d, c) for b, segs in enumerate(self._segments) for s, d, c in segs]
            t = torch.tensor(flat, dtype=torch.int64).reshape(-1, 4).to(self.labels.device)
            return t[:, 0], t[:, 1], t[:, 2], t[:, 3]
        return _segment_tensors(self.labels, self._starts, self._lengths)

    def __eq__(self, other):
        if not isinstance(other, Segmentation):
            return NotImplemented
        return (torch.equal(self.score, other.score) and torch.equal(self.labels, other.labels)
                and self.segments == other.segments)

    def __repr__(self):
        return f"Segmentation(score={self.score!r}, labels={self.labels!r})"


def _triton_module() -> ModuleType:
    from . import triton  # imports triton: only now, when a kernel is first needed

    return triton


_warned_no_numba = False


def _cpu_module(required: bool) -> ModuleType | None:
    """The compiled CPU backend, or None (with a warning, once) if numba is missing."""
    global _warned_no_numba
    try:
        from . import numba  # imports numba: only now, when the backend is first needed
    except ImportError as e:
        if required:
            raise ValueError(f'backend="numba" needs the numba package ({e}); install it '
                             "with `pip install numba`, or use backend='torch'") from None
        if not _warned_no_numba and getattr(e, "name", None) == "numba":
            _warned_no_numba = True
            warnings.warn("semiseg.crf: numba is not installed, so CPU tensors run the much "
                          "slower torch backend (`pip install numba` for the compiled one)",
                          stacklevel=3)
        return None
    return numba


def _backend(x: CRFInputs, backend: str) -> ModuleType:
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if backend == "numba":
        if x.scores.device.type != "cpu":
            raise ValueError(f'backend="numba" runs on CPU tensors, got {x.scores.device}')
        return _cpu_module(required=True)
    if backend == "auto":
        if x.scores.device.type == "cpu":
            module = _cpu_module(required=False)
            if module is not None:
                return module
        use_triton = x.scores.is_cuda and x.scores.dtype == torch.float32
        if use_triton and _triton_module().supports(x) is not None:
            use_triton = False  # outside the kernels' scope (see triton.supports)
        backend = "triton" if use_triton else "torch"
    if backend == "triton":
        if x.scores.dtype == torch.float64:
            backend = "torch"  # float64 always runs the exact torch backend (docs/contract.md)
        elif not x.scores.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError(
                'backend="triton" on CPU tensors needs TRITON_INTERPRET=1 set before '
                "triton is first imported (or use backend='torch')"
            )
    if backend == "torch":
        from . import reference

        return reference
    return _triton_module()


class _LogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module, x, *tensors):
        x = x.replace(**{n: (t.detach() if t is not None else None)
                         for n, t in zip(FLOAT_FIELDS, tensors)})
        log_z, saved = module.forward(x, keep=any(ctx.needs_input_grad))
        ctx.module, ctx.x, ctx.saved = module, x, saved
        return log_z

    @staticmethod
    def backward(ctx, grad_log_z):
        need = {name: ctx.needs_input_grad[2 + i] and getattr(ctx.x, name) is not None
                for i, name in enumerate(FLOAT_FIELDS)}
        grads = ctx.module.backward(ctx.x, ctx.saved, grad_log_z.contiguous(),
                                    wanted=[n for n, w in need.items() if w])
        out = [grads[name] if need[name] else None for name in FLOAT_FIELDS]
        return (None, None, *out)


def log_partition(
    scores, transition, duration_bias, lengths=None, *, start=None, end=None,
    proj_start=None, proj_end=None, allowed=None, backend="auto",
) -> Tensor:
    """log Z (B,) of the semi-CRF of docs/contract.md, differentiable in every floating input.

    Args:
        scores: (B, T, C) per-position label scores.
        transition: (C, C) `[src, dst]`, or (K, C, C) `[d-1, src, dst]`.
        duration_bias: (K, C) `[d-1, c]`; K is the maximum segment duration.
        lengths: (B,) integers in [1, T], or None for all T.
        start, end: (C,) scores of the first / last segment's label, or None.
        proj_start, proj_end: (B, T, C) scores at a segment's first / last position.
        allowed: (B, T, C) bool; label c may cover position t only where True.
        backend: "auto", "torch", "triton" or "numba" (dispatch.py's docstring).
    """
    x, verdict = check_inputs(scores, transition, duration_bias, lengths, start=start,
                              end=end, proj_start=proj_start, proj_end=proj_end,
                              allowed=allowed, deferred=True)
    module = _backend(x, backend)
    log_z = _LogPartition.apply(module, x, *(getattr(x, n) for n in FLOAT_FIELDS))
    verdict()  # the values' test, beside the kernels: raises for NaN / bad infinities
    return log_z


def _segment_tensors(labels: Tensor, seg_start: Tensor, lengths: Tensor):
    """Flat (batch_index, start, duration, label) of the segments marked in seg_start
    (which is False at t >= L_b and for sequences with no segmentation)."""
    b, s = torch.nonzero(seg_start, as_tuple=True)
    # each segment ends where the next one of its sequence starts, the last at L_b
    nxt = torch.empty_like(s)
    nxt[:-1] = s[1:]
    same = torch.zeros_like(b, dtype=torch.bool)
    same[:-1] = b[1:] == b[:-1]
    end = torch.where(same, nxt, lengths[b])
    return b, s, end - s, labels[b, s]


class SegmentList(Sequence):
    """One sequence's best segmentation: a read-only sequence of (start, duration,
    label) tuples of Python ints, held as one (3, n) int64 array on the host. It equals
    (==) any sequence of the same tuples (a list of tuples, another SegmentList);
    `arrays()` gives the starts, durations and labels as numpy arrays without making
    tuples."""

    __slots__ = ("_a",)

    def __init__(self, rows: np.ndarray):
        self._a = rows  # (3, n): starts, durations, labels

    def __len__(self) -> int:
        return self._a.shape[1]

    def __getitem__(self, i):
        if isinstance(i, slice):
            return SegmentList(self._a[:, i])
        s, d, c = self._a[:, i].tolist()
        return (s, d, c)

    def __iter__(self):
        return zip(*self._a.tolist())

    def tolist(self) -> list[tuple[int, int, int]]:
        """The segments as a plain list of tuples (e.g. for json or pickle-free storage)."""
        return list(self)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, durations, labels), int64 numpy arrays (views, read-only)."""
        return self._a[0], self._a[1], self._a[2]

    def __eq__(self, other):
        if isinstance(other, SegmentList):
            return self._a.shape == other._a.shape and bool((self._a == other._a).all())
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(
                tuple(a) == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # mutable-looking sequences are not hashed (as list)

    def __repr__(self):
        return f"SegmentList({list(self)!r})"


def _segment_lists(labels: Tensor, seg_start: Tensor, lengths: Tensor) -> list[SegmentList]:
    """The per-sequence SegmentLists of a Viterbi result: the rows (start, duration,
    label) of the batch in order as one (3, n) int64 host array, one view per sequence.
    On a GPU they are formed on the device (`_segment_rows`: elementwise ops, a cumsum
    and one scatter, queued behind the Viterbi without a wait) and copied with the
    per-sequence counts; on the CPU, where those ops would run over every position on
    the caller's thread, from the packed labels by whole-batch numpy (`_host_rows`)."""
    B, T = labels.shape
    n = lengths if lengths is not None else torch.full((B,), T, device=labels.device)
    on_device = labels.is_cuda if SEGMENTS_ON_DEVICE is None else SEGMENTS_ON_DEVICE
    if not on_device:
        rows, counts = _host_rows(labels, seg_start, n)
    else:
        rows, counts = _segment_rows(labels, seg_start, n)
        N = B * T
        if N <= _ONE_COPY:  # one copy of everything (one wait)
            host = torch.cat([counts, rows.reshape(-1)]).cpu().numpy()
            counts, rows = host[:B], host[B:].reshape(3, N)
        else:  # the counts first, then only the rows that hold segments
            counts = counts.cpu().numpy()
            rows = rows[:, :int(counts.sum())].cpu().numpy()
    rows.flags.writeable = False
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    return [SegmentList(rows[:, lo:hi]) for lo, hi in itertools.pairwise(bounds)]


SEGMENTS_ON_DEVICE = None  # None: the rows formed on the device for CUDA tensors only
# (True / False force either way: the tests run both on the CPU)


def _host_rows(labels: Tensor, seg_start: Tensor, n: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """_segment_rows' rows (only the n that hold segments) and counts, on the host: labels
    and starts packed into one int32 array (a label c >= 0 where a segment starts, -2 - c
    inside one, -1 past the sequence) with the lengths after them, then whole-batch numpy
    (no per-segment Python objects)."""
    B, T = labels.shape
    packed = torch.cat([torch.where(seg_start, labels, -2 - labels).reshape(-1),
                        n.reshape(-1)]).to(torch.int32)
    host = packed.cpu().numpy()
    flat, n = host[:B * T], host[B * T:].astype(np.int64)
    at = np.flatnonzero(flat >= 0)
    b, s = np.divmod(at, T)
    ends = np.empty_like(s)
    ends[:-1] = s[1:]
    last = np.ones(len(s), bool)
    last[:-1] = b[1:] != b[:-1]
    ends[last] = n[b[last]]
    return np.stack([s, ends - s, flat[at]]), np.bincount(b, minlength=B)


_ONE_COPY = 1 << 16  # B x T up to which the rows of every position are copied at once


def _segment_rows(labels: Tensor, seg_start: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """((3, B*T) int64 rows: start, duration, label of the i-th segment of the batch in
    columns i < n (the rest unspecified), (B,) int64 segments per sequence), with torch
    ops only (no host wait). seg_start is False at t >= L_b and in a sequence with no
    segmentation, so a sequence's segments end at the next start in it or at L_b."""
    B, T = labels.shape
    N, dev = B * T, labels.device
    flat = seg_start.reshape(-1)
    pos = torch.arange(N, device=dev)
    # the flat position of the i-th segment's first base at first[i]: starts scattered
    # in order, every other position into slot N. With n segments, first[n] keeps its
    # fill N when n < N (slot N is then garbage, read only past n), and slot N gets no
    # write when n = N: either way the last segment's next start is N (no sequence's)
    slot = torch.where(flat, torch.cumsum(flat, 0) - 1, N)
    first = torch.full((N + 1,), N, dtype=torch.int64, device=dev).scatter_(0, slot, pos)
    f, nxt = first[:N], first[1:N + 1]
    b = torch.div(f, T, rounding_mode="floor")
    own = b.clamp(max=B - 1)
    end = torch.where(torch.div(nxt, T, rounding_mode="floor") == b, nxt,
                      own * T + lengths[own])
    label = labels.reshape(-1)[f.clamp(max=N - 1)]
    rows = torch.stack([f - b * T, end - f, label])
    return rows, seg_start.sum(1)


def viterbi(
    scores, transition, duration_bias, lengths=None, *, start=None, end=None,
    proj_start=None, proj_end=None, allowed=None, backend="auto",
) -> Segmentation:
    """The highest-scoring segmentation of each sequence (arguments as `log_partition`)."""
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    module = _backend(x, backend)
    with torch.no_grad():
        x = x.replace(**{n: (getattr(x, n).detach() if getattr(x, n) is not None else None)
                         for n in FLOAT_FIELDS})
        score, labels, seg_start = module.viterbi(x)
    ok = torch.isfinite(score)
    labels = torch.where(ok[:, None], labels, torch.full_like(labels, -1))
    valid = torch.arange(x.T, device=labels.device) < x.lengths[:, None]
    seg_start = seg_start & valid & ok[:, None]
    # segments are built when first read (Segmentation.segments / segment_tensors)
    return Segmentation(score=score, labels=labels, seg_start=seg_start, lengths=x.lengths)


def marginals(
    scores, transition, duration_bias, lengths=None, *, start=None, end=None,
    proj_start=None, proj_end=None, allowed=None, backend="auto", ends: bool = False,
) -> tuple[Tensor, ...]:
    """Label marginals (B, T, C) and boundary marginals (B, T) (arguments as `log_partition`).

    label[b, t, c] = P(position t has label c); boundary[b, t] = P(a segment starts at t).
    With `ends`, a third: end[b, t, c] = P(a segment of label c ends at position t) (its
    last position; the gradient in `proj_end`), which factors as alpha * beta / Z at the
    boundary after t (annotate/posterior_bound.py). All are 0 at t >= L_b (and
    everywhere for a sequence with no allowed segmentation).
    """
    if ends and proj_end is None:
        proj_end = torch.zeros_like(torch.as_tensor(scores))
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    module = _backend(x, backend)
    with torch.no_grad():
        x = x.replace(**{n: (getattr(x, n).detach() if getattr(x, n) is not None else None)
                         for n in FLOAT_FIELDS})
        log_z, saved = module.forward(x, keep=True)
        grads = module.backward(x, saved, torch.ones_like(log_z),
                                wanted=("scores", "proj_start", "proj_end")[:2 + ends])
    out = grads["scores"], grads["proj_start"].sum(-1)
    return (*out, grads["proj_end"]) if ends else out
