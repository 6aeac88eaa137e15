"""Bad input at the API edge: a ValueError naming the argument (docs/contract.md, issue 2)."""

from __future__ import annotations

import math

import pytest
import torch

from semiseg.crf import log_partition, marginals, viterbi


def good(B=2, T=5, C=3, K=4):
    return dict(scores=torch.randn(B, T, C), transition=torch.randn(C, C),
                duration_bias=torch.randn(K, C), lengths=torch.tensor([T, 2]),
                start=torch.randn(C), end=torch.randn(C), proj_start=torch.randn(B, T, C),
                proj_end=torch.randn(B, T, C), allowed=torch.ones(B, T, C, dtype=torch.bool))


def call(fn, kw, **changes):
    kw = {**kw, **changes}
    return fn(kw.pop("scores"), kw.pop("transition"), kw.pop("duration_bias"),
              kw.pop("lengths"), backend="torch", **kw)


def nan_at(x):
    x = x.clone()
    x.view(-1)[0] = math.nan
    return x


def inf_at(x, sign=1):
    x = x.clone()
    x.view(-1)[0] = sign * math.inf
    return x


G = good()
BAD = {
    "scores-2d": (dict(scores=torch.randn(5, 3)), "scores"),
    "scores-int": (dict(scores=torch.zeros(2, 5, 3, dtype=torch.int64)), "scores"),
    "scores-list": (dict(scores=[[[0.0]]]), "scores"),
    "scores-empty-C": (dict(scores=torch.randn(2, 5, 0)), "scores"),
    "scores-empty-T": (dict(scores=torch.randn(2, 0, 3)), "scores"),
    "scores-nan": (dict(scores=nan_at(G["scores"])), "scores"),
    "scores-inf": (dict(scores=inf_at(G["scores"])), "scores"),
    "scores-neg-inf": (dict(scores=inf_at(G["scores"], -1)), "scores"),
    "transition-shape": (dict(transition=torch.randn(3, 4)), "transition"),
    "transition-P0": (dict(transition=torch.randn(0, 3, 3)), "transition"),
    "transition-P-shape": (dict(transition=torch.randn(2, 3, 4)), "transition"),
    "transition-4d": (dict(transition=torch.randn(2, 2, 3, 3)), "transition"),
    "transition-int": (dict(transition=torch.zeros(3, 3, dtype=torch.int32)), "transition"),
    "transition-nan": (dict(transition=nan_at(G["transition"])), "transition"),
    "transition-pos-inf": (dict(transition=inf_at(G["transition"])), "transition"),
    "duration-shape": (dict(duration_bias=torch.randn(4, 2)), "duration_bias"),
    "duration-K0": (dict(duration_bias=torch.randn(0, 3)), "duration_bias"),
    "duration-1d": (dict(duration_bias=torch.randn(4)), "duration_bias"),
    "duration-nan": (dict(duration_bias=nan_at(G["duration_bias"])), "duration_bias"),
    "start-shape": (dict(start=torch.randn(4)), "start"),
    "start-nan": (dict(start=nan_at(G["start"])), "start"),
    "end-pos-inf": (dict(end=inf_at(G["end"])), "end"),
    "proj-start-shape": (dict(proj_start=torch.randn(2, 4, 3)), "proj_start"),
    "proj-start-inf": (dict(proj_start=inf_at(G["proj_start"], -1)), "proj_start"),
    "proj-end-nan": (dict(proj_end=nan_at(G["proj_end"])), "proj_end"),
    "proj-end-inf": (dict(proj_end=inf_at(G["proj_end"])), "proj_end"),
    "allowed-dtype": (dict(allowed=torch.ones(2, 5, 3)), "allowed"),
    "allowed-shape": (dict(allowed=torch.ones(2, 5, 2, dtype=torch.bool)), "allowed"),
    "lengths-zero": (dict(lengths=torch.tensor([0, 2])), "lengths"),
    "lengths-long": (dict(lengths=torch.tensor([6, 2])), "lengths"),
    "lengths-float": (dict(lengths=torch.tensor([5.0, 2.0])), "lengths"),
    "lengths-bool": (dict(lengths=torch.tensor([True, True])), "lengths"),
    "lengths-shape": (dict(lengths=torch.tensor([5, 2, 1])), "lengths"),
}


@pytest.mark.parametrize("fn", [log_partition, viterbi, marginals],
                         ids=["log_partition", "viterbi", "marginals"])
@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(case, fn):
    changes, name = BAD[case]
    with pytest.raises(ValueError, match=name):
        call(fn, G, **changes)


def test_good_input_passes_and_neg_inf_parameters_are_valid():
    kw = dict(G)
    kw["transition"] = inf_at(kw["transition"], -1)
    kw["duration_bias"] = inf_at(kw["duration_bias"], -1)
    kw["start"] = inf_at(kw["start"], -1)
    z = call(log_partition, kw)
    assert torch.isfinite(z).all()


def test_device_mismatch():
    kw = dict(G)
    kw["transition"] = kw["transition"].to("meta")
    with pytest.raises(ValueError, match="transition.*device"):
        call(log_partition, kw)
    kw = dict(G)
    kw["allowed"] = kw["allowed"].to("meta")
    with pytest.raises(ValueError, match="allowed.*device"):
        call(log_partition, kw)


def test_backend_names(monkeypatch):
    kw = {**G}
    with pytest.raises(ValueError, match="backend"):
        log_partition(kw["scores"], kw["transition"], kw["duration_bias"], backend="cpu")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        log_partition(kw["scores"], kw["transition"], kw["duration_bias"], backend="triton")
