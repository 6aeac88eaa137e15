"""Appending a benchmark's table to benchmarks/RESULTS.md, headed by its commit."""

from __future__ import annotations

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def commit() -> str:
    """The checkout's short commit ("unknown" without git, e.g. on the GPU machine)."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          check=False, text=True, cwd=HERE).stdout.strip() or "unknown"


def append(heading: str, command: str, lines: list[str]) -> None:
    """A section `## heading; commit C` with the command that made it, then the table."""
    with open(os.path.join(HERE, "RESULTS.md"), "a") as fh:
        fh.write(f"\n## {heading}; commit {commit()}\n\n{command}\n\n" + "\n".join(lines)
                 + "\n")
