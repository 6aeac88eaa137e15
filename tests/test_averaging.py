"""Weight averaging (train/averaging.py) against the closed form of the average in
float64, computed from every step's weights."""

import pytest
import torch

from semiseg.train.averaging import WeightAverage, checkpoint_weights, resume


def _closed_form(w0, steps, H):
    """a_T = prod(d) w0 + sum_t (1 - d_t) prod_{s>t} d_s w_t, d_t = min(1 - 1/H,
    (1 + t) / (10 + t)), every weight written out (no recursion)."""
    d = [min(1 - 1 / H, (1 + t) / (10 + t)) for t in range(1, len(steps) + 1)]

    def tail(t):  # prod of d_s for s > t (1-based t; t = 0 for w0)
        p = 1.0
        for s in range(t + 1, len(steps) + 1):
            p *= d[s - 1]
        return p

    out = w0.double() * tail(0)
    for t, w in enumerate(steps, 1):
        out = out + (1 - d[t - 1]) * tail(t) * w.double()
    return out


@pytest.mark.parametrize("H", [1.0, 5.0, 40.0])
def test_average_equals_closed_form(H):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    m.register_buffer("count", torch.tensor(0))
    w0 = m.weight.detach().clone()
    avg = WeightAverage(m, H)
    seen = []
    for t in range(30):
        with torch.no_grad():
            m.weight.copy_(torch.randn(3, 4) * (1 + t))
            m.count.fill_(t)
        seen.append(m.weight.detach().clone())
        avg.update(m)
    want = _closed_form(w0, seen, H)
    assert torch.allclose(avg.shadow["weight"].double(), want, rtol=1e-5, atol=1e-5)
    assert int(avg.shadow["count"]) == 29  # integer buffers copied, not averaged
    if H == 1.0:  # no memory: the average is the last step's weights
        assert torch.equal(avg.shadow["weight"], seen[-1])


def test_applied_swaps_and_restores():
    m = torch.nn.Linear(2, 2)
    own = m.weight.detach().clone()
    avg = WeightAverage(m, 3.0)
    avg.shadow["weight"].fill_(7.0)
    with avg.applied(m):
        assert torch.all(m.weight == 7.0)
    assert torch.equal(m.weight, own)


def test_checkpoint_round_trip():
    """"model" holds the average, "trained_model" the optimiser's weights; resuming puts
    each back where it was."""
    torch.manual_seed(1)
    m = torch.nn.Linear(3, 3)
    avg = WeightAverage(m, 4.0)
    for _ in range(5):
        with torch.no_grad():
            m.weight.add_(torch.randn(3, 3))
        avg.update(m)
    ck = checkpoint_weights(m, avg)
    assert not torch.equal(ck["model"]["weight"], ck["trained_model"]["weight"])
    m2 = torch.nn.Linear(3, 3)
    avg2 = WeightAverage(m2, 4.0)
    resume(m2, avg2, ck)
    assert torch.equal(m2.weight, m.weight)
    assert torch.equal(avg2.shadow["weight"], avg.shadow["weight"])
    assert avg2.updates == 5
    # without averaging a checkpoint holds one set of weights
    assert set(checkpoint_weights(m, None)) == {"model"}
