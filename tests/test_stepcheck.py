"""A training step checked on the device and read a step late (train/stepcheck.py), run
on the CPU with a fused AdamW (as the GPU runs it): a step whose loss or gradients are
not finite changes nothing, a finite step matches torch's own (unfused) AdamW and clip,
and the verdicts come back in order."""

import copy
import math

import pytest
import torch

from semiseg.errors import SemisegError
from semiseg.train.stepcheck import Verdicts, apply_gradients, checks_on_device, make_optimizer


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))


def _groups(model):
    ws = [p for p in model.parameters() if p.dim() >= 2]
    bs = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": ws, "weight_decay": 0.01}, {"params": bs, "weight_decay": 0.0}]


def _loss(model, x, scale=1.0):
    return (model(x) ** 2).sum() * scale


def test_the_optimiser_kind():
    m = _model()
    assert not checks_on_device(make_optimizer(_groups(m), 0.01))  # CPU: checked at once
    assert checks_on_device(make_optimizer(_groups(m), 0.01, fused=True))


@pytest.mark.parametrize("bad", ["loss", "gradient"])
def test_a_skipped_step_changes_nothing(bad):
    m = _model()
    opt = make_optimizer(_groups(m), 0.05, fused=True)
    x = torch.randn(5, 4)
    ok = apply_gradients(m, opt, _loss(m, x), 1.0, torch.tensor(True))  # one good step
    assert bool(ok)
    before = [p.detach().clone() for p in m.parameters()]
    moments = [opt.state[p]["exp_avg"].clone() for p in m.parameters()]
    if bad == "loss":
        ok = apply_gradients(m, opt, _loss(m, x), 1.0, torch.tensor(False))
    else:  # a NaN in one gradient only
        m[0].weight.register_hook(lambda g: g * float("nan"))
        ok = apply_gradients(m, opt, _loss(m, x), 1.0, torch.tensor(True))
    assert not bool(ok)
    assert all(torch.equal(a, p) for a, p in zip(before, m.parameters()))
    assert all(torch.equal(a, opt.state[p]["exp_avg"]) for a, p in zip(moments, m.parameters()))
    assert all(float(opt.state[p]["step"]) == 1.0 for p in m.parameters())
    if bad == "gradient":  # the gradients as the backward left them: not clipped
        assert not bool(torch.isfinite(m[0].weight.grad).all())
        assert bool(torch.isfinite(m[2].weight.grad).all())


def test_a_finite_step_matches_torchs_adamw_and_clip():
    """Three steps, the first clipped (its norm above the limit): against torch's own
    unfused AdamW and clip_grad_norm_ on a copy of the model (the clipped gradients of
    the first step, from the same weights, are the same bits)."""
    m, ref = _model(1), _model(1)
    opt = make_optimizer(_groups(m), 0.05, fused=True)
    ref_opt = torch.optim.AdamW(_groups(ref), lr=0.05, foreach=False)
    x = torch.randn(5, 4)
    for i, scale in enumerate((50.0, 0.01, 1.0)):
        ok = apply_gradients(m, opt, _loss(m, x, scale), 0.5, torch.tensor(True))
        assert bool(ok)
        ref_opt.zero_grad()
        _loss(ref, x, scale).backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        if i == 0:
            assert all(torch.equal(p.grad, q.grad)
                       for p, q in zip(m.parameters(), ref.parameters()))
        ref_opt.step()
        for p, q in zip(m.parameters(), ref.parameters()):
            assert torch.allclose(p, q, rtol=0, atol=1e-6)


class _Ds:
    rc_columns = None

    class _W:
        chrom, start, end = "c", 10, 20

    windows = [_W(), _W()]


def test_verdicts_in_order_and_the_error_of_the_step():
    seen = []
    v = Verdicts(_Ds(), [False, False], 1, _model(), seen.append)
    t = torch.tensor
    v.push(t(True), t(True), t(0.5), t([0.5]), [0], [0], 1, now=False)
    v.push(t(True), t(True), t(0.25), t([0.25]), [1], [1], 2, now=False)
    assert seen == []  # read a step late
    v.settle()
    assert seen == [0.5]
    v.settle(all=True)
    assert seen == [0.5, 0.25]
    v.push(t(False), t(False), t(math.inf), t([math.inf]), [0], [0], 3, now=False)
    with pytest.raises(SemisegError, match="infinite training loss at epoch 1, batch 3"):
        v.settle(all=True)
    assert v.pending == []


@pytest.mark.parametrize("saved_fused", [False, True])
def test_a_resumed_state_keeps_the_optimisers_own_kind(saved_fused):
    """A state saved by one kind of optimiser (fused or not: a GPU or a CPU run) loaded
    into the other: the groups keep the new optimiser's flag, its steps run, and it goes
    on as the saved one would (against the saving optimiser itself, within 1e-6)."""
    m, ref = _model(2), _model(2)
    x = torch.randn(5, 4)
    a = make_optimizer(_groups(m), 0.05, fused=saved_fused)
    assert bool(apply_gradients(m, a, _loss(m, x), 1.0))
    ref.load_state_dict(m.state_dict())
    b = make_optimizer(_groups(ref), 0.05, fused=not saved_fused)
    from semiseg.train.stepcheck import load_optimizer_state

    load_optimizer_state(b, copy.deepcopy(a.state_dict()))  # as read from a checkpoint
    assert checks_on_device(b) == (not saved_fused)
    assert all(bool(g["fused"]) == (not saved_fused) for g in b.param_groups)
    for _ in range(2):
        assert bool(apply_gradients(m, a, _loss(m, x), 1.0))
        assert bool(apply_gradients(ref, b, _loss(ref, x), 1.0))
    for p, q in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(p, q, rtol=0, atol=1e-6)
    assert all(float(b.state[p]["step"]) == 3.0 for p in ref.parameters())
