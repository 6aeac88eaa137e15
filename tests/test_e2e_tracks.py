"""A tracks-only model in coarse bins (the chromatin setting) on synthetic data whose
answer is known: a bigWig that is high inside "on" segments and low elsewhere. Train,
annotate with --track NAME=PATH, evaluate; the model must find the segments.

The commands run through the command line's entry point (main(), argument parsing
included) in this process: these cases are about what the model finds, and a fresh
process per command cost a start of torch each (tests/test_e2e.py runs the real
processes)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

pytest.importorskip("pyBigWig")


def cli(*args):
    """`semiseg ARGS` in this process; fails unless it exits 0."""
    from test_shipped_models import cli as main_here

    proc = main_here(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from synth import write_bigwig, write_fasta

    d = tmp_path_factory.mktemp("tracks")
    rng = np.random.default_rng(7)
    sizes = {"s1": 200_000, "s2": 60_000}
    write_fasta(d / "g.fa", {c: "".join(rng.choice(list("ACGT"), n)) for c, n in sizes.items()})
    values, bed = {}, []
    for c, n in sizes.items():
        v = rng.normal(1.0, 0.5, n)
        pos, on = 0, False
        while pos < n:
            length = int(rng.integers(2_000, 8_000))
            end = min(n, pos + length)
            bed.append((c, pos, end, "on" if on else "off"))
            if on:
                v[pos:end] += 3.0
            pos, on = end, not on
        values[c] = v.astype(np.float32)
    write_bigwig(d / "sig.bw", sizes, values)
    (d / "truth.bed").write_text("".join(f"{c}\t{s}\t{e}\t{n}\n" for c, s, e, n in bed))
    cfg = {
        "inputs": {"fasta": "g.fa", "sequence": False, "bin_size": 100,
                   "tracks": {"sig": {"path": "sig.bw", "transform": "log1p"}}},
        "labels": {"annotation": "truth.bed",
                   "scheme": {"name": "onoff", "kind": "bed", "background": "off",
                              "labels": [{"name": "off"}, {"name": "on"}]}},
        "windows": {"chroms": ["s1"], "size": 40_000, "valid_fraction": 0.2},
        "model": {"channels": 16, "layers": 2, "kernel_size": 3, "stem_kernel": 3,
                  "max_dilation": 2, "resolution": 100},
        "crf": {"max_duration": 40, "duration": "negative_binomial"},
        "train": {"epochs": 6, "batch_size": 4, "lr": 0.01, "patience": 0},
        "annotate": {"window": 20_000, "context": 2_000},
    }
    (d / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return d


def test_tracks_only_model_finds_the_segments(synthetic):
    d = synthetic
    cli("train", "--config", d / "cfg.yaml", "--out", d / "run", "--quiet")
    cli("annotate", "--model", d / "run" / "best.pt", "--fasta", d / "g.fa", "--chroms", "s2",
        "--track", f"sig={d / 'sig.bw'}", "--out", d / "ann", "--quiet")
    cli("evaluate", "--pred", d / "ann.bed", "--truth", d / "truth.bed", "--out", d / "ev",
        "--tolerance", "200", "--quiet")
    res = json.loads((d / "ev.json").read_text())
    rows = {r["label"]: r for r in res["labels"]}
    assert res["bp_evaluated"] == 60_000
    assert rows["on"]["f1"] > 0.9 and rows["off"]["f1"] > 0.9
    assert rows["on"]["boundary_f1"] > 0.5


def test_mean_centering_decodes_in_training_windows(synthetic):
    """A model with crf.centering: mean depends on the window, so annotation decodes in
    windows of the training size (and says so); the result is still right."""
    d = synthetic
    cfg = yaml.safe_load((d / "cfg.yaml").read_text())
    cfg["crf"]["centering"] = "mean"
    cfg["windows"]["size"] = 20_000
    (d / "mean.yaml").write_text(yaml.safe_dump(cfg))
    cli("train", "--config", d / "mean.yaml", "--out", d / "run_mean", "--quiet")
    proc = cli("annotate", "--model", d / "run_mean" / "best.pt", "--fasta", d / "g.fa",
               "--chroms", "s2", "--track", f"sig={d / 'sig.bw'}", "--out", d / "ann_mean")
    assert "overlapping windows of 200 steps" in proc.stderr
    cli("evaluate", "--pred", d / "ann_mean.bed", "--truth", d / "truth.bed", "--out",
        d / "ev_mean", "--quiet")
    res = json.loads((d / "ev_mean.json").read_text())
    assert res["macro"]["f1"] > 0.8
