"""The host memory this process may still take (Linux): the machine's available
memory, or less under a control group's limit (a Slurm job's --mem, a container's); and
arrays in 4 KiB pages, faulted in ahead of use. Here, at the bottom of the house, for the
CPU backend's choice to keep its forward rows (crf/numba: only where they fit) and for
the exact decode's check before any work (annotate/memory.py)."""

import ctypes
import mmap
import os

import numpy as np


def free_bytes(meminfo: str = "/proc/meminfo", proc_cgroup: str = "/proc/self/cgroup",
               cgroup_root: str = "/sys/fs/cgroup") -> int | None:
    """The memory this process may still take, in bytes: MemAvailable + SwapFree of
    /proc/meminfo, or less where a control group's limit leaves less (a batch job's
    --mem under Slurm, a container's limit; cgroup_free_bytes); None where /proc/meminfo
    cannot be read (not Linux): then nothing is checked."""
    machine = _meminfo_free(meminfo)
    if machine is None:
        return None
    group = cgroup_free_bytes(proc_cgroup, cgroup_root)
    return machine if group is None else min(machine, group)


def cgroup_free_bytes(proc_cgroup: str = "/proc/self/cgroup",
                      cgroup_root: str = "/sys/fs/cgroup") -> int | None:
    """The least, over this process's memory control group and its parents, of the
    group's limit less the anonymous memory charged to it (page cache is reclaimed
    before a group runs out, so it is not counted as taken): cgroup v2 (memory.max,
    memory.stat's anon) or v1 (memory.limit_in_bytes, memory.stat's total_rss and
    total_rss_huge). None where no group has a limit or none can be read."""
    try:
        with open(proc_cgroup) as fh:
            lines = [ln.rstrip("\n").split(":", 2) for ln in fh]
    except OSError:
        return None
    best = None
    for parts in lines:
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2: the unified hierarchy
            base, limit_file, anon_keys = cgroup_root, "memory.max", ("anon",)
        elif "memory" in controllers.split(","):
            base = os.path.join(cgroup_root, "memory")
            limit_file, anon_keys = "memory.limit_in_bytes", ("total_rss", "total_rss_huge")
        else:
            continue
        rel = path.strip("/")
        while True:
            left = _group_left(os.path.join(base, rel), limit_file, anon_keys)
            if left is not None:
                best = left if best is None else min(best, left)
            if not rel:
                break
            rel = os.path.dirname(rel)
    return best


def _group_left(folder: str, limit_file: str, anon_keys: tuple[str, ...]) -> int | None:
    """One control group's limit less its anonymous memory (None: no limit, unreadable)."""
    try:
        with open(os.path.join(folder, limit_file)) as fh:
            raw = fh.read().strip()
        if raw == "max" or int(raw) >= 1 << 60:  # v1 writes "no limit" as ~2^63
            return None
        limit = int(raw)
        anon = 0
        with open(os.path.join(folder, "memory.stat")) as fh:
            for line in fh:
                key, _, val = line.partition(" ")
                if key in anon_keys:
                    anon += int(val)
    except (OSError, ValueError):
        return None
    return max(0, limit - anon)


def _meminfo_free(meminfo: str) -> int | None:
    """MemAvailable + SwapFree of /proc/meminfo in bytes (None: unreadable)."""
    fields = {}
    try:
        with open(meminfo) as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "SwapFree"):
                    fields[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "MemAvailable" not in fields:
        return None
    return fields["MemAvailable"] + fields.get("SwapFree", 0)


# madvise(2) advice: fault a range's pages in, writable, without changing their contents
# (Linux 5.14+)
MADV_POPULATE_WRITE = 23


def empty_small_pages(shape, dtype=np.float64) -> np.ndarray:
    """np.empty without numpy's transparent-huge-page advice. Where the kernel compacts
    memory on a huge page's first fault (defrag "madvise", as on the 2-core CI machine)
    the first write to 1.2 GB took 4.4 s in huge pages against 0.5 s in 4 KiB pages
    (RESULTS-log, "The CPU forward keeps its rows")."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # (a numpy without the switch: its default)
        return np.empty(shape, dtype)
    was = _set_madvise_hugepage(False)
    try:
        return np.empty(shape, dtype)
    finally:
        _set_madvise_hugepage(was)


def populate(arrays) -> None:
    """Fault the pages of each array in, writable, leaving their contents as they are
    (madvise MADV_POPULATE_WRITE), so another thread writing them meanwhile loses
    nothing and later writes take no page faults; nothing where the kernel or C library
    cannot (not Linux, a kernel before 5.14)."""
    libc = _libc()
    if libc is None:
        return
    page = mmap.PAGESIZE
    for a in arrays:
        lo = -(-a.ctypes.data // page) * page
        hi = (a.ctypes.data + a.nbytes) // page * page
        if hi > lo and libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo),
                                    MADV_POPULATE_WRITE) != 0:
            return  # (EINVAL: advice unknown to this kernel)


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None
