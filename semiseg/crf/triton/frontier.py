"""The frontier of certified max-sum windows on a device (annotate/device_maxsum.py):
where each window's frontier tracebacks meet, computed beside the backpointers
(jit/frontier.py) so that they need not reach the host first."""

from __future__ import annotations

import torch
from torch import Tensor

from .jit.frontier import _coalesce_kernel
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
