"""Backend choice, autograd wiring and the public functions of SPEC.md.

Every backend is a module with three functions over a `CRFInputs` (inputs.py):

    forward(x) -> (log_z (B,), saved)
        log Z per sequence (-inf where no segmentation is allowed) and whatever the
        backward pass needs (checkpoints); nothing O(T*K*C).
    backward(x, saved, grad_log_z (B,)) -> dict[str, Tensor]
        the gradient of sum_b grad_log_z[b] * log Z_b with respect to every floating
        input named in inputs.FLOAT_FIELDS, in the shape and dtype of that input.
        "proj_start" and "proj_end" are returned even when x has none (as if they
        were zeros): d log Z / d proj_start[b, t, c] is the probability that a segment
        of label c starts at t, which gives the boundary marginals. A sequence whose
        log Z is -inf contributes zero gradient.
    viterbi(x) -> (score (B,), labels (B, T) int64, seg_start (B, T) bool)
        the best score, the label of every position (-1 at t >= L_b) and whether a
        segment of the best path starts at t.

The torch backend is `reference.py`; the Triton one is the package `kernels/`,
imported only when first used (it imports triton); the compiled CPU backend is `cpu.py`
(numba), likewise imported only when first used.

"auto" picks Triton for float32 CUDA tensors the kernels support, the compiled CPU
backend for CPU tensors (float32 and float64: it computes in float64) when numba is
installed, and the torch backend otherwise.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import Tensor

from .inputs import FLOAT_FIELDS, CRFInputs, check_inputs

BACKENDS = ("auto", "torch", "triton", "numba")


@dataclass
class Segmentation:
    """The best segmentation of each sequence.

    score:    (B,) tensor, the score of the best segmentation (-inf where none is allowed)
    segments: list (one per sequence) of (start, duration, label) tuples of Python ints,
              in order, covering [0, L_b); empty where no segmentation is allowed
    labels:   (B, T) int64, the label of each position, -1 at t >= L_b
    """

    score: Tensor
    segments: list[list[tuple[int, int, int]]]
    labels: Tensor


def _triton_module() -> ModuleType:
    from . import kernels  # imports triton: only now, when a kernel is first needed

    return kernels


_warned_no_numba = False


def _cpu_module(required: bool) -> ModuleType | None:
    """The compiled CPU backend, or None (with a warning, once) if numba is missing."""
    global _warned_no_numba
    try:
        from . import cpu  # imports numba: only now, when the backend is first needed
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
    return cpu


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
            use_triton = False  # outside the kernels' scope (see kernels.supports)
        backend = "triton" if use_triton else "torch"
    if backend == "triton":
        if x.scores.dtype == torch.float64:
            backend = "torch"  # float64 always runs the exact torch backend (SPEC.md)
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
        log_z, saved = module.forward(x)
        ctx.module, ctx.x, ctx.saved = module, x, saved
        return log_z

    @staticmethod
    def backward(ctx, grad_log_z):
        grads = ctx.module.backward(ctx.x, ctx.saved, grad_log_z.contiguous())
        out = []
        for i, name in enumerate(FLOAT_FIELDS):
            need = ctx.needs_input_grad[2 + i]
            out.append(grads[name] if need and getattr(ctx.x, name) is not None else None)
        return (None, None, *out)


def log_partition(
    scores, transition, duration_bias, lengths=None, *, start=None, end=None,
    proj_start=None, proj_end=None, allowed=None, backend="auto",
) -> Tensor:
    """log Z (B,) of the semi-CRF of SPEC.md, differentiable in every floating input.

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
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    module = _backend(x, backend)
    return _LogPartition.apply(module, x, *(getattr(x, n) for n in FLOAT_FIELDS))


def _segments(labels: Tensor, seg_start: Tensor, lengths: Tensor, ok: Tensor):
    labels_c, starts_c, lengths_c, ok_c = (t.cpu() for t in (labels, seg_start, lengths, ok))
    out = []
    for b in range(labels_c.shape[0]):
        if not bool(ok_c[b]):
            out.append([])
            continue
        L = int(lengths_c[b])
        pos = torch.nonzero(starts_c[b, :L]).flatten().tolist()
        ends = pos[1:] + [L]
        lab = labels_c[b, pos].tolist() if pos else []
        out.append([(s, e - s, c) for s, e, c in zip(pos, ends, lab)])
    return out


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
    return Segmentation(score=score, segments=_segments(labels, seg_start, x.lengths, ok),
                        labels=labels)


def marginals(
    scores, transition, duration_bias, lengths=None, *, start=None, end=None,
    proj_start=None, proj_end=None, allowed=None, backend="auto",
) -> tuple[Tensor, Tensor]:
    """Label marginals (B, T, C) and boundary marginals (B, T) (arguments as `log_partition`).

    label[b, t, c] = P(position t has label c); boundary[b, t] = P(a segment starts at t).
    Both are 0 at t >= L_b (and everywhere for a sequence with no allowed segmentation).
    """
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    module = _backend(x, backend)
    with torch.no_grad():
        x = x.replace(**{n: (getattr(x, n).detach() if getattr(x, n) is not None else None)
                         for n in FLOAT_FIELDS})
        log_z, saved = module.forward(x)
        grads = module.backward(x, saved, torch.ones_like(log_z))
    return grads["scores"], grads["proj_start"].sum(-1)
