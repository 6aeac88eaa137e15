"""windows.phases: N tilings of the training regions, one an epoch in turn.

Oracles: window coordinates written out by hand; features read back from the FASTA
text; the gene model's tables counted with one tiling (phases = 1) against N.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from semiseg import ui
from semiseg.errors import SemisegError
from semiseg.train.data import Window, tile


def test_a_later_tiling_begins_a_share_of_a_stride_in():
    # stride 30 (size 40, overlap 10), begun 15 bp in; then 20 bp in
    assert tile([("c", 0, 100)], 40, 10, 5, 1, 15) == [
        Window("c", 15, 55, 1), Window("c", 45, 85, 1), Window("c", 75, 100, 1)]
    assert tile([("c", 10, 110), ("d", 0, 50)], 40, 10, 12, 2, 20) == [
        Window("c", 30, 70, 2), Window("c", 60, 100, 2), Window("c", 90, 110, 2),
        Window("d", 20, 50, 2)]
    assert tile([("c", 0, 100)], 40, 10, 5) == [  # tiling 0: as before
        Window("c", 0, 40), Window("c", 30, 70), Window("c", 60, 100)]


def _synth_config(tmp_path, phases: int):
    from synth import gc_island_task

    from semiseg.config.load import load_config

    cfg = {**gc_island_task(tmp_path, np.random.default_rng(3), {"a": 9000}),
           "windows": {"chroms": ["a"], "size": 2000, "valid_fraction": 0.0,
                       "phases": phases},
           "model": {"channels": 8, "layers": 1, "kernel_size": 3, "stem_kernel": 3,
                     "max_dilation": 1, "resolution": 10, "dropout": 0.0},
           "crf": {"max_duration": 8},
           "train": {"epochs": 4, "batch_size": 2, "lr": 1e-3, "warmup_epochs": 0},
           "device": "cpu"}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return load_config(tmp_path / "cfg.yaml")


def _fasta_text(path) -> str:
    return "".join(ln.strip() for ln in open(path) if not ln.startswith(">"))


def test_each_epoch_reads_its_own_tiling(tmp_path):
    from semiseg.train.loop import _load_data, epoch_batches

    ui.set_quiet(True)
    c = _synth_config(tmp_path, 3)
    _, _, _, _, train_ds, _ = _load_data(c)
    seq = _fasta_text(tmp_path / "g.fa")
    for epoch in range(1, 7):
        p = (epoch - 1) % 3
        shift = (0, 670, 1330)[p]  # a third of a stride, in whole steps of 10 bp
        ds = train_ds.for_epoch(epoch)
        assert (ds is train_ds) == (p == 0)
        want = [(s, min(s + 2000, 9000)) for s in range(shift, 9000, 2000)
                if min(s + 2000, 9000) - s >= 100]  # shorter than 10 steps: dropped
        assert [(w.start, w.end) for w in ds.windows] == want
        assert {w.phase for w in ds.windows} == {p}
        for w, x, y in zip(ds.windows, ds.x, ds.y):  # the window's own bases and labels
            onehot = x[:, :4]
            assert "".join("ACGT"[i] for i in onehot.argmax(1)) == seq[w.start:w.end].upper()
            assert len(y) == (w.end - w.start) // 10
    # the schedule: the longest epoch's batches (5, 5 and 4 windows at batch 2)
    assert epoch_batches(train_ds, c) == 3


def test_one_tiling_is_the_dataset_itself(tmp_path):
    from semiseg.train.loop import _load_data

    ui.set_quiet(True)
    _, _, _, _, train_ds, _ = _load_data(_synth_config(tmp_path, 1))
    assert train_ds.phase_sets == []
    assert all(train_ds.for_epoch(e) is train_ds for e in range(1, 5))


def test_phases_must_be_positive(tmp_path):
    with pytest.raises(SemisegError, match="windows.phases: must be positive"):
        _synth_config(tmp_path, 0)


def test_training_walks_the_tilings(tmp_path):
    """Four epochs over three tilings: each epoch's steps are its own tiling's batches,
    and the run ends with finite weights."""
    from semiseg.train.loop import train

    ui.set_quiet(True)
    c = _synth_config(tmp_path, 3)
    out = train(c, tmp_path / "run")
    assert out["epochs_run"] == 4
    from semiseg.checkpoint import load_checkpoint

    state = load_checkpoint(tmp_path / "run" / "last.pt").data
    # tilings begun at 0, 670 and 1,330 of 9,000 bp: 5, 5, 4, 5 windows at batch 2
    assert state["scheduler"]["step"] == 3 + 3 + 2 + 3
    for v in state["model"].values():
        assert torch.isfinite(v.float()).all()


def test_gene_model_tables_read_tiling_zero_and_intron_windows_every_epoch(tmp_path):
    """18 kb of fly with t186's long intron: with two tilings the site matrices and the
    coding content are counted as with one, and tiling 1's epoch keeps the intron
    window."""
    from test_real_annotations import _config, _write_region

    from semiseg.train.loop import _load_data
    from semiseg.train.tables import new_model

    ui.set_quiet(True)
    fa, gff = _write_region(tmp_path, 548_000, 566_000)
    tables = []
    for phases in (1, 2):
        cfg = _config(tmp_path, fa, gff, windows__intron_windows=True,
                      windows__phases=phases)
        cfg, _, scheme, columns, train_ds, _ = _load_data(cfg)
        model = new_model(cfg, scheme, columns, train_ds)
        tables.append({k: v.clone() for k, v in model.state_dict().items()
                       if "site" in k or "content" in k})
        if phases == 2:
            intron = [w for w in train_ds.windows if w.phase == -1]
            assert intron and all(w in train_ds.for_epoch(2).windows for w in intron)
            tiles = [w for w in train_ds.for_epoch(2).windows if w.phase != -1]
            assert tiles and all(w.phase == 1 for w in tiles)
            assert {(w.start, w.end) for w in tiles}.isdisjoint(
                {(w.start, w.end) for w in train_ds.windows})
    assert tables[0].keys() == tables[1].keys() and tables[0]
    for k in tables[0]:
        assert torch.equal(tables[0][k], tables[1][k]), k
