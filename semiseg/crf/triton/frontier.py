"""The frontier of certified max-sum windows on a device (annotate/device_maxsum.py):
where each window's frontier tracebacks meet, computed beside the backpointers
(jit/frontier.py) so that they need not reach the host first."""

from __future__ import annotations

import torch
from torch import Tensor

from .jit.frontier import _coalesce_kernel, _trace_kernel
from .schedule import _pow2


def coalesce(bp_d: Tensor, bp_c: Tensor, lengths: Tensor, lows: Tensor) -> Tensor:
    """seams._coalesce of each window b from periodic.viterbi_tables' backpointers
    (B, T, C) over its first lengths[b] positions, with the frontier from lows[b]:
    (B, 2) int64 rows (t0, c0), (0, -1) where the tracebacks meet only at the entry."""
    B, T, C = bp_d.shape
    state = torch.zeros(B, T + 1, C, device=bp_d.device, dtype=torch.uint8)
    out = torch.empty(B, 2, device=bp_d.device, dtype=torch.int64)
    _coalesce_kernel[(B,)](bp_d, bp_c, lengths, lows, state, out, T, C, CP=_pow2(C),
                           num_warps=1)
    return out


def trace(bp_d: Tensor, bp_c: Tensor, tops: Tensor) -> tuple[Tensor, Tensor]:
    """seams._trace of each window b from its boundary state tops[b] = (t, c) (B, 2)
    int64 down to its first boundary, on the device: (labels (B, T) int64, -1 off the
    path; starts (B, T + 1) uint8, 1 at each boundary the path passes below t)."""
    B, T, C = bp_d.shape
    labels = torch.full((B, T), -1, device=bp_d.device, dtype=torch.int64)
    starts = torch.zeros(B, T + 1, device=bp_d.device, dtype=torch.uint8)
    _trace_kernel[(B,)](bp_d, bp_c, tops.contiguous(), labels, starts, T, C, BLOCK=64,
                        num_warps=1)
    return labels, starts
