"""Log lines (semiseg/ui.py) go through `logging`: plain, unwrapped lines in files and pipes,
a program's own handler on the "semiseg" logger gets them, --quiet hides them."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

from semiseg import ui

ROOT = Path(__file__).resolve().parent.parent


def test_log_lines_in_a_pipe_are_plain_and_whole(tmp_path):
    # a long output path: the line is well over rich's 80 columns for non-terminals
    out = tmp_path / ("a_folder_with_a_long_name_" * 4) / "shards"
    proc = subprocess.run([sys.executable, "-m", "semiseg.cli", "shard", "--fasta",
                           str(ROOT / "data" / "yeast" / "chrI.fa"), "--out", str(out)],
                          check=False, capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert len(line) > 120
    assert "\x1b" not in line  # no terminal escapes
    assert re.fullmatch(r"\d\d:\d\d:\d\d 1 sequences \(230,208 bp\) in 1 shards "
                        r"\(largest 230,208 bp\): (.*)/shards\.tsv", line), line
    assert line.endswith(f"{out}/shards.tsv")


def test_log_goes_to_the_current_stderr_and_quiet_hides_it():
    err = io.StringIO()
    ui.set_quiet(False)  # an earlier in-process CLI call may have left --quiet on
    try:
        with redirect_stderr(err):
            ui.log("first [bold]line[/bold]")  # no rich markup: brackets kept as written
            ui.set_quiet(True)
            ui.log("hidden")
    finally:
        ui.set_quiet(False)
    assert re.fullmatch(r"\d\d:\d\d:\d\d first \[bold\]line\[/bold\]\n", err.getvalue())


def test_a_programs_own_handler_gets_the_records():
    logger = logging.getLogger("semiseg")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record)

    try:
        logger.handlers[:] = [Collect()]
        logger.setLevel(logging.INFO)
        err = io.StringIO()
        with redirect_stderr(err):
            ui.log("to the program's handler")
        assert [r.getMessage() for r in records] == ["to the program's handler"]
        assert records[0].levelno == logging.INFO
        assert err.getvalue() == ""  # semiseg added no handler of its own
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]
