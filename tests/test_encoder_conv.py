"""The encoders' CPU convolution (model.Conv1d, a channels-last (1, k) conv2d) against
torch's own conv1d: float64 to rounding, float32 to its noise, gradients included, and
the same state-dict keys (checkpoints written before it load unchanged)."""

import pytest
import torch
from torch import nn

from semiseg.model import Conv1d

SHAPES = [  # (in, out, kernel, stride, dilation, padding)
    (22, 32, 9, 1, 1, 4),
    (32, 32, 9, 1, 9, 36),
    (32, 64, 8, 8, 1, 0),
    (64, 32, 1, 1, 1, 0),
    (5, 7, 3, 2, 2, 1),
]


def _pair(cin, cout, k, stride, dil, pad, dtype):
    torch.manual_seed(cin * 100 + k)
    ref = nn.Conv1d(cin, cout, k, stride=stride, dilation=dil, padding=pad).to(dtype)
    ours = Conv1d(cin, cout, k, stride=stride, dilation=dil, padding=pad).to(dtype)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_conv1d_float64_with_gradients(shape):
    ref, ours = _pair(*shape, torch.float64)
    x = torch.randn(2, shape[0], 301, dtype=torch.float64)
    xa = x.clone().requires_grad_(True)
    xb = x.clone().requires_grad_(True)
    ya, yb = ref(xa), ours(xb)
    assert ya.shape == yb.shape
    torch.testing.assert_close(yb, ya, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(ya)
    ya.backward(g)
    yb.backward(g)
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-11, atol=1e-11)
    torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("shape", SHAPES)
def test_float32_within_noise_of_float64(shape):
    ref, ours = _pair(*shape, torch.float64)
    x = torch.randn(1, shape[0], 4000, dtype=torch.float64)
    exact = ref(x)
    got = ours.float()(x.float()).double()
    scale = exact.abs().max()
    assert (got - exact).abs().max() <= 1e-5 * scale


def test_state_dict_keys_are_conv1d_keys():
    ref, ours = _pair(*SHAPES[0], torch.float32)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert ours.weight.shape == ref.weight.shape
