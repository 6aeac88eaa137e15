"""A long sequence's whole-sequence host arrays held in files instead of memory (issue 42).

The exact decode of one sequence holds some arrays of its whole length in host memory
(memory.py: about 0.6-0.8 KB a base of the fly gene model on a CPU), so a fly chromosome
arm (21-28 Mb) did not fit a 24 GB machine: the run was killed by the kernel's
out-of-memory killer after many minutes. When the check before any work finds the
arrays may not fit (memory.py), annotate puts them in files instead: each such array is
a shared memory map of a file in a spill folder (by default the output's), the file
unlinked as soon as it is mapped, so it disappears with the process however that ends
(Ctrl-C, a kill) and nothing is left beside the outputs. The kernel writes the pages
out and reads them back as the decode walks the sequence (it reads each array in
windows, front to back), and the process's own memory stays at its working set: the
windows and chunks in flight. The arithmetic is the same on mapped pages as on anonymous
ones, so the outputs are the same bytes (tests/test_spill.py).

Arrays smaller than `min_bytes` stay in memory (a map costs a file and a system call).
Only the allocations named for it (`empty`, `np_empty`, `np_full`) spill; everything else is as
before. Not thread-safe to switch while a decode runs: `spilling` is entered once, around
a whole annotate run.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from pathlib import Path

import numpy as np
import torch

from ..errors import SemisegError

MIN_BYTES = 8 << 20  # 8 MiB: a posterior window of 65,536 steps of fly (15 MB) and up

_folder: str | None = None
_min_bytes = MIN_BYTES
_spilled = [0, 0]  # bytes mapped, arrays mapped (this process; read by the tests)


def active() -> bool:
    """Whether arrays are being spilled to files now."""
    return _folder is not None


def spilled() -> tuple[int, int]:
    """(bytes, arrays) mapped to files since the process started."""
    return _spilled[0], _spilled[1]


@contextlib.contextmanager
def spilling(folder: str | os.PathLike | None, min_bytes: int = MIN_BYTES):
    """Within the block, `empty` and `np_empty` of at least `min_bytes` map files in
    `folder` (None: nothing spills)."""
    global _folder, _min_bytes
    before = (_folder, _min_bytes)
    _folder = None if folder is None else os.fspath(folder)
    _min_bytes = int(min_bytes)
    try:
        yield
    finally:
        _folder, _min_bytes = before


def np_empty(shape, dtype) -> np.ndarray:
    """np.empty(shape, dtype), in a mapped file while spilling and big enough."""
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if _folder is None or n < _min_bytes:
        return np.empty(shape, dtype)
    fd, path = tempfile.mkstemp(prefix=".semiseg-spill-", dir=_folder)
    try:
        os.unlink(path)  # the mapping keeps the file's pages; no name is left behind
        os.ftruncate(fd, n)  # sparse: disk blocks are taken as pages are written
        buf = mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    _spilled[0] += n
    _spilled[1] += 1
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def np_full(shape, value, dtype) -> np.ndarray:
    """np.full(shape, value, dtype), in a mapped file while spilling and big enough."""
    out = np_empty(shape, dtype)
    out.fill(value)
    return out


def empty(shape, dtype: torch.dtype, device: torch.device | None = None) -> torch.Tensor:
    """torch.empty(shape, dtype=dtype, device=device): on the host (device None or a
    CPU) in a mapped file while spilling and big enough."""
    if device is not None and torch.device(device).type != "cpu":
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.from_numpy(np_empty(shape, torch.empty(0, dtype=dtype).numpy().dtype))


def nearest_existing(folder: str) -> str:
    """`folder`, or the nearest of its parents that exists (whose disk it will be on)."""
    p = Path(folder)
    while not p.exists() and p.parent != p:
        p = p.parent
    return str(p)


def make_folder(folder: str) -> str:
    """The folder for spilled arrays (SEMISEG_SPILL_DIR, else the output's), made if
    missing; a SemisegError naming it when it cannot be written."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise SemisegError(f"SEMISEG_SPILL_DIR: cannot make {folder}: {err.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SemisegError(f"cannot write arrays to files in {folder} (SEMISEG_SPILL_DIR)")
    return folder
