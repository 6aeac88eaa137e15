"""What a running command holds: its device, its signal handling, its lock files.

`pick_device` and `amp_enabled` choose where and how the model runs (train and annotate).
`Lock` is a lock file refusing a second run on one output prefix or run folder.

Interruption: Ctrl-C (SIGINT) and SIGTERM (a SLURM time limit, `scancel`, `kill`).

`install()` (the command line's main does it) turns both signals into KeyboardInterrupt
in the main thread, so every `finally`/`except BaseException` clean-up runs (temporary
files and staging folders are removed) and the process exits with code 130 and
`semiseg: interrupted` on stderr. Without it SIGTERM ended the process at once and left
its temporary files behind.

`keep_freed_memory()` (main again) makes glibc serve large blocks from its heap and keep
what is freed for the next allocation, instead of mapping every block over 32 MB fresh
and unmapping it at free: annotating a chromosome allocates GB-sized temporaries in
turn (encoder activations, the head's terms, the CRF's arrays), and each new mapping
is faulted in page by page. SEMISEG_MALLOC=system leaves the C library's defaults.

`deferred()` holds both signals back over a short critical step (moving a finished
output set into place, replacing a checkpoint) and raises KeyboardInterrupt once the
step is done, so an interrupt never lands halfway through it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

from .errors import SemisegError
from .genome._util import SIGNALS, deferred_handlers

if TYPE_CHECKING:
    import torch

    from .config.schema import Config

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C

_state = {"received": None}  # the name of the first signal received, e.g. "SIGTERM"


class Interrupted(SemisegError):
    """An interrupted command whose clean-up has something to tell (train: where to resume
    from). The command line prints `semiseg: interrupted; MESSAGE` and exits 130."""

    exit_code = EXIT_INTERRUPTED


def received() -> str | None:
    """The name of the first signal that interrupted this process, if any."""
    return _state["received"]


def _handler(signum, frame) -> None:
    if _state["received"] is not None:
        return  # a second signal while cleaning up: let the clean-up finish
    _state["received"] = signal.Signals(signum).name
    raise KeyboardInterrupt


def install() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread (once; a repeated
    signal during the clean-up is ignored). Only from the main thread."""
    _state["received"] = None
    for sig in SIGNALS:
        signal.signal(sig, _handler)


# deferred(): hold SIGINT and SIGTERM back while a block runs, then raise
# KeyboardInterrupt if either came (a no-op outside the main thread). One implementation,
# in genome/ (which may import nothing of the jobs), where libBigWig's writes use it too.
deferred = deferred_handlers


def keep_freed_memory() -> bool:
    """Large blocks from the heap, and freed memory kept up to 2 GB at its top (glibc's
    mallopt M_MMAP_MAX = 0, M_TRIM_THRESHOLD); False where not done (another C library,
    or SEMISEG_MALLOC=system). On yeast chrII with the shipped model (`semiseg annotate`,
    2-core CPU) page faults fell from 1.41-1.70 M to 0.40-0.48 M and the run took 11-13%
    less time (benchmarks/RESULTS-log.md, "Freed memory kept"), with the peak resident
    memory 1-8% higher."""
    mallopt = _glibc("mallopt")
    if mallopt is None:  # no mallopt (musl): its own allocator's habits
        return False
    m_trim_threshold, m_mmap_max = -1, -4
    return bool(mallopt(m_mmap_max, 0)) and bool(mallopt(m_trim_threshold, 2**31 - 1))


def return_freed_memory() -> bool:
    """Undo keep_freed_memory for the rest of the process: large blocks mapped on their
    own and returned when freed, the heap trimmed past 128 KB free at its top (glibc's
    defaults), and what it holds free now returned. For a run whose arrays went to files
    to fit the machine (annotate/spill.py): there the heap's kept pages (2.2 -> 4.3 GB
    over 8 Mb of fly's posterior windows) are what the run cannot afford. False where
    not done."""
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return False
    m_trim_threshold, m_mmap_max = -1, -4
    done = bool(mallopt(m_mmap_max, 65536)) and bool(mallopt(m_trim_threshold, 128 * 1024))
    release_freed_memory()
    return done


def _glibc(name: str):
    """The C library's function `name` where the heap is semiseg's to tune (Linux, not
    SEMISEG_MALLOC=system), else None."""
    if os.environ.get("SEMISEG_MALLOC", "").lower() == "system" or \
            not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim), where
    keep_freed_memory kept them: called between a long sequence's stages (its encoder's,
    head terms' and posterior windows' temporaries are not reused by the next stage), so
    that the next stage's peak is not added to the last one's leftovers. A no-op
    elsewhere."""
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)


def pick_device(name: str) -> torch.device:
    """"auto" -> CUDA when available, else CPU; "cuda" without a GPU is an error."""
    import torch  # here: the command line installs the signal handlers before torch loads

    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SemisegError("device: cuda was asked for, but no CUDA device is available "
                               "(use --device cpu or device: auto)")
        return torch.device("cuda")
    return torch.device("cpu")


def amp_enabled(cfg: Config, device: torch.device) -> bool:
    """Whether the encoder runs under bfloat16 autocast (`train.amp`, CUDA only)."""
    return device.type == "cuda" and cfg.train.amp in ("auto", "on")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def read_small(path: str) -> str | None:
    """A small text file's content, stripped; None if it does not exist."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except FileNotFoundError:
        return None


class Lock:
    """A lock file (created with O_EXCL, holding "PID HOST") that refuses a second run on
    `subject` while one holds it; a dead process's lock on this host is taken over.

    Args:
        path: the lock file.
        subject: what it guards, for messages (an output prefix, a run folder).
        doing: what the holder does to it ("writing this output prefix").
    """

    def __init__(self, path: str | os.PathLike, subject: str,
                 doing: str = "writing this output prefix"):
        self.path = os.fspath(path)
        self.subject, self.doing = subject, doing
        self._owner = f"{os.getpid()} {socket.gethostname()}"
        self._locked = False

    def __enter__(self) -> Lock:
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            self.acquire()
        except PermissionError as err:
            raise SemisegError(f"folder {folder} is not writable ({err.strerror})") from None
        except OSError as err:
            raise SemisegError(f"cannot create the lock file {self.path}: "
                               f"{err.strerror}") from None
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _message(self, owner: str) -> str:
        pid, _, host = owner.partition(" ")
        return (f"{self.subject}: another semiseg run (pid {pid or '?'} on {host or '?'}) "
                f"is {self.doing} (lock file {self.path}); wait for it to end, choose "
                f"another --out, or remove {self.path} if that run is gone")

    def _stale(self, owner: str) -> bool:
        pid, _, host = owner.partition(" ")
        if host != socket.gethostname() or not pid.isdigit():
            return False  # another machine's run (a shared file system): cannot tell
        return int(pid) == os.getpid() or not _alive(int(pid))

    def acquire(self) -> None:
        """Take the lock (SemisegError if another run holds it; OSError if the file
        cannot be created)."""
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = read_small(self.path)
                if owner is None:
                    continue  # released meanwhile: try again
                if not self._stale(owner):
                    raise SemisegError(self._message(owner)) from None
                self._take_over(owner)
                continue
            try:
                os.write(fd, (self._owner + "\n").encode())
            except BaseException:
                os.close(fd)
                os.remove(self.path)
                raise
            os.close(fd)
            self._locked = True
            return
        raise SemisegError(self._message(read_small(self.path) or ""))

    def _take_over(self, seen: str) -> None:
        """Remove the lock of a dead run, `seen`; if another run replaced it meanwhile
        (two runs taking over at once), put that one back and refuse."""
        aside = f"{self.path}.stale{os.getpid()}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        found = read_small(aside)
        if found == seen:
            os.remove(aside)
            return
        try:
            os.link(aside, self.path)
        except FileExistsError:
            pass
        os.remove(aside)
        raise SemisegError(self._message(found or ""))

    def release(self) -> None:
        if self._locked and read_small(self.path) == self._owner:
            os.remove(self.path)
        self._locked = False
