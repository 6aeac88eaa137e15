"""Small sequence helpers shared by the gene-model tests (plain strings as the oracle's
input: reverse complements, one-hot arrays, base codes, the built-in gene layout; a
piece of chrI as a FASTA for the shipped model, and a BED read back as labels)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from semiseg.genemodel.frames import FrameLayout
from semiseg.genome.scheme import load_scheme

COMP = str.maketrans("ACGTNacgtn", "TGCANtgcan")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED_MODEL = os.path.join(ROOT, "semiseg", "models", "yeast_cds_frames.pt")
BG, CP, CM, OTHER = 0, 1, 2, 3  # intergenic, CDS+, CDS-, anything else (bed_labels)


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


def chrI_piece(directory, start: int, end: int) -> tuple[str, str]:
    """chrI[start:end] of data/yeast (upper case) and the path of a FASTA holding it as
    one record "s", written in `directory`."""
    from semiseg.genome import Fasta

    with Fasta(os.path.join(ROOT, "data", "yeast", "chrI.fa")) as fa:
        seq = fa.fetch("chrI", start, end).upper()
    path = Path(directory) / "s.fa"
    path.write_text(f">s\n{seq}\n")
    return seq, str(path)


def bed_labels(path, n: int) -> np.ndarray:
    """(n,) labels painted from an annotate BED of the demo scheme: BG, CP, CM, else OTHER."""
    lab = np.zeros(n, np.int64)
    codes = {"intergenic": BG, "CDS+": CP, "CDS-": CM}
    for r in (line.split("\t") for line in Path(path).read_text().splitlines()):
        lab[int(r[1]):int(r[2])] = codes.get(r[3], OTHER)
    return lab
