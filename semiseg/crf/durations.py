"""Duration models: a (K, C) table of duration scores `duration_bias[d-1, c]`.

    learned            a free (K, C) parameter, used as is
    geometric          P(d) ∝ (1 - p_c)^(d-1) p_c
    negative_binomial  d - 1 ~ NB(r_c, p_c):  P(d) ∝ C(d-2+r_c, d-1) p_c^(d-1) (1 - p_c)^r_c
    poisson            d - 1 ~ Poisson(lambda_c):  P(d) ∝ lambda_c^(d-1) e^-lambda_c / (d-1)!
    uniform            P(d) = 1 / K (no parameters)

The parametric families are truncated to d = 1..K and renormalised there, so each
column of the table is a log-probability distribution over the durations the model can
produce. Parameters are unconstrained reals (p = sigmoid, r and lambda = softplus),
initialised so that every label's mean duration is about (K + 1) / 2.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.functional import logsigmoid, softplus

FAMILIES = ("learned", "geometric", "negative_binomial", "poisson", "uniform")


def _inv_softplus(y: float) -> float:
    return y + math.log(-math.expm1(-y))


def _logit(p: float) -> float:
    return math.log(p) - math.log1p(-p)


class DurationModel(nn.Module):
    """Base: `forward()` returns the (K, C) table of duration scores over d = 1..K."""

    def __init__(self, max_duration: int, num_labels: int):
        super().__init__()
        self.max_duration = max_duration
        self.num_labels = num_labels
        # k = d - 1 = 0..K-1, a buffer so that it follows the module's device
        self.register_buffer("k", torch.arange(max_duration, dtype=torch.float32)[:, None],
                             persistent=False)



class _Parametric(DurationModel):
    """A family given by `unnormalised()` (K, C), renormalised over d = 1..K."""

    def forward(self) -> Tensor:
        logp = self.unnormalised()
        return logp - torch.logsumexp(logp, dim=0, keepdim=True)


class Learned(DurationModel):
    """A free (K, C) parameter, used as `duration_bias` as is (not normalised)."""

    def __init__(self, max_duration: int, num_labels: int):
        super().__init__(max_duration, num_labels)
        self.bias = nn.Parameter(torch.zeros(max_duration, num_labels))

    def forward(self) -> Tensor:
        return self.bias

    def roughness(self) -> Tensor:
        """The sum over labels and lengths d of (bias[d + 1] - bias[d])^2 (a scalar; the
        smoothness prior's, crf.duration_step_sd)."""
        return (self.bias[1:] - self.bias[:-1]).square().sum()


class Geometric(_Parametric):
    def __init__(self, max_duration: int, num_labels: int):
        super().__init__(max_duration, num_labels)
        p = 2.0 / (max_duration + 1) if max_duration > 1 else 0.5
        self.logit_p = nn.Parameter(torch.full((num_labels,), _logit(min(p, 0.99))))

    def unnormalised(self) -> Tensor:
        # log[(1-p)^k p] = k log(1-p) + log p, with log(1-p) = logsigmoid(-logit)
        return self.k * logsigmoid(-self.logit_p) + logsigmoid(self.logit_p)


class NegativeBinomial(_Parametric):
    def __init__(self, max_duration: int, num_labels: int):
        super().__init__(max_duration, num_labels)
        mean = max((max_duration - 1) / 2.0, 0.5)  # of k = d - 1, with r = 1
        self.raw_r = nn.Parameter(torch.full((num_labels,), _inv_softplus(1.0)))
        self.logit_p = nn.Parameter(torch.full((num_labels,), _logit(mean / (1.0 + mean))))

    def unnormalised(self) -> Tensor:
        r = softplus(self.raw_r)
        k = self.k
        return (torch.lgamma(k + r) - torch.lgamma(r) - torch.lgamma(k + 1)
                + k * logsigmoid(self.logit_p) + r * logsigmoid(-self.logit_p))


class Poisson(_Parametric):
    def __init__(self, max_duration: int, num_labels: int):
        super().__init__(max_duration, num_labels)
        lam = max((max_duration - 1) / 2.0, 0.5)
        self.raw_rate = nn.Parameter(torch.full((num_labels,), _inv_softplus(lam)))

    def unnormalised(self) -> Tensor:
        lam = softplus(self.raw_rate)
        k = self.k
        return k * torch.log(lam) - lam - torch.lgamma(k + 1)


class Uniform(_Parametric):
    def unnormalised(self) -> Tensor:
        return torch.zeros(self.max_duration, self.num_labels, device=self.k.device)


_CLASSES = {
    "learned": Learned,
    "geometric": Geometric,
    "negative_binomial": NegativeBinomial,
    "poisson": Poisson,
    "uniform": Uniform,
}


def make_duration(family: str, max_duration: int, num_labels: int) -> DurationModel:
    """The duration model `family` (one of FAMILIES) for K = max_duration, C = num_labels."""
    if family not in _CLASSES:
        raise ValueError(f"duration: expected one of {FAMILIES}, got {family!r}")
    return _CLASSES[family](max_duration, num_labels)
