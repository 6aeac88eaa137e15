"""Small sequence helpers shared by the gene-model tests (plain strings as the oracle's
input: reverse complements, one-hot arrays, base codes, the built-in gene layout)."""

from __future__ import annotations

import numpy as np
import torch

from semiseg.genome.frames import FrameLayout
from semiseg.genome.scheme import load_scheme

COMP = str.maketrans("ACGTN", "TGCAN")


def rc(s: str) -> str:
    return s.translate(COMP)[::-1]


def onehot(seq: str) -> np.ndarray:
    """(T, 4) float32, A C G T columns; N (or anything else) all zero."""
    x = np.zeros((len(seq), 4), np.float32)
    for i, b in enumerate(seq):
        if b in "ACGT":
            x[i, "ACGT".index(b)] = 1
    return x


def codes_of(seq: str) -> torch.Tensor:
    """(1, T) base codes: A C G T = 0..3, else 4."""
    return torch.tensor([["ACGT".index(b) if b in "ACGT" else 4 for b in seq]])


def layout() -> FrameLayout:
    """The internal labels of the built-in gene_structure scheme."""
    return FrameLayout.from_scheme(load_scheme("gene_structure"))
