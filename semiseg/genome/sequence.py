"""FASTA access: chromosome sizes, region fetch, one-hot encoding, N runs.

Plain FASTA is read with pyfaidx, bgzip-compressed FASTA with pysam. Regions are read
from disk on demand, so a genome never sits in memory.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import SemisegError
from ._util import check_region

# IUPAC code -> bases it stands for (N excluded: it always encodes as all zero).
_IUPAC = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG",
}


def _table(fractional: bool) -> np.ndarray:
    """(256, 5) float32: byte -> [A, C, G, T, lowercase]."""
    table = np.zeros((256, 5), dtype=np.float32)
    for code, bases in _IUPAC.items():
        if len(bases) > 1 and not fractional:
            continue
        for base in bases:
            col = "ACGT".index(base)
            table[ord(code), col] = 1.0 / len(bases)
            table[ord(code.lower()), col] = 1.0 / len(bases)
    for c in range(ord("a"), ord("z") + 1):
        table[c, 4] = 1.0
    return table


_TABLES = {"zero": _table(False), "fractional": _table(True)}


def onehot(seq: str | bytes, iupac: str = "zero", softmask: bool = False) -> np.ndarray:
    """One-hot encode a sequence.

    Args:
        seq: DNA letters, any case.
        iupac: ``"zero"``: only A/C/G/T(/U) are encoded, every other letter is an all-zero
            row; ``"fractional"``: ambiguity codes are split evenly over the bases they
            stand for (R = 0.5 A + 0.5 G). N is all zero either way.
        softmask: add a fifth column, 1.0 where the letter is lowercase.

    Returns:
        ``(len(seq), 4 or 5) float32``, columns A, C, G, T (, softmask).
    """
    if iupac not in _TABLES:
        raise ValueError(f"iupac must be 'zero' or 'fractional', got {iupac!r}")
    if isinstance(seq, str):
        seq = seq.encode("ascii", errors="replace")
    codes = np.frombuffer(seq, dtype=np.uint8)
    table = _TABLES[iupac]
    return table[codes] if softmask else table[:, :4][codes]


def read_chrom_sizes(path: str | os.PathLike) -> dict[str, int]:
    """Read a ``name<TAB>size`` file (``.sizes``, ``.genome`` or ``.fai``)."""
    from ._util import open_text

    sizes: dict[str, int] = {}
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            try:
                name, size = fields[0], int(fields[1])
                if size < 0:
                    raise ValueError
            except (IndexError, ValueError):
                raise SemisegError(
                    f"{path}:{lineno}: expected 'name size', got {line.strip()[:60]!r}"
                ) from None
            if name in sizes:
                raise SemisegError(f"{path}:{lineno}: chromosome {name} listed twice")
            sizes[name] = size
    if not sizes:
        raise SemisegError(f"{path}: no chromosomes (empty file)")
    return sizes


def check_chroms(chroms, sizes: dict[str, int], source: str) -> None:
    """A one-line error (--chroms) naming the chromosomes of `chroms` not in `sizes`."""
    missing = [c for c in chroms or () if c not in sizes]
    if missing:
        raise SemisegError(f"--chroms: {', '.join(missing[:8])} not in {source} "
                           f"({', '.join(list(sizes)[:8])})")


def _compression(path: str) -> str:
    """'plain', 'bgzip' or 'gzip' (plain gzip cannot be indexed)."""
    with open(path, "rb") as fh:
        head = fh.read(18)
    if head[:2] != b"\x1f\x8b":
        return "plain"
    # BGZF: FLG.FEXTRA set and an extra subfield 'BC'.
    if len(head) >= 14 and head[3] & 4 and head[12:14] == b"BC":
        return "bgzip"
    return "gzip"


class _FastaFile:
    """One FASTA file (plain via pyfaidx, bgzip via pysam)."""

    def __init__(self, path: str):
        self.path = path
        if not os.path.isfile(path):
            raise SemisegError(f"FASTA file not found: {path}")
        if os.path.getsize(path) == 0:
            raise SemisegError(f"{path}: empty FASTA file")
        kind = _compression(path)
        if kind == "gzip":
            raise SemisegError(
                f"{path} is gzip-compressed but not with bgzip; "
                "recompress it with 'bgzip' (or decompress it) so it can be indexed"
            )
        needed = [path + ".fai"] + ([path + ".gzi"] if kind == "bgzip" else [])
        # a missing index, or one older than the FASTA, is (re)built
        stale = [p for p in needed
                 if not os.path.exists(p) or os.path.getmtime(p) < os.path.getmtime(path)]
        folder = os.path.dirname(os.path.abspath(path))
        if stale and not os.access(folder, os.W_OK):
            what = "no index" if not os.path.exists(stale[0]) else "an index older than itself"
            raise SemisegError(
                f"{path} has {what} ({os.path.basename(stale[0])}) and its folder "
                f"{folder} is read-only; run 'samtools faidx' where it can be written, "
                "or copy the FASTA to a writable folder"
            )
        for p in stale:
            if os.path.exists(p):
                os.remove(p)
        self.kind = kind
        try:
            if kind == "plain":
                import pyfaidx

                self.handle = pyfaidx.Fasta(
                    path, as_raw=True, sequence_always_upper=False,
                    rebuild=bool(stale), build_index=True,
                )
                self.chrom_sizes = {name: len(rec) for name, rec in self.handle.records.items()}
            else:
                import pysam

                self.handle = pysam.FastaFile(path)
                self.chrom_sizes = dict(zip(self.handle.references, self.handle.lengths))
        except SemisegError:
            raise
        except Exception as err:  # pyfaidx/pysam report malformed files in their own types
            text = str(err).strip()
            msg = text.splitlines()[0] if text else type(err).__name__
            raise SemisegError(f"{path}: cannot read FASTA: {msg}") from None
        if not self.chrom_sizes:
            raise SemisegError(f"{path}: no sequences in FASTA file")

    def fetch(self, chrom: str, start: int, end: int) -> str:
        if self.kind == "plain":
            return self.handle[chrom][start:end]
        return self.handle.fetch(chrom, start, end)


_LETTERS = np.zeros(256, bool)  # what a sequence line may hold: letters (IUPAC codes,
_LETTERS[[*range(65, 91), *range(97, 123), ord("-"), ord("*"), ord(".")]] = True
# and masks such as X), gaps, stops


def _check_letters(seq: str, path: str, chrom: str, start: int) -> None:
    """A one-line error at the first character of `seq` (read from `path` at chrom:start)
    that is not a letter, '-', '*' or '.' (a digit, punctuation or a stray byte: a
    corrupt or mislabelled file, not a genome)."""
    codes = np.frombuffer(seq.encode("latin-1", errors="replace"), np.uint8)
    bad = np.flatnonzero(~_LETTERS[codes])
    if bad.size:
        i = int(bad[0])
        raise SemisegError(f"{path}: {chrom}:{start + i + 1}: {seq[i]!r} is not a sequence "
                           "letter (A-Z, a-z, '-', '*' or '.')")


class Fasta:
    """One or more FASTA files opened for region access.

    Args:
        paths: a plain or bgzip-compressed FASTA, or a list of them (e.g. one file per
            chromosome); chromosome names must be unique across the files. The index
            (``.fai``, and ``.gzi`` for bgzip) is built next to each file when missing.

    Attributes:
        chrom_sizes: ``dict[str, int]`` in file order.

    Raises:
        SemisegError: unreadable, plain-gzip, malformed or empty file, a chromosome in two
            files, or a missing index in a folder that cannot be written; from `fetch`, a
            character in the sequence that is not a letter, '-', '*' or '.'.
    """

    def __init__(self, paths: str | os.PathLike | list):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.paths = [os.fspath(p) for p in paths]
        if not self.paths:
            raise SemisegError("no FASTA file given")
        self._files: list[_FastaFile] = []
        self._where: dict[str, _FastaFile] = {}
        self.chrom_sizes: dict[str, int] = {}
        try:
            for path in self.paths:
                f = _FastaFile(path)
                self._files.append(f)
                for name, size in f.chrom_sizes.items():
                    if name in self._where:
                        raise SemisegError(
                            f"chromosome {name} is in both {self._where[name].path} and {path}"
                        )
                    self._where[name] = f
                    self.chrom_sizes[name] = size
        except BaseException:
            self.close()
            raise
        self._n_runs: dict[str, np.ndarray] = {}

    def __enter__(self) -> Fasta:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for f in self._files:
            f.handle.close()
        self._files = []

    def fetch(self, chrom: str, start: int = 0, end: int | None = None) -> str:
        """The sequence of ``[start, end)`` in its original case (``end`` None = to the end)."""
        if end is None:
            end = self.chrom_sizes.get(chrom, 0)
        check_region(self.chrom_sizes, chrom, start, end)
        if start == end:
            return ""
        f = self._where[chrom]
        seq = f.fetch(chrom, start, end)
        _check_letters(seq, f.path, chrom, start)
        return seq

    def onehot(self, chrom: str, start: int = 0, end: int | None = None,
               iupac: str = "zero", softmask: bool = False) -> np.ndarray:
        """``(T, 4 or 5) float32`` one-hot of ``[start, end)``; see :func:`onehot`."""
        return onehot(self.fetch(chrom, start, end), iupac=iupac, softmask=softmask)

    def n_runs(self, chrom: str, min_length: int = 1) -> np.ndarray:
        """``(R, 2) int64`` [start, end) runs of N/n at least ``min_length`` bp long.

        The chromosome is scanned in 4 Mb chunks (once; the result is cached).
        """
        if chrom not in self._n_runs:
            self._n_runs[chrom] = self._scan_n(chrom)
        runs = self._n_runs[chrom]
        return runs[(runs[:, 1] - runs[:, 0]) >= min_length]

    def _scan_n(self, chrom: str, chunk: int = 1 << 22) -> np.ndarray:
        check_region(self.chrom_sizes, chrom, 0, 0)
        size = self.chrom_sizes[chrom]
        starts: list[np.ndarray] = []
        ends: list[np.ndarray] = []
        for lo in range(0, size, chunk):
            hi = min(size, lo + chunk)
            codes = np.frombuffer(self.fetch(chrom, lo, hi).encode("ascii"), dtype=np.uint8)
            isn = np.zeros(len(codes) + 2, dtype=np.int8)
            isn[1:-1] = (codes == 78) | (codes == 110)
            edges = np.diff(isn)
            starts.append(np.flatnonzero(edges == 1) + lo)
            ends.append(np.flatnonzero(edges == -1) + lo)
        s = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        e = np.concatenate(ends) if ends else np.zeros(0, np.int64)
        # Join runs cut by a chunk boundary.
        if len(s) > 1:
            joined = s[1:] == e[:-1]
            s = np.concatenate([s[:1], s[1:][~joined]])
            e = np.concatenate([e[:-1][~joined], e[-1:]])
        return np.stack([s, e], axis=1).astype(np.int64).reshape(-1, 2)
