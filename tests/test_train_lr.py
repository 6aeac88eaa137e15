"""train.crf_lr_scale: the CRF head's own parameters learn at a multiple of the rate.

Oracle: Adam's first step moves every parameter with a non-zero gradient by the
learning rate (m / sqrt(v) = +-1 after one step, up to eps), whatever the gradient's size.
"""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("scale", [1.0, 25.0])
def test_the_head_moves_scale_times_further_in_the_first_step(tmp_path, scale):
    from synth import tiny_training

    from semiseg.train.loop import RunState, Schedule, _optimizer, train_epoch

    c, model, train_ds = tiny_training(
        tmp_path, train={"epochs": 1, "batch_size": 2, "lr": 1e-3, "warmup_epochs": 0,
                         "grad_clip": 0, "weight_decay": 0.0, "crf_lr_scale": scale})
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = _optimizer(model, c)
    sched = Schedule(total=10 ** 6, warmup=0, base_lr=1e-3)  # flat over one step
    state = RunState()
    train_epoch(model, opt, train_ds, c, 1, state, sched, torch.device("cpu"), False)
    assert state.step == 1  # two windows, batch 2: Adam's first step, the oracle's case
    moved_groups = set()
    for name, p in model.named_parameters():
        moved = (p.detach() - before[name]).abs()
        moved = moved[moved > 0]
        if not len(moved):
            continue
        head = name.startswith("crf")
        moved_groups.add(head)
        want = 1e-3 * (scale if head else 1.0)
        assert float(moved.max()) == pytest.approx(want, rel=1e-3), name
    assert moved_groups == {True, False}  # both the head and the encoder took the step
