"""Console output shared by the commands: log lines and rich progress bars on stderr.

Log lines go through the standard `logging` module (logger "semiseg", level INFO): on a
terminal they are drawn by rich (a dim time stamp); written to a file or a pipe (a
cluster job's log, a Snakemake rule's log:) they are plain text, one line each,
`HH:MM:SS message`, never wrapped. A program that wants them in its own logging adds its
handler to logging.getLogger("semiseg") before the first line: semiseg then adds none (else
it adds its own and does not pass the records on to the root logger's handlers).

`quiet` hides both (errors are still printed by cli.main); stdout stays free for results.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

_console = Console(stderr=True, highlight=False)
_state = {"quiet": False}
_WIDE = 160  # columns for rich output that goes to a file or a pipe

logger = logging.getLogger("semiseg")


def result_console() -> Console:
    """The console for result tables on stdout. Written to a file or a pipe (a log, a
    Snakemake rule), rich would fold tables to 80 columns and cut numbers short ("0.67…");
    there it gets 160 columns, room for every table semiseg prints."""
    console = Console()
    return console if console.is_terminal else Console(width=_WIDE)


def set_quiet(quiet: bool) -> None:
    _state["quiet"] = quiet


def quiet() -> bool:
    return _state["quiet"]


class LogHandler(logging.Handler):
    """Writes each record to the stderr of the moment (so pytest's capture and
    contextlib.redirect_stderr see it): through rich on a terminal, else plain
    `HH:MM:SS message` lines."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            if stream is None:
                return
            isatty = getattr(stream, "isatty", None)
            if isatty is not None and isatty():
                stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
                # the message as plain text: no rich markup in it
                _console.print(Text.assemble((stamp, "dim"), " ", record.getMessage()))
            else:
                stream.write(self.format(record) + "\n")
                stream.flush()
        except Exception:  # noqa: BLE001 (logging's rule: a handler must not raise)
            self.handleError(record)


def _ensure_handler() -> None:
    """Our handler on the "semiseg" logger, unless the program put one there."""
    if logger.handlers:
        return
    logger.addHandler(LogHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def log(message: str) -> None:
    """One progress line on stderr (hidden by --quiet), through logging (INFO)."""
    if not _state["quiet"]:
        _ensure_handler()
        logger.info(message)


def console() -> Console:
    return _console


class _RateColumn(ProgressColumn):
    """Items per second since the task started, with the task's unit (field "unit")."""

    def render(self, task) -> Text:
        elapsed = task.finished_time if task.finished else task.elapsed
        speed = task.completed / elapsed if elapsed else None
        unit = task.fields.get("unit", "it")
        if not speed:
            return Text(f"-- {unit}/s", style="progress.data.speed")
        return Text(f"{speed:,.1f} {unit}/s", style="progress.data.speed")


@contextlib.contextmanager
def progress():
    """A rich Progress (disabled under --quiet); tasks may carry `unit` and `info` fields."""
    bar = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(bar_width=30), MofNCompleteColumn(), _RateColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
        console=_console if _console.is_terminal else Console(stderr=True, width=_WIDE),
        disable=_state["quiet"], transient=False,
    )
    with bar:
        yield bar
