"""Per-position scores added to a few labels' emissions, assembled column by column."""

from __future__ import annotations

import torch
from torch import Tensor

from .devconst import ids_on


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
    cols = _column_sums(parts)
    zero = torch.zeros_like(parts[0][0])
    return torch.stack([cols.get(c, zero) for c in range(n_labels)], dim=-1)


def _column_sums(parts: list[tuple[Tensor, list[int]]]) -> dict:
    """column -> the sum, in the pairs' order, of the values of the pairs that name it."""
    cols: dict = {}
    for v, labels in parts:
        for c in labels:
            cols[c] = v if c not in cols else cols[c] + v
    return cols


def label_add(scores: Tensor, parts: list[tuple[Tensor, list[int]]]) -> Tensor:
    """scores + label_sum(parts, C).to(scores.dtype), with the same bits in every column
    that a pair names (scores + that column's sum) and the others left as they are, by
    one index_add over the named columns: no (..., C) tensor of zeros to stack and add
    (on a whole chromosome on the CPU, about a third of a site or ORF term's time)."""
    cols = _column_sums(parts)
    if not cols:
        return scores
    idx = sorted(cols)
    vals = torch.stack([cols[c] for c in idx], dim=-1).to(scores.dtype)
    return scores.index_add(-1, ids_on(idx, scores.device), vals)  # (no copy per call)
