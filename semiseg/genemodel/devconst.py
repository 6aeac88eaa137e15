"""Small constant index tensors kept on each device.

`torch.tensor([...], device=cuda)` copies from host memory and waits for the device to
reach it; in a training step's sequence masks and site terms that was 30 waits a step,
each leaving the GPU idle while the host queued the next kernels. These helpers make
each constant once per device and reuse it.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import Tensor


@lru_cache(maxsize=256)
def _ids(values: tuple[int, ...], device: torch.device) -> Tensor:
    return torch.tensor(values, dtype=torch.long).to(device)


def ids_on(values, device) -> Tensor:
    """The int64 tensor of `values` on `device` (made once per device and values)."""
    return _ids(tuple(int(v) for v in values), torch.device(device))


def isin_ids(x: Tensor, values) -> Tensor:
    """torch.isin(x, values) with the values' tensor kept on x's device."""
    return torch.isin(x, ids_on(values, x.device))
