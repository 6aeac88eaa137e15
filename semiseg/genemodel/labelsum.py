"""Per-position scores added to a few labels' emissions, assembled column by column."""

from __future__ import annotations

import torch
from torch import Tensor


def kind_labels(layout, kind: str) -> list[int]:
    """The internal labels of a FrameLayout whose kind is `kind` (e.g. "start+"), fixed
    when a module is built: label_sum's columns, no mask tensor and no device sync."""
    return [i for i, k in enumerate(layout.kind) if layout.kind_names[k] == kind]


def label_sum(parts: list[tuple[Tensor, list[int]]], n_labels: int) -> Tensor | None:
    """(..., n_labels) from (values (...), labels) pairs: column c is the sum, in the
    pairs' order, of the values of the pairs that name c, and 0 where none does; None for
    no pairs. The same bits as summing values[..., None] * mask over the pairs with 0/1
    label masks (they add exact zeros elsewhere), without a (..., n_labels) tensor per pair: on a
    whole chromosome those were most of the site and ORF-length terms' time."""
    if not parts:
        return None
    cols: list[Tensor | None] = [None] * n_labels
    for v, labels in parts:
        for c in labels:
            cols[c] = v if cols[c] is None else cols[c] + v
    zero = torch.zeros_like(parts[0][0])
    return torch.stack([zero if c is None else c for c in cols], dim=-1)
