"""Shipped models by name: `semiseg models` and `--model NAME` (semiseg/checkpoint.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from seqs import SHIPPED_MODEL, chrI_piece

from semiseg.checkpoint import registry, resolve_model
from semiseg.errors import SemisegError

ROOT = Path(__file__).resolve().parent.parent


def cli(*args):
    """The command line in this process (main(): errors as one line, exit code 2)."""
    from semiseg import cli as cli_mod

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        old = sys.argv
        sys.argv = ["semiseg", *map(str, args)]
        try:
            cli_mod.main()
        except SystemExit as ex:
            code = ex.code or 0
        finally:
            sys.argv = old
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_registry_names_from_the_dict_and_the_files(tmp_path):
    for name in ("yeast_cds_frames.pt", "fly_cds_frames.pt", "fly_other.pt", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    reg = registry(tmp_path)
    # yeast from NAMES; fly from its file name; a second fly_* file keeps its whole stem
    assert reg == {"yeast": tmp_path / "yeast_cds_frames.pt",
                   "fly": tmp_path / "fly_cds_frames.pt",
                   "fly_other": tmp_path / "fly_other.pt"}
    assert registry(tmp_path / "none") == {}


def test_resolve_model(tmp_path, monkeypatch):
    assert resolve_model("yeast") == str(Path(SHIPPED_MODEL).resolve())
    # an existing path wins over a name
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yeast").mkdir()
    assert resolve_model("yeast") == "yeast"
    with pytest.raises(SemisegError, match=r"--model nosuch: .*shipped: yeast"):
        resolve_model("nosuch")
    assert resolve_model("runs/x/best.pt") == "runs/x/best.pt"  # the reader reports it


def test_models_command_lists_the_yeast_model():
    proc = cli("models", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    y = rows["yeast"]
    assert Path(y["file"]).resolve() == Path(SHIPPED_MODEL).resolve()
    assert y["resolution"] == 1 and y["labels"][:3] == ["intergenic", "CDS+", "CDS-"]
    assert y["training"]["chroms"] == ["chrII"]
    table = cli("models")
    assert table.returncode == 0 and "yeast" in table.stdout


def test_annotate_by_name_equals_annotate_by_path(tmp_path):
    _, fasta = chrI_piece(tmp_path, 30000, 36000)
    outs = []
    for model in ("yeast", SHIPPED_MODEL):
        prefix = tmp_path / ("by_name" if model == "yeast" else "by_path")
        proc = cli("annotate", "--model", model, "--fasta", fasta, "--out", prefix, "-q")
        assert proc.returncode == 0, proc.stderr
        outs.append(Path(f"{prefix}.bed").read_text())
    assert outs[0] == outs[1] and "CDS" in outs[0]
    bad = cli("annotate", "--model", "nosuch", "--fasta", fasta, "--out", tmp_path / "x")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
    assert bad.stderr.startswith("semiseg: error: --model nosuch")
    assert not list(tmp_path.glob("x.*"))


def test_every_checkpoint_reader_takes_the_name():
    from semiseg.evaluate.intervals import pick_scheme

    assert pick_scheme("yeast").names[:3] == ["intergenic", "CDS+", "CDS-"]
