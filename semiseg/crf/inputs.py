"""Argument checks at the API edge and the one bundle every backend consumes.

`check_inputs` turns the public arguments of docs/contract.md into a `CRFInputs`: shapes and
devices checked, half types upcast to float32, every floating input cast to the dtype of
`scores`, `lengths` an int64 tensor on the device of `scores`. A backend never checks
arguments again; it reads a `CRFInputs` and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
from torch import Tensor


@dataclass
class CRFInputs:
    """Validated semi-CRF inputs (see docs/contract.md for the meaning of each term).

    scores:        (B, T, C) float32 or float64
    lengths:       (B,) int64, 1 <= L_b <= T, same device as scores
    transition:    (C, C) [src, dst], or (P, C, C) [(d-1) mod P, src, dst] (d = the
                   destination segment's duration): P >= K fully duration-dependent,
                   1 <= P < K periodic
    duration_bias: (K, C); K = duration_bias.shape[0] is the maximum duration
    start, end:    (C,) or None
    proj_start, proj_end: (B, T, C) or None
    allowed:       (B, T, C) bool or None
    """

    scores: Tensor
    lengths: Tensor
    transition: Tensor
    duration_bias: Tensor
    start: Tensor | None = None
    end: Tensor | None = None
    proj_start: Tensor | None = None
    proj_end: Tensor | None = None
    allowed: Tensor | None = None

    @property
    def batch(self) -> int:
        return self.scores.shape[0]

    @property
    def T(self) -> int:
        return self.scores.shape[1]

    @property
    def C(self) -> int:
        return self.scores.shape[2]

    @property
    def K(self) -> int:
        return self.duration_bias.shape[0]

    @property
    def period(self) -> int:
        """P of a (P, C, C) transition; 1 for a static (C, C) one."""
        return self.transition.shape[0] if self.transition.dim() == 3 else 1

    @property
    def duration_dependent(self) -> bool:
        """Fully duration-dependent: (P, C, C) with P >= K, every duration its own slice
        (the O(T K C^2) form). A (P, C, C) transition with P < K is periodic instead and
        factorises like the static one (see `periodic`)."""
        return self.transition.dim() == 3 and self.transition.shape[0] >= self.K

    @property
    def periodic(self) -> bool:
        """A (P, C, C) transition with P < K: P gamma vectors per position."""
        return self.transition.dim() == 3 and self.transition.shape[0] < self.K

    def replace(self, **changes) -> CRFInputs:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return CRFInputs(**values)


FLOAT_FIELDS = ("scores", "transition", "duration_bias", "start", "end", "proj_start", "proj_end")


def param_grads_wanted(wanted) -> bool:
    """Whether a backward asked for `wanted` gradients (None: all; dispatch.py) must form
    those of the duration bias and the transition (sums over every position and
    duration), which every backend may otherwise skip."""
    return wanted is None or bool({"duration_bias", "transition"} & set(wanted))


def _float(name: str, x, device) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got dtype {x.dtype}")
    if x.device != device:
        raise ValueError(f"{name}: on device {x.device}, but scores are on {device}")
    return x


def check_inputs(
    scores,
    transition,
    duration_bias,
    lengths=None,
    *,
    start=None,
    end=None,
    proj_start=None,
    proj_end=None,
    allowed=None,
    deferred: bool = False,
):
    """Check the public arguments (docs/contract.md) and return them as a `CRFInputs`.

    Raises ValueError naming the argument and what was expected. With `deferred`, returns
    (CRFInputs, verdict): the values' test (NaN, infinities) of CUDA inputs then runs
    when verdict() is called, on a stream of its own from the point of the caller's
    stream where check_inputs returned (the inputs as they were then), beside whatever
    the caller queued since; verdict() waits for the test alone and raises if it failed.
    So a caller queues its kernels first (the GPU starts on them before the test's
    launches) and calls verdict() before handing out results. Shapes, devices and lengths
    are checked before returning either way (lengths bound every kernel's memory
    accesses).
    """
    B, T, C, dtype = _check_shapes(scores, transition, duration_bias, start, end,
                                   proj_start, proj_end, allowed)
    device = scores.device
    lengths = _check_lengths(lengths, B, T, device)

    values = dict(
        scores=scores,
        transition=transition,
        duration_bias=duration_bias,
        start=start,
        end=end,
        proj_start=proj_start,
        proj_end=proj_end,
    )
    names = [name for name, v in values.items() if v is not None]
    for name in names:
        if values[name].dtype != dtype:
            values[name] = values[name].to(dtype)
    x = CRFInputs(lengths=lengths, allowed=allowed, **values)
    if not (deferred and scores.is_cuda):
        _verdict(_value_stats(names, values).tolist(), names, values)  # one host sync
        return (x, lambda: None) if deferred else x
    # the inputs are ready at this point of the caller's stream: the test reads them from
    # here on a stream of its own, queued when verdict() is called (after the caller's
    # kernels), so that neither waits for the other's launches
    ready = torch.cuda.Event()
    ready.record(torch.cuda.current_stream(scores.device))

    def verdict():
        side = _test_stream(scores.device)
        side.wait_event(ready)
        with torch.cuda.stream(side):
            stats = _value_stats(names, values)
            host = torch.empty(stats.shape, dtype=stats.dtype, pin_memory=True)
            host.copy_(stats, non_blocking=True)
            done = torch.cuda.Event()
            done.record(side)
        done.synchronize()
        _verdict(host.tolist(), names, values)

    return x, verdict


def _check_shapes(scores, transition, duration_bias, start, end, proj_start, proj_end,
                  allowed) -> tuple[int, int, int, torch.dtype]:
    """check_inputs' types, devices and shapes: (B, T, C, the computation's dtype)."""
    if not isinstance(scores, Tensor):
        raise ValueError(f"scores: expected a torch.Tensor, got {type(scores).__name__}")
    if scores.dim() != 3:
        raise ValueError(f"scores: expected shape (B, T, C), got {tuple(scores.shape)}")
    device = scores.device
    _float("scores", scores, device)
    B, T, C = scores.shape
    if B < 1 or T < 1:
        raise ValueError(f"scores: B and T must be >= 1, got shape {tuple(scores.shape)}")
    if C < 1:
        raise ValueError(f"scores: C (number of labels) must be >= 1, got {C}")
    dtype = scores.dtype if scores.dtype in (torch.float32, torch.float64) else torch.float32

    _float("duration_bias", duration_bias, device)
    if duration_bias.dim() != 2 or duration_bias.shape[1] != C:
        raise ValueError(
            f"duration_bias: expected shape (K, {C}), got {tuple(duration_bias.shape)}"
        )
    K = duration_bias.shape[0]
    if K < 1:
        raise ValueError("duration_bias: K (maximum duration, its first dimension) must be >= 1")

    _float("transition", transition, device)
    tshape = tuple(transition.shape)
    if not (tshape == (C, C) or (len(tshape) == 3 and tshape[1:] == (C, C) and tshape[0] >= 1)):
        raise ValueError(
            f"transition: expected shape ({C}, {C}) or (P, {C}, {C}) with P >= 1 "
            f"(P >= {K}: fully duration-dependent; P < {K}: periodic), got {tshape}"
        )
    for name, v in (("start", start), ("end", end)):
        if v is not None:
            _float(name, v, device)
            if tuple(v.shape) != (C,):
                raise ValueError(f"{name}: expected shape ({C},), got {tuple(v.shape)}")
    for name, v in (("proj_start", proj_start), ("proj_end", proj_end)):
        if v is not None:
            _float(name, v, device)
            if tuple(v.shape) != (B, T, C):
                raise ValueError(f"{name}: expected shape ({B}, {T}, {C}), got {tuple(v.shape)}")
    if allowed is not None:
        if not isinstance(allowed, Tensor) or allowed.dtype != torch.bool:
            raise ValueError("allowed: expected a bool tensor of shape (B, T, C)")
        if allowed.device != device:
            raise ValueError(f"allowed: on device {allowed.device}, but scores are on {device}")
        if tuple(allowed.shape) != (B, T, C):
            raise ValueError(f"allowed: expected shape ({B}, {T}, {C}), got {tuple(allowed.shape)}")
    return B, T, C, dtype


def _check_lengths(lengths, B: int, T: int, device) -> Tensor:
    """check_inputs' lengths: (B,) int64 on `device`, each in [1, T] (all T if None)."""
    if lengths is None:
        lengths = torch.full((B,), T, dtype=torch.int64, device=device)
    else:
        if not isinstance(lengths, Tensor):
            lengths = torch.as_tensor(lengths)
        if lengths.dtype.is_floating_point or lengths.dtype == torch.bool or lengths.is_complex():
            raise ValueError(f"lengths: expected an integer tensor, got dtype {lengths.dtype}")
        if tuple(lengths.shape) != (B,):
            raise ValueError(f"lengths: expected shape ({B},), got {tuple(lengths.shape)}")
        lengths = lengths.to(device=device, dtype=torch.int64)
        lo, hi = torch.stack(torch.aminmax(lengths)).tolist()  # one host sync
        if lo < 1 or hi > T:
            raise ValueError(f"lengths: every length must lie in [1, {T}], got min {lo}, max {hi}")
    return lengths


def _value_stats(names: list, values: dict) -> Tensor:
    """(min, max) of every floating input, flat: NaN anywhere makes both NaN."""
    return torch.stack([m for n in names for m in torch.aminmax(values[n])])


_TEST_STREAMS: dict = {}  # device -> the deferred value test's CUDA stream


def _test_stream(device):
    if device not in _TEST_STREAMS:
        _TEST_STREAMS[device] = torch.cuda.Stream(device=device)
    return _TEST_STREAMS[device]


def _verdict(flat: list, names: list, values: dict) -> None:
    """Raise if the (min, max) pairs in flat show a NaN or a forbidden infinity."""
    for i, name in enumerate(names):
        lo, hi = flat[2 * i], flat[2 * i + 1]
        finite = name in ("scores", "proj_start", "proj_end")
        if not hi < math.inf or (finite and not lo > -math.inf):  # NaN fails both
            _raise_bad_values(values)  # names the input and what is wrong with it


def _raise_bad_values(values: dict) -> None:
    for name, v in values.items():
        if v is None:
            continue
        if torch.isnan(v).any():
            raise ValueError(f"{name}: contains NaN")
        if name in ("scores", "proj_start", "proj_end") and torch.isinf(v).any():
            raise ValueError(f"{name}: contains an infinity (only finite values are allowed)")
        if torch.isposinf(v).any():
            raise ValueError(f"{name}: contains +inf (only finite values and -inf are allowed)")
