"""Annotation shards (semiseg/annotate/shards.py): the planner's grouping, and the round trip
on a fragmented genome (a thousand short contigs) through `semiseg shard`, annotate
per shard (--regions SHARD.bed) and `semiseg merge`, against annotating the whole genome
in one job as the oracle (the Snakefile's shard scatter: tests/test_pipeline.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from semiseg.annotate.shards import plan_shards, shard_names
from semiseg.errors import SemisegError

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("pyBigWig")



def read_plan(path: str | Path) -> list[tuple[str, list[str]]]:
    """[(shard, [chrom, ...]), ...] from a shards.tsv, in order."""
    plan: dict[str, list[str]] = {}
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            f = line.rstrip("\n").split("\t")
            if n == 1 and f[0] == "shard":
                continue
            if len(f) < 2:
                raise AssertionError(f"{path}:{n}: expected shard, chrom, length")
            plan.setdefault(f[0], []).append(f[1])
    return list(plan.items())

def _sizes(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return {f"c{i}": int(v) for i, v in enumerate(rng.integers(200, 5001, n))}


def _check_partition(groups, sizes):
    """Every chromosome exactly once, groups non-empty, FASTA order kept."""
    flat = [c for g in groups for c in g]
    assert flat == list(sizes) and all(groups)


@pytest.mark.parametrize("n", [1, 3, 7, 64])
def test_shards_are_balanced_consecutive_runs(n):
    sizes = _sizes()
    groups = plan_shards(sizes, shards=n)
    _check_partition(groups, sizes)
    assert len(groups) <= n
    total, biggest = sum(sizes.values()), max(sizes.values())
    loads = [sum(sizes[c] for c in g) for g in groups]
    # each shard is within one contig of an even share
    assert max(loads) <= total / n + biggest and (n == 1 or min(loads) >= total / n - biggest)
    if n <= len(sizes) // 10:
        assert len(groups) == n


def test_long_chromosomes_stay_whole_and_alone():
    sizes = {"chr1": 250_000_000, **_sizes(2000), "chr2": 90_000_000, "chrM": 16_569}
    groups = plan_shards(sizes, shards=8)
    _check_partition(groups, sizes)
    assert ["chr1"] in groups
    by_size = plan_shards(sizes, shard_size=50_000_000)
    _check_partition(by_size, sizes)
    assert ["chr1"] in by_size and ["chr2"] in by_size
    for g in by_size:  # over the target only when one chromosome alone is
        assert len(g) == 1 or sum(sizes[c] for c in g) <= 50_000_000
    # the small contigs (about 5 Mb) fit one shard between the two chromosomes; chrM
    # comes after chr2 (90 Mb, over the target), so it starts a shard of its own
    assert len(by_size) == 4 and by_size[-1] == ["chrM"]
    assert plan_shards(sizes) == [[c] for c in sizes]  # neither: one per chromosome


def test_planner_rejects_bad_arguments():
    with pytest.raises(SemisegError, match="--shards: expected a number >= 1"):
        plan_shards({"a": 5}, shards=0)
    with pytest.raises(SemisegError, match="--shards and --shard-size"):
        plan_shards({"a": 5}, shards=2, shard_size=10)
    with pytest.raises(SemisegError, match="--shard-size"):
        plan_shards({"a": 5}, shard_size=0)
    assert shard_names(3) == ["0000", "0001", "0002"] and shard_names(12345)[-1] == "12344"


# ----------------------------------------------------------------------------- round trip
def cli(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "semiseg.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep
                                   + os.environ.get("PYTHONPATH", "")))
    if check and proc.returncode != 0:
        raise AssertionError(proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def fragmented(tmp_path_factory):
    """A tiny model (GC-rich 'on' segments, 50-bp steps) and a genome of 1,000 contigs
    of 200-3,000 bp."""
    from synth import gc_island_genome, gc_island_task, write_fasta

    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.loop import train

    d = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(5)
    cfg = {
        **gc_island_task(d, rng, {"t": 30_000}, "train.fa", (150, 1500)),
        "windows": {"size": 3000, "valid_fraction": 0.2},
        "model": {"channels": 8, "layers": 2, "kernel_size": 3, "stem_kernel": 3,
                  "max_dilation": 2, "resolution": 50},
        "crf": {"max_duration": 16},
        "train": {"epochs": 1, "batch_size": 4, "lr": 0.01, "patience": 0},
        "device": "cpu",
    }
    (d / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    ui.set_quiet(True)
    torch.set_num_threads(1)
    train(load_config(d / "cfg.yaml"), d / "model")
    lengths = {f"scaffold_{i}": int(n)
               for i, n in enumerate(rng.integers(200, 3001, 1000))}
    write_fasta(d / "frag.fa", gc_island_genome(rng, lengths, (150, 1500))[0])
    return d, lengths


def _bed_rows(path):
    return [ln.rstrip("\n").split("\t") for ln in open(path)
            if not ln.startswith(("#", "track", "browser"))]


def test_sharded_annotation_equals_one_job(fragmented):
    """shard -> annotate each shard -> merge gives the whole-genome annotation, every
    contig exactly once."""
    import pyBigWig

    from semiseg import ui
    from semiseg.annotate.merge import merge
    from semiseg.annotate.run import annotate

    d, lengths = fragmented
    ui.set_quiet(True)
    model, fa = d / "model" / "best.pt", d / "frag.fa"
    annotate(str(model), str(fa), str(d / "one" / "a"))
    from test_shipped_models import cli as main_here  # `semiseg shard` in this process

    assert main_here("shard", "--fasta", fa, "--shards", 3, "--out", d / "plan",
                     "--quiet").returncode == 0
    plan = read_plan(d / "plan" / "shards.tsv")
    assert len(plan) == 3
    assert [c for _, g in plan for c in g] == list(lengths)  # each contig once, in order
    parts = []
    for name, _ in plan:
        parts.append(str(d / "parts" / name))
        annotate(str(model), str(fa), parts[-1], regions=str(d / "plan" / f"{name}.bed"))
    merge(parts, str(d / "merged" / "a"))

    one, merged = _bed_rows(d / "one" / "a.bed"), _bed_rows(d / "merged" / "a.bed")
    assert [r[:4] + r[5:] for r in merged] == [r[:4] + r[5:] for r in one]
    assert [int(r[4]) for r in merged] == pytest.approx([int(r[4]) for r in one], abs=1)
    # every contig exactly once, covered from 0 to its end without gaps or overlaps
    ends: dict[str, int] = {}
    for r in merged:
        assert int(r[1]) == ends.get(r[0], 0)
        ends[r[0]] = int(r[2])
    assert ends == lengths
    assert (d / "merged" / "a.summary.tsv").read_text() == \
        (d / "one" / "a.summary.tsv").read_text()
    for track in ("boundary.bw", "posterior.on.bw"):
        a, b = pyBigWig.open(str(d / "one" / f"a.{track}")), \
            pyBigWig.open(str(d / "merged" / f"a.{track}"))
        assert a.chroms() == b.chroms() == lengths
        for c in list(lengths)[::97]:
            np.testing.assert_allclose(b.values(c, 0, lengths[c]), a.values(c, 0, lengths[c]),
                                       atol=1e-5)
        a.close()
        b.close()


def test_shard_command_errors_leave_nothing(fragmented, tmp_path):
    d, _ = fragmented
    for args, word in ((["--shards", 0], "--shards"), (["--shards", 2, "--shard-size", 9],
                                                       "--shards and --shard-size"),
                       (["--shards", 2, "--chroms", "nope"], "--chroms")):
        proc = cli("shard", "--fasta", d / "frag.fa", *args, "--out", tmp_path / "p",
                   check=False)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and word in lines[0], proc.stderr
        assert not (tmp_path / "p").exists()


