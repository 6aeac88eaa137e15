"""Small helpers shared by the genome modules: text files, chromosome names, intervals."""

from __future__ import annotations

import gzip
import os
import signal
import threading
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from typing import IO

import numpy as np

from ..errors import SemisegError


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a plain or gzip/bgzip text file for reading (SemisegError if unreadable)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
    except OSError as err:
        raise SemisegError(f"cannot read {path}: {err.strerror}") from None
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt")
    return open(path)


def show_names(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    if len(names) > limit:
        shown += f", ... ({len(names)} in all)"
    return shown or "(none)"


class ChromMatcher:
    """Maps chromosome names of an input file to the FASTA's names.

    A name is used as is when the FASTA has it, else through ``alias`` (file name ->
    FASTA name; an empty name or None drops that chromosome's lines on purpose). Names
    that match neither are collected so one error can list both sides.
    """

    def __init__(self, chrom_sizes: Mapping[str, int], alias: Mapping[str, str] | None = None):
        self.chrom_sizes = chrom_sizes
        self.alias = dict(alias or {})
        self.unknown: dict[str, int] = {}  # file name -> first line number seen

    def __call__(self, name: str, line: int = 0) -> str | None:
        if name in self.chrom_sizes:
            return name
        if name in self.alias:
            target = self.alias[name]
            if not target:
                return None  # dropped on purpose
            if target in self.chrom_sizes:
                return target
        self.unknown.setdefault(name, line)
        return None

    def raise_unknown(self, what: str) -> None:
        """SemisegError listing both sides if any name did not match."""
        if self.unknown:
            raise SemisegError(
                f"chromosome names in {what} do not match the FASTA: "
                f"{show_names(self.unknown)} not in FASTA names ({show_names(self.chrom_sizes)}); "
                "rename them or give an alias map"
            )


def check_region(chrom_sizes: Mapping[str, int], chrom: str, start: int, end: int) -> None:
    """ValueError for a region outside its chromosome (a caller error, not user input)."""
    if chrom not in chrom_sizes:
        raise ValueError(f"unknown chromosome {chrom!r}")
    if not 0 <= start <= end <= chrom_sizes[chrom]:
        raise ValueError(
            f"region {chrom}:{start}-{end} outside [0, {chrom_sizes[chrom]}) or start > end"
        )


def paint(out: np.ndarray, offset: int, starts: np.ndarray, ends: np.ndarray,
          values: np.ndarray) -> None:
    """Write ``values[i]`` into ``out[starts[i]-offset : ends[i]-offset]`` (clipped).

    Intervals may be in any order; where they overlap, the later one wins.
    """
    n = len(out)
    s = np.clip(np.asarray(starts, dtype=np.int64) - offset, 0, n)
    e = np.clip(np.asarray(ends, dtype=np.int64) - offset, 0, n)
    lens = e - s
    keep = lens > 0
    if not keep.any():
        return
    s, lens, vals = s[keep], lens[keep], np.asarray(values)[keep]
    if len(s) == 1:
        out[s[0]:s[0] + lens[0]] = vals[0]
        return
    total = int(lens.sum())
    first = np.cumsum(lens) - lens
    owner = np.repeat(np.arange(len(s)), lens)
    pos = s[owner] + (np.arange(total) - first[owner])
    out[pos] = vals[owner]


def overlapping(starts: np.ndarray, ends: np.ndarray, start: int, end: int) -> slice:
    """Slice of sorted, non-overlapping intervals that overlap ``[start, end)``."""
    lo = int(np.searchsorted(ends, start, side="right"))
    hi = int(np.searchsorted(starts, end, side="left"))
    return slice(lo, max(lo, hi))


def bin_mean(x: np.ndarray, resolution: int) -> np.ndarray:
    """Mean over bins of ``resolution`` rows along axis 0 (the last bin may be partial)."""
    if resolution == 1:
        return x
    t = x.shape[0]
    nb = -(-t // resolution)
    full = t // resolution
    out = np.empty((nb,) + x.shape[1:], dtype=x.dtype)
    if full:
        out[:full] = x[: full * resolution].reshape((full, resolution) + x.shape[1:]).mean(axis=1)
    if nb > full:
        out[full] = x[full * resolution:].mean(axis=0)
    return out


def bin_majority(labels: np.ndarray, resolution: int, n_labels: int) -> np.ndarray:
    """Majority label per bin; -1 (masked) rows do not vote; all-masked bins -> -1.

    Ties go to the lowest label index.
    """
    labels = np.asarray(labels, dtype=np.int64)
    if resolution == 1:
        return labels
    t = len(labels)
    nb = -(-t // resolution)
    bins = np.arange(t, dtype=np.int64) // resolution
    counts = np.bincount(bins * (n_labels + 1) + (labels + 1), minlength=nb * (n_labels + 1))
    counts = counts.reshape(nb, n_labels + 1)[:, 1:]
    out = counts.argmax(axis=1).astype(np.int64)
    out[counts.max(axis=1) == 0] = -1
    return out


def tmp_name(path: str) -> str:
    """A temporary name next to ``path`` (same folder, so rename is atomic)."""
    d, b = os.path.split(path)
    return os.path.join(d, f".{b}.tmp{os.getpid()}")


def coords(path: str, lineno: int, fields: list[str], chrom: str,
           sizes: Mapping[str, int], one_based: bool = False) -> tuple[int, int]:
    """(start, end) 0-based half-open from the text of a BED (or, one_based, GFF) row,
    checked against the chromosome size; errors name the file and line."""
    try:
        start, end = int(fields[0]), int(fields[1])
    except ValueError:
        raise SemisegError(
            f"{path}:{lineno}: start/end must be integers, got {fields[0]!r}, {fields[1]!r}"
        ) from None
    if one_based:
        if start < 1 or end < start:
            raise SemisegError(f"{path}:{lineno}: bad coordinates {start}..{end} "
                               "(1-based, start <= end)")
        start -= 1
    elif start < 0 or end < start:
        raise SemisegError(f"{path}:{lineno}: bad coordinates {start}-{end} "
                           "(need 0 <= start <= end)")
    if end > sizes[chrom]:
        raise SemisegError(
            f"{path}:{lineno}: end {end} is past the end of {chrom} ({sizes[chrom]} bp)"
        )
    return start, end


def runs(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of equal values: (starts, ends, values)."""
    if arr.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    change = np.flatnonzero(arr[1:] != arr[:-1]) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [arr.size]])
    return starts, ends, arr[starts]


SIGNALS = (signal.SIGINT, signal.SIGTERM)  # the ones that stop a run (runtime.install)


@contextmanager
def deferred_handlers():
    """Hold SIGINT and SIGTERM back while the block runs, then raise KeyboardInterrupt if
    either came (runtime.deferred). Outside the main thread (where handlers cannot be
    set) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum))
           for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    if caught:
        h = old[caught[0]]
        if callable(h):
            h(caught[0], None)  # runtime.install()'s handler or Python's own: raises
        elif h != signal.SIG_IGN:
            raise KeyboardInterrupt


@contextmanager
def deferred_signals():
    """SIGINT and SIGTERM held back in this thread while libBigWig writes, and delivered
    when the block ends: a signal that lands inside the C library's write makes it fail
    (EINTR), after which libBigWig prints its own error to stderr on close. With the
    signals deferred an interrupt still stops the run, a moment later, cleanly.

    The mask holds a signal back from this thread only: the kernel hands a process's
    signal to any thread that does not block it (numpy's BLAS threads, torch's), and
    Python then runs its handler in the main thread at once, inside the block (a bigWig
    just opened was dropped unclosed, and freed with libBigWig's error; 1 run in 3 of
    tests/test_faults_runtime.py's open race). So in the main thread the Python-level
    handlers are deferred too (deferred_handlers: recorded, then run after the block)."""
    with deferred_handlers():
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def close_silenced(bw) -> None:
    """Close a pyBigWig file of an aborted set (removed after): signals deferred, stderr
    silenced (libBigWig prints its own error when such a close fails), its RuntimeError
    ignored."""
    with deferred_signals(), silenced_stderr():
        try:
            bw.close()
        except RuntimeError:
            pass


@contextmanager
def silenced_stderr():
    """File descriptor 2 pointed at /dev/null for the block: for closing the bigWigs of an
    aborted set, whose files are removed after. libBigWig prints its own error to stderr
    when such a close fails (e.g. a write cut short by the interrupt that aborted the
    set), and the user's one line must stay `semiseg: interrupted`."""
    import sys
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    saved = os.dup(2)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
        finally:
            os.close(null)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
