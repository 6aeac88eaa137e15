"""Training on several processes (semiseg/train/distributed.py) against the single-process run
as the oracle: two gloo processes under torchrun at half the batch each follow the same
optimisation path as one process at the whole batch (equal up to floating-point
reduction order), rank 0 alone writes the run, --resume works across world sizes, and a
batch that does not split evenly is a one-line error before anything is written.

A tiny synthetic task (GC-rich "on" segments, 10-bp steps, dropout 0) keeps each run to
a few seconds on two cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml

from semiseg.errors import SemisegError
from semiseg.train.distributed import Context, per_rank_batch, shard


def _env():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _train(cfg, out, *extra, nproc: int = 1, check: bool = True):
    """`semiseg train` as a user runs it: plainly, or under torchrun with nproc processes."""
    args = ["-m", "semiseg.cli", "train", "--config", str(cfg), "--out", str(out),
            "--quiet", *map(str, extra)]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={nproc}", *args]
    else:
        cmd = [sys.executable, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env())
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    from synth import gc_island_task

    d = tmp_path_factory.mktemp("ddp")
    cfg = {
        **gc_island_task(d, np.random.default_rng(3), {"a": 26_000, "b": 8_000}),
        # 13 training windows: the last global batch of 4 has one window, so one of the
        # two processes gets an empty share there (it must still join the reduction)
        "windows": {"chroms": ["a"], "valid_chroms": ["b"], "size": 2000},
        "model": {"channels": 8, "layers": 2, "kernel_size": 3, "stem_kernel": 3,
                  "max_dilation": 2, "resolution": 10, "dropout": 0.0},
        "crf": {"max_duration": 16},
        "train": {"epochs": 2, "batch_size": 4, "lr": 0.01, "patience": 0,
                  "warmup_epochs": 0.5, "reverse_complement": True},
        "device": "cpu",
    }
    (d / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return d


def _train_here(cfg, out, **kw):
    """One process, in this one (the oracle; saves a process start)."""
    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.loop import train

    ui.set_quiet(True)
    torch.set_num_threads(1)
    train(load_config(cfg), out, **kw)


@pytest.fixture(scope="module")
def one(task):
    _train_here(task / "cfg.yaml", task / "one")
    return _load(task / "one" / "last.pt")


def _load(path):
    return torch.load(path, weights_only=True)


def _assert_same_run(a, b, atol=1e-5):
    """Same weights (up to reduction order), same per-epoch losses and metrics."""
    worst = max(float((a["model"][k] - b["model"][k]).abs().max()) for k in a["model"])
    assert worst <= atol, f"weights differ by up to {worst}"
    assert len(a["history"]) == len(b["history"])
    for ra, rb in zip(a["history"], b["history"]):
        for key in ("train_loss", "val_loss"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-5), key
        for key in ("val_accuracy", "val_f1"):  # from counts: identical unless a decision
            assert rb[key] == pytest.approx(ra[key], abs=1e-3), key  # flips by rounding


def test_shares_partition_each_batch():
    batch = list(range(7))
    shares = [shard(batch, Context(rank=r, world_size=3)) for r in range(3)]
    assert sorted(i for s in shares for i in s) == batch
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert per_rank_batch(8, 2) == 4
    with pytest.raises(SemisegError, match="train.batch_size: 6 is not divisible .* \\(4\\)"):
        per_rank_batch(6, 4)


def test_two_gloo_processes_equal_one(task, one):
    """1 process at batch 4 vs 2 gloo processes at 2 each: the same run."""
    _train(task / "cfg.yaml", task / "two", nproc=2)
    two = _load(task / "two" / "last.pt")
    _assert_same_run(one, two)
    assert one["config"]["train"]["world_size"] == 1
    assert two["config"]["train"]["world_size"] == 2
    assert yaml.safe_load((task / "two" / "config.yaml").read_text())["train"][
        "world_size"] == 2
    # rank 0 alone wrote the run folder: one of each file, no leftovers
    assert sorted(p.name for p in (task / "two").iterdir()) == [
        "best.pt", "config.yaml", "last.pt", "metrics.tsv"]
    assert len((task / "two" / "metrics.tsv").read_text().splitlines()) == 3


def test_resume_under_two_processes(task, one):
    """Epoch 1 on one process, epoch 2 resumed on two: the uninterrupted run's model."""
    _train_here(task / "cfg.yaml", task / "part", stop_after=1)
    assert _load(task / "part" / "last.pt")["epoch"] == 1
    _train(task / "cfg.yaml", task / "part", "--resume", nproc=2)
    part = _load(task / "part" / "last.pt")
    assert part["epoch"] == 2 and part["config"]["train"]["world_size"] == 2
    _assert_same_run(one, part)


def test_uneven_batch_is_a_one_line_error(task):
    """batch 3 on 2 processes: exit 2, one line naming train.batch_size, nothing written
    (checked before any process joins the group, so no torchrun is needed to see it)."""
    env = _env() | {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    out = task / "uneven"
    proc = subprocess.run([sys.executable, "-m", "semiseg.cli", "train", "--config",
                           str(task / "cfg.yaml"), "--out", str(out), "--set",
                           "train.batch_size=3", "--quiet"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "train.batch_size: 3 is not divisible" in lines[0]
    assert not out.exists()
    shutil.rmtree(out, ignore_errors=True)
