"""Free space on the disk a writer fills, and a way out when there is none (no torch).

libBigWig aborts the process (a double free) or loops forever on a full disk instead of
reporting it, so the bigWig writer asks the file system first (`check_space`,
`SpaceGuard`), and a file still open when a run stops on a full disk is moved onto an
in-memory copy before libBigWig closes it (`detach`). The output sets of
semiseg/annotate/outputset.py use the same checks."""

from __future__ import annotations

import errno
import math
import os
import time

SPACE_MARGIN = 16 << 20  # bytes check_space keeps free beyond what a write needs


def check_space(folder: str, need: int) -> None:
    """OSError(ENOSPC) unless `folder`'s file system has `need` + SPACE_MARGIN bytes free
    (for this user; no check where statvfs is missing)."""
    if free_space(folder) < need + SPACE_MARGIN:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def free_space(folder: str) -> float:
    """Bytes free for this user on `folder`'s file system (inf where it cannot be told)."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return math.inf
    return st.f_bavail * st.f_frsize


class SpaceGuard:
    """check_space for a writer that asks often (each batch of bigWig entries): the file
    system is asked again (statvfs: a round trip on a network file system) only when
    `interval` seconds have passed or the bytes written since its last answer bring the
    need within 4 SPACE_MARGINs of it."""

    interval = 0.25

    def __init__(self, folder: str):
        self.folder = folder
        self.free = -1.0  # the last answer (-1: none yet)
        self.spent = 0  # bytes written since
        self.when = 0.0

    def check(self, write: int, reserve: int = 0, fresh: bool = False) -> None:
        """OSError(ENOSPC) unless `write` bytes can be written now with `reserve` bytes
        still free after them (and SPACE_MARGIN beyond)."""
        now = time.monotonic()
        if (fresh or self.free < 0 or now - self.when >= self.interval
                or self.free - self.spent - write < reserve + 4 * SPACE_MARGIN):
            self.free, self.when, self.spent = free_space(self.folder), now, 0
        if self.free - self.spent - write < reserve + SPACE_MARGIN:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.spent += write


def detach(path: str) -> bool:
    """Move this process's open descriptors of the file `path` onto an in-memory copy of
    it (Linux memfd), so that a library that still writes and reads it when it closes
    (libBigWig's close reads the data back for its zoom levels) needs no disk space: on
    a full disk it would abort the process. False where that is not possible."""
    try:
        fds = os.listdir("/proc/self/fd")
        target = os.path.realpath(path)
        memfd_create = os.memfd_create
    except (OSError, AttributeError):
        return False
    done = False
    for name in fds:
        try:
            if os.readlink(f"/proc/self/fd/{name}") != target:
                continue
            fd = int(name)
            pos = os.lseek(fd, 0, os.SEEK_CUR)
            mem = memfd_create("semiseg-detached")
            try:
                with open(path, "rb") as src:
                    while chunk := src.read(1 << 22):
                        os.write(mem, chunk)
                os.lseek(mem, pos, os.SEEK_SET)
                os.dup2(mem, fd)
            finally:
                os.close(mem)
            done = True
        except OSError:
            continue
    return done
