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
    table[_LOWER, 4] = 1.0
    return table


_LOWER = np.arange(ord("a"), ord("z") + 1)  # soft-masked letters (lowercase)


def softmasked(seq: str | bytes) -> np.ndarray:
    """``(len(seq),) bool``: where the letter is lowercase (soft-masked), as
    :func:`onehot`'s softmask column reads it."""
    if isinstance(seq, str):
        seq = seq.encode("ascii", errors="replace")
    b = np.frombuffer(seq, dtype=np.uint8)
    return (b >= _LOWER[0]) & (b <= _LOWER[-1])


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


def index_cache() -> str | None:
    """The folder for FASTA indexes that cannot live beside their FASTA:
    $SEMISEG_CACHE/fai, else $XDG_CACHE_HOME/semiseg/fai (~/.cache/semiseg/fai); None
    when it cannot be created or written."""
    root = os.environ.get("SEMISEG_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "semiseg")
    folder = os.path.join(root, "fai")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def fai_matches(fasta: str, fai: str) -> bool:
    """Whether a .fai index describes the plain FASTA `fasta` as it is now: every
    record's header line (its name) sits just before the offset the index gives, each
    record ends (by the index's length and line widths) where the next header begins,
    and nothing but blank space follows the last one. A FASTA edited, grown, cut or
    rewrapped since the index was made fails this, whatever the files' dates say (an
    index newer than its FASTA was trusted: sequences silently cut or dropped)."""
    try:
        size = os.path.getsize(fasta)
        rows = []
        with open(fai) as fh:
            for line in fh:
                f = line.rstrip("\n").split("\t")
                if len(f) < 5:
                    return False
                rows.append((f[0], *map(int, f[1:5])))
        if not rows:
            return False
        with open(fasta, "rb") as fh:
            prev = 0
            for name, length, offset, bases, width in rows:
                if bases <= 0 or width < bases or length < 0 or not prev < offset <= size \
                        or offset - prev > (1 << 20):
                    return False
                fh.seek(prev)
                head = fh.read(offset - prev).lstrip(b"\r\n")
                if not head.startswith(b">") or not head.endswith(b"\n") \
                        or head.count(b"\n") != 1:
                    return False
                words = head[1:].split()
                if not words or words[0].decode("utf-8", "replace") != name:
                    return False
                full, rem = divmod(length, bases)
                end = offset + full * width + rem
                if end > size + (width - bases):
                    return False
                prev = min(end, size)
            fh.seek(prev)
            tail = fh.read(4096)
            return not tail.strip() and prev + len(tail) == size
    except (OSError, ValueError):
        return False


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
        self.kind = kind
        self._tmpdir = None
        fai, gzi = self._index_paths(path, kind)
        try:
            if kind == "plain":
                import pyfaidx

                self.handle = pyfaidx.Fasta(
                    path, indexname=fai, as_raw=True, sequence_always_upper=False,
                    rebuild=False, build_index=True,
                )
                self.chrom_sizes = {name: len(rec) for name, rec in self.handle.records.items()}
            else:
                import pysam

                if not os.path.exists(fai):
                    pysam.faidx(path, "--fai-idx", fai, "--gzi-idx", gzi)
                self.handle = pysam.FastaFile(path, filepath_index=fai,
                                              filepath_index_compressed=gzi)
                self.chrom_sizes = dict(zip(self.handle.references, self.handle.lengths))
        except SemisegError:
            raise
        except Exception as err:  # pyfaidx/pysam report malformed files in their own types
            text = str(err).strip()
            msg = text.splitlines()[0] if text else type(err).__name__
            raise SemisegError(f"{path}: cannot read FASTA: {msg}") from None
        if not self.chrom_sizes:
            raise SemisegError(f"{path}: no sequences in FASTA file")

    @staticmethod
    def _writable(folder: str) -> bool:
        return os.access(folder, os.W_OK)

    def _index_paths(self, path: str, kind: str) -> tuple[str, str]:
        """Where the index (.fai, and .gzi for bgzip) is read or built. The one beside
        the FASTA when it fits the file (plain: `fai_matches`; bgzip: not older than
        it); a missing one is built there when the folder is writable (as samtools
        does). A stale index is never trusted or overwritten, and nothing is written
        beside a FASTA in a read-only folder: the index is then built in the cache
        (`index_cache`), keyed by the FASTA's path, size and mtime."""
        fai, gzi = path + ".fai", path + ".gzi"
        here = [fai] + ([gzi] if kind == "bgzip" else [])
        if all(os.path.exists(p) for p in here):
            fits = (fai_matches(path, fai) if kind == "plain" else
                    all(os.path.getmtime(p) >= os.path.getmtime(path) for p in here))
            if fits:
                return fai, gzi
        elif not any(os.path.exists(p) for p in here) and self._writable(
                os.path.dirname(os.path.abspath(path))):
            return fai, gzi
        folder = index_cache()
        if folder is None:  # no writable cache: a temporary folder, removed at close
            import tempfile

            folder = self._tmpdir = tempfile.mkdtemp(prefix="semiseg-fai-")
        st = os.stat(path)
        import hashlib

        key = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:16]
        base = os.path.join(folder, f"{key}-{st.st_size}-{st.st_mtime_ns}-"
                                    f"{os.path.basename(path)}")
        cfai, cgzi = base + ".fai", base + ".gzi"
        if os.path.exists(cfai) and kind == "plain" and not fai_matches(path, cfai):
            os.remove(cfai)  # a cached index that does not fit: built again
        return cfai, cgzi

    def close(self) -> None:
        self.handle.close()
        if self._tmpdir:
            import shutil

            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

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
            (``.fai``, and ``.gzi`` for bgzip) is built next to each file when missing
            and its folder is writable; one that no longer fits its FASTA
            (`fai_matches`), or a missing one in a read-only folder, is built in the
            cache (`index_cache`) instead, never overwriting a file beside the input.

    Attributes:
        chrom_sizes: ``dict[str, int]`` in file order.

    Raises:
        SemisegError: unreadable, plain-gzip, malformed or empty file, a chromosome in two
            files; from `fetch`, a
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
            f.close()
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


def rc_columns(feature_names: list[str]) -> list[int]:
    """Column permutation that complements the sequence channels (A<->T, C<->G)."""
    pos = {n: i for i, n in enumerate(feature_names)}
    swap = {"A": "T", "T": "A", "C": "G", "G": "C"}
    return [pos[swap[n]] if n in swap else i for i, n in enumerate(feature_names)]
