"""Interruption: Ctrl-C (SIGINT) and SIGTERM (a SLURM time limit, `scancel`, `kill`).

`install()` (the command line's main does it) turns both signals into KeyboardInterrupt
in the main thread, so every `finally`/`except BaseException` clean-up runs (temporary
files and staging folders are removed) and the process exits with code 130 and
`semiseg: interrupted` on stderr. Without it SIGTERM ended the process at once and left
its temporary files behind.

`deferred()` holds both signals back over a short critical step (moving a finished
output set into place, replacing a checkpoint) and raises KeyboardInterrupt once the
step is done, so an interrupt never lands halfway through it.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

from .errors import SemisegError

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
SIGNALS = (signal.SIGINT, signal.SIGTERM)

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


@contextmanager
def deferred():
    """Hold SIGINT and SIGTERM back while the block runs, then raise KeyboardInterrupt if
    either came. Outside the main thread (where handlers cannot be set) a no-op."""
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
            h(caught[0], None)  # install()'s handler or Python's own: raises as usual
        elif h != signal.SIG_IGN:
            raise KeyboardInterrupt
