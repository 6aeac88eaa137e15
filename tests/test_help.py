"""`semiseg COMMAND --help`: an example per command that the command line accepts, the
docs pages it names exist, annotate's help stays short (rare options in panels)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from semiseg.cli import app

ROOT = Path(__file__).resolve().parent.parent
COMMAND = typer.main.get_command(app)
NAMES = sorted(COMMAND.commands)


def _help(name: str) -> str:
    res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "80"}, color=False)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("name", NAMES)
def test_every_command_has_examples_the_parser_accepts(name):
    epilog = COMMAND.commands[name].epilog or ""
    examples = [ln.strip() for ln in epilog.splitlines() if ln.strip().startswith("semiseg ")]
    assert any(ex.split()[1] == name for ex in examples), epilog
    for ex in examples:
        argv = shlex.split(ex)[1:]
        sub = COMMAND.commands[argv[0]]
        # parse only (no run): unknown options, missing required ones, bad types raise
        with sub.make_context(argv[0], argv[1:]) as ctx:
            assert ctx.params
    assert "Example" in _help(name)  # shown at the end of --help


@pytest.mark.parametrize("name", NAMES)
def test_help_names_no_missing_page(name):
    cmd = COMMAND.commands[name]
    text = " ".join([cmd.help or "", cmd.epilog or ""]
                    + [getattr(p, "help", None) or "" for p in cmd.params])
    assert "README, \"" not in text  # README sections move; docs/ pages are cited instead
    for page in re.findall(r"docs/[\w.-]+\.md", text):
        assert (ROOT / page).is_file(), f"{name} --help cites {page}, which does not exist"


def test_annotate_help_is_short_and_grouped():
    text = _help("annotate")
    assert len(text.splitlines()) <= 115, len(text.splitlines())
    assert "Advanced" in text and "Gene model" in text
    main_panel = text.split("Gene model")[0]
    for rare in ("--max-decode-steps", "--decode-overlap", "--signal-precision"):
        assert rare not in main_panel


def test_demo_help_gives_the_measured_training_time():
    text = " ".join(_help("demo").split())
    assert "17 min" in text and "hours" not in text
