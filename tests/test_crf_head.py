"""The SemiCRF head: nll against brute force (a hypothesis property), duration families,
centering, boundary projections, and its argument checks."""

from __future__ import annotations

import math

import bruteforce as bf
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from semiseg.crf import SemiCRF, log_partition, marginals, viterbi
from semiseg.crf.durations import FAMILIES, make_duration

F64 = torch.float64


def brute_terms(model: SemiCRF, emissions, lengths, hidden):
    """The head's scoring terms, rebuilt here from its parameters (float64)."""
    e = emissions
    B, T, C = e.shape
    L = lengths if lengths is not None else torch.full((B,), T)
    if model.centering == "mean":
        mean = torch.stack([e[b, :int(L[b])].mean(0) for b in range(B)])
        e = e - mean[:, None, :]
    kw = dict(start=model.start, end=model.end)
    if model.boundary_dim is not None:
        kw["proj_start"] = hidden @ model.proj_start.weight.T + model.proj_start.bias
        kw["proj_end"] = hidden @ model.proj_end.weight.T + model.proj_end.bias
    return (e, model.transition, model.duration(), L), kw


@st.composite
def nll_cases(draw):
    C = draw(st.integers(1, 3))
    T = draw(st.integers(1, 5 if C == 3 else 6))
    K = draw(st.integers(1, 4))
    B = draw(st.integers(1, 2))
    lengths = [draw(st.integers(1, T)) for _ in range(B)]
    labels = [[draw(st.integers(-1, C - 1)) for _ in range(T)] for _ in range(B)]
    # runs of one label, often longer than K
    if draw(st.booleans()):
        c = draw(st.integers(0, C - 1))
        labels[0] = [c] * T
    opts = dict(
        duration=draw(st.sampled_from(FAMILIES)),
        duration_transitions=draw(st.booleans()),
        boundary_dim=draw(st.sampled_from([None, 2])),
        start_end=draw(st.booleans()),
        centering=draw(st.sampled_from(["none", "mean"])),
    )
    seed = draw(st.integers(0, 2**16))
    return C, T, K, lengths, labels, opts, seed


@settings(max_examples=100, deadline=None)
@given(nll_cases())
def test_nll_matches_bruteforce(case):
    C, T, K, lengths, labels, opts, seed = case
    torch.manual_seed(seed)
    model = SemiCRF(C, K, **opts).double()
    with torch.no_grad():  # move every parameter away from its initial value
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    B = len(lengths)
    emissions = torch.randn(B, T, C, dtype=F64) * 2
    hidden = torch.randn(B, T, 2, dtype=F64) if opts["boundary_dim"] else None
    lengths = torch.tensor(lengths)
    labels = torch.tensor(labels)
    nll = model.nll(emissions, labels, lengths, hidden, backend="torch")

    with torch.no_grad():
        args, kw = brute_terms(model, emissions, lengths, hidden)
        allowed = (labels[:, :, None] == -1) | (labels[:, :, None] == torch.arange(C))
        z = bf.log_partition(*args, **kw)
        z_gold = bf.log_partition(*args, **kw, allowed=allowed)
    torch.testing.assert_close(nll.detach(), z - z_gold, atol=1e-9, rtol=1e-9)
    assert (nll >= -1e-9).all()


def test_nll_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = SemiCRF(3, 4, duration="negative_binomial", duration_transitions=True,
                    boundary_dim=5, centering="mean")
    e = torch.randn(2, 9, 3, requires_grad=True)
    h = torch.randn(2, 9, 5)
    labels = torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1, 2], [2, -1, 1, 1, 0, 0, 0, -1, -1]])
    loss = model.nll(e, labels, torch.tensor([9, 7]), h).sum()
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name
    assert e.grad.abs().sum() > 0


def test_nll_gradient_is_marginal_difference():
    """d nll / d emissions = P(label) - P(label | labels) (no centering)."""
    torch.manual_seed(1)
    model = SemiCRF(2, 3, start_end=False).double()
    e = torch.randn(1, 6, 2, dtype=F64, requires_grad=True)
    labels = torch.tensor([[0, 0, 1, -1, 1, 1]])
    model.nll(e, labels).sum().backward()
    lab, _ = model.marginals(e.detach())
    allowed = (labels[:, :, None] == -1) | (labels[:, :, None] == torch.arange(2))
    lab_gold, _ = marginals(e.detach(), model.transition.detach(),
                            model.duration_bias().detach(), allowed=allowed)
    torch.testing.assert_close(e.grad, lab - lab_gold, atol=1e-10, rtol=1e-10)


def test_nll_infinite_when_labels_impossible():
    model = SemiCRF(2, 2, start_end=False).double()
    with torch.no_grad():
        model.transition[0, 1] = -math.inf
    e = torch.randn(1, 4, 2, dtype=F64)
    nll = model.nll(e, torch.tensor([[0, 0, 1, 1]]))
    assert nll[0] == math.inf
    assert torch.isfinite(model.nll(e, torch.tensor([[1, 1, 0, 0]]))).all()


def test_methods_match_functions():
    torch.manual_seed(2)
    model = SemiCRF(3, 4, boundary_dim=2).double()
    e = torch.randn(2, 8, 3, dtype=F64)
    h = torch.randn(2, 8, 2, dtype=F64)
    L = torch.tensor([8, 5])
    args, kw = brute_terms(model, e, L, h)
    z = model.log_partition(e, L, h)
    torch.testing.assert_close(z, log_partition(*args, **kw))
    seg = model.decode(e, L, h)
    seg2 = viterbi(*args, **kw)
    assert seg.segments == seg2.segments
    torch.testing.assert_close(seg.score, seg2.score)
    for a, b in zip(model.marginals(e, L, h), marginals(*args, **kw)):
        torch.testing.assert_close(a, b)


def test_mean_centering_ignores_padding():
    torch.manual_seed(3)
    model = SemiCRF(2, 3, centering="mean").double()
    e = torch.randn(1, 6, 2, dtype=F64)
    z = model.log_partition(e, torch.tensor([4]))
    e2 = e.clone()
    e2[:, 4:] = 100.0  # padding must not move the mean
    torch.testing.assert_close(model.log_partition(e2, torch.tensor([4])), z)
    # and centering removes a per-label offset entirely
    torch.testing.assert_close(model.log_partition(e + torch.tensor([3.0, -2.0], dtype=F64)),
                               model.log_partition(e))


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "learned"])
def test_duration_families_are_distributions(family):
    d = make_duration(family, 7, 3)
    logp = d()
    assert logp.shape == (7, 3)
    torch.testing.assert_close(logp.exp().sum(0), torch.ones(3), atol=1e-5, rtol=0)
    if family != "uniform":
        logp.sum().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in d.parameters())


def test_duration_family_formulas():
    K = 6
    k = torch.arange(K, dtype=F64)[:, None]
    g = make_duration("geometric", K, 2).double()
    p = torch.sigmoid(g.logit_p.detach())
    want = k * torch.log1p(-p) + torch.log(p)
    torch.testing.assert_close(g().detach(), want - torch.logsumexp(want, 0))
    po = make_duration("poisson", K, 2).double()
    lam = torch.nn.functional.softplus(po.raw_rate.detach())
    want = k * torch.log(lam) - lam - torch.lgamma(k + 1)
    torch.testing.assert_close(po().detach(), want - torch.logsumexp(want, 0))
    nb = make_duration("negative_binomial", K, 2).double()
    r = torch.nn.functional.softplus(nb.raw_r.detach())
    p = torch.sigmoid(nb.logit_p.detach())
    want = (torch.lgamma(k + r) - torch.lgamma(r) - torch.lgamma(k + 1)
            + k * torch.log(p) + r * torch.log1p(-p))
    torch.testing.assert_close(nb().detach(), want - torch.logsumexp(want, 0))
    u = make_duration("uniform", K, 2)
    torch.testing.assert_close(u(), torch.full((K, 2), -math.log(K)))
    learned = make_duration("learned", K, 2)
    assert learned() is learned.bias


def test_parameter_shapes():
    m = SemiCRF(4, 5)
    assert m.transition.shape == (4, 4) and m.duration_bias().shape == (5, 4)
    assert m.start.shape == (4,) and m.end.shape == (4,)
    assert m.proj_start is None
    m = SemiCRF(4, 5, duration_transitions=True, start_end=False, boundary_dim=3)
    assert m.transition.shape == (5, 4, 4)
    assert m.start is None and m.end is None
    assert m.proj_start.in_features == 3 and m.proj_end.out_features == 4


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_labels=0, max_duration=3), "num_labels"),
    (dict(num_labels=2.0, max_duration=3), "num_labels"),
    (dict(num_labels=2, max_duration=0), "max_duration"),
    (dict(num_labels=2, max_duration=3, duration="gamma"), "duration"),
    (dict(num_labels=2, max_duration=3, centering="median"), "centering"),
    (dict(num_labels=2, max_duration=3, boundary_dim=0), "boundary_dim"),
])
def test_constructor_errors(kwargs, match):
    C, K = kwargs.pop("num_labels"), kwargs.pop("max_duration")
    with pytest.raises(ValueError, match=match):
        SemiCRF(C, K, **kwargs)


def test_method_errors():
    m = SemiCRF(3, 4)
    mb = SemiCRF(3, 4, boundary_dim=2)
    e = torch.randn(2, 5, 3)
    lab = torch.zeros(2, 5, dtype=torch.int64)
    with pytest.raises(ValueError, match="emissions"):
        m.log_partition(torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match="emissions"):
        m.log_partition(torch.zeros(2, 5, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="hidden"):
        m.log_partition(e, hidden=torch.randn(2, 5, 2))
    with pytest.raises(ValueError, match="hidden"):
        mb.log_partition(e)
    with pytest.raises(ValueError, match="hidden"):
        mb.log_partition(e, hidden=torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match="lengths"):
        m.log_partition(e, torch.tensor([5, 6]))
    with pytest.raises(ValueError, match="lengths"):
        m.log_partition(e, torch.tensor([5.0, 2.0]))
    with pytest.raises(ValueError, match="labels"):
        m.nll(e, lab[:, :4])
    with pytest.raises(ValueError, match="labels"):
        m.nll(e, lab.float())
    with pytest.raises(ValueError, match="labels"):
        m.nll(e, lab + 3)
    with pytest.raises(ValueError, match="labels"):
        m.nll(e, lab - 2)
    with pytest.raises(ValueError, match="backend"):
        m.nll(e, lab, backend="cuda")
    # values past a sequence's length are ignored
    lab2 = lab.clone()
    lab2[1, 3:] = -100
    assert torch.isfinite(m.nll(e, lab2, torch.tensor([5, 3]))).all()
