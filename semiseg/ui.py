"""Console output shared by the commands: log lines and rich progress bars on stderr.

`quiet` hides both (errors are still printed by cli.main); stdout stays free for results.
"""

from __future__ import annotations

import contextlib
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


def result_console() -> Console:
    """The console for result tables on stdout. Written to a file or a pipe (a log, a
    Snakemake rule), rich would fold tables to 80 columns and cut numbers short ("0.67…");
    there it gets 160 columns, room for every table semiseg prints."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def set_quiet(quiet: bool) -> None:
    _state["quiet"] = quiet


def quiet() -> bool:
    return _state["quiet"]


def log(message: str) -> None:
    """One progress line on stderr (hidden by --quiet)."""
    if not _state["quiet"]:
        _console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {message}")


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
        console=_console, disable=_state["quiet"], transient=False,
    )
    with bar:
        yield bar
