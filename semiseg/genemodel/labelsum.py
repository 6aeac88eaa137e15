"""Per-position scores added to a few labels' emissions, assembled column by column."""

from __future__ import annotations

import torch
from torch import Tensor


def mask_labels(mask: Tensor) -> list[int]:
    """The labels a 0/1 float label mask (C,) selects (read once, when a module is built:
    no device sync in forward)."""
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("label mask: expected 0/1 entries")
    return torch.nonzero(mask).flatten().tolist()


def label_sum(parts: list[tuple[Tensor, list[int]]], n_labels: int) -> Tensor | None:
    """(..., n_labels) from (values (...), labels) pairs: column c is the sum, in the
    pairs' order, of the values of the pairs that name c, and 0 where none does; None for
    no pairs. The same bits as summing values[..., None] * mask over the pairs (a 0/1
    mask adds exact zeros elsewhere), without a (..., n_labels) tensor per pair: on a
    whole chromosome those were most of the site and ORF-length terms' time."""
    if not parts:
        return None
    cols: list[Tensor | None] = [None] * n_labels
    for v, labels in parts:
        for c in labels:
            cols[c] = v if cols[c] is None else cols[c] + v
    zero = torch.zeros_like(parts[0][0])
    return torch.stack([zero if c is None else c for c in cols], dim=-1)
