"""IUPAC nucleotide codes, and the check of a splice-site motif written in them (no torch:
config.py validates annotate.donor_motif with it)."""

from __future__ import annotations

from ..errors import SemisegError

IUPAC = {"A": "A", "C": "C", "G": "G", "T": "T", "R": "AG", "Y": "CT", "S": "CG",
         "W": "AT", "K": "GT", "M": "AC", "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG",
         "N": "ACGT"}


def check_motif(motif: str, what: str = "--donor-motif") -> str:
    """`motif` in upper case if it is a donor motif (IUPAC letters, starting GT), else a
    one-line error naming `what`."""
    m = motif.strip().upper()
    if not m.startswith("GT") or any(ch not in IUPAC for ch in m):
        raise SemisegError(f"{what}: expected IUPAC letters (ACGT RYSWKMBDHV N) starting "
                           f"with GT, the intron's first bases, got {motif!r}")
    return m
