"""`SemiCRF`: the semi-CRF as an nn.Module head (docs/contract.md, "The model head")."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .dispatch import Segmentation, log_partition, marginals, viterbi
from .durations import FAMILIES, make_duration

CENTERINGS = ("none", "mean")


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    return v


class SemiCRF(nn.Module):
    """Semi-Markov CRF head: segment labels and durations from per-position emissions.

    Args:
        num_labels: C, the number of segment labels.
        max_duration: K, the longest segment (any K >= 1; K > T is fine).
        duration: duration model, one of "learned" (a free (K, C) table), "geometric",
            "negative_binomial", "poisson", "uniform" (durations.py).
        duration_transitions: False: a static (C, C) transition `[src, dst]`; True: one
            per duration of the destination segment, (K, C, C) `[d-1, src, dst]`; an int
            P >= 1: periodic, (P, C, C) `[(d-1) mod P, src, dst]` (P = 3 carries a reading
            frame; costs O(P C^2 + K C) per position while P < K).
        boundary_dim: width of the hidden states given to the methods as `hidden`; when
            set, two nn.Linear(boundary_dim, C) give the scores of a segment's first
            (`proj_start`) and last (`proj_end`) position.
        start_end: learn scores for the first and the last segment's label.
        centering: "none", or "mean": subtract each sequence's per-label mean emission over
            its valid positions before scoring (the model then depends on the window).

    Methods take `emissions` (B, T, C), `lengths` (B,) integers in [1, T] or None (all T),
    `hidden` (B, T, boundary_dim) when the head has boundary projections, and `backend`
    ("auto", "torch", "triton").
    """

    def __init__(self, num_labels: int, max_duration: int, *, duration: str = "learned",
                 duration_transitions: bool | int = False, boundary_dim: int | None = None,
                 start_end: bool = True, centering: str = "none"):
        super().__init__()
        C = _positive_int("num_labels", num_labels)
        K = _positive_int("max_duration", max_duration)
        if duration not in FAMILIES:
            raise ValueError(f"duration: expected one of {FAMILIES}, got {duration!r}")
        if centering not in CENTERINGS:
            raise ValueError(f"centering: expected one of {CENTERINGS}, got {centering!r}")
        if boundary_dim is not None:
            _positive_int("boundary_dim", boundary_dim)
        if isinstance(duration_transitions, bool):
            period = K if duration_transitions else None
        else:
            period = _positive_int("duration_transitions", duration_transitions)
        self.num_labels = C
        self.max_duration = K
        self.duration_family = duration
        self.duration_transitions = duration_transitions
        self.period = period  # None: static (C, C); else P of the (P, C, C) transition
        self.boundary_dim = boundary_dim
        self.centering = centering

        shape = (C, C) if period is None else (period, C, C)
        self.transition = nn.Parameter(torch.empty(shape).uniform_(-0.1, 0.1))
        self.duration = make_duration(duration, K, C)
        if start_end:
            self.start = nn.Parameter(torch.empty(C).uniform_(-0.1, 0.1))
            self.end = nn.Parameter(torch.empty(C).uniform_(-0.1, 0.1))
        else:
            self.register_parameter("start", None)
            self.register_parameter("end", None)
        if boundary_dim is not None:
            self.proj_start = nn.Linear(boundary_dim, C)
            self.proj_end = nn.Linear(boundary_dim, C)
        else:
            self.proj_start = None
            self.proj_end = None

    def extra_repr(self) -> str:
        return (f"num_labels={self.num_labels}, max_duration={self.max_duration}, "
                f"duration={self.duration_family!r}, "
                f"duration_transitions={self.duration_transitions}, "
                f"boundary_dim={self.boundary_dim}, start_end={self.start is not None}, "
                f"centering={self.centering!r}")

    def duration_bias(self) -> Tensor:
        """The (K, C) duration scores `duration_bias[d-1, c]` of the duration model."""
        return self.duration()

    def duration_roughness(self) -> Tensor:
        """Sum over labels and lengths of the squared step from one length's duration
        score to the next (crf.duration_step_sd's prior); a learned table only."""
        if not hasattr(self.duration, "roughness"):
            raise ValueError("duration_roughness: the duration model is "
                             f"{self.duration_family!r}, not a learned table")
        return self.duration.roughness()

    # ------------------------------------------------------------------ the edge

    def _terms(self, emissions, lengths, hidden) -> dict:
        """Check the method arguments; return the keyword arguments of the crf functions."""
        if not isinstance(emissions, Tensor):
            raise ValueError(f"emissions: expected a torch.Tensor, got {type(emissions).__name__}")
        if emissions.dim() != 3 or emissions.shape[2] != self.num_labels:
            raise ValueError(f"emissions: expected shape (B, T, {self.num_labels}), "
                             f"got {tuple(emissions.shape)}")
        if not emissions.is_floating_point():
            raise ValueError(f"emissions: expected a floating-point tensor, got {emissions.dtype}")
        B, T, _ = emissions.shape
        if self.boundary_dim is None:
            if hidden is not None:
                raise ValueError("hidden: this head has no boundary projections "
                                 "(boundary_dim=None); pass hidden=None")
        else:
            if not isinstance(hidden, Tensor):
                raise ValueError(f"hidden: expected a tensor of shape ({B}, {T}, "
                                 f"{self.boundary_dim}) (the head has boundary_dim="
                                 f"{self.boundary_dim}), got {type(hidden).__name__}")
            if tuple(hidden.shape) != (B, T, self.boundary_dim):
                raise ValueError(f"hidden: expected shape ({B}, {T}, {self.boundary_dim}), "
                                 f"got {tuple(hidden.shape)}")
            if not hidden.is_floating_point():
                raise ValueError(f"hidden: expected a floating-point tensor, got {hidden.dtype}")
            if hidden.device != emissions.device:
                raise ValueError(f"hidden: on device {hidden.device}, but emissions are on "
                                 f"{emissions.device}")
        if lengths is not None:
            if not isinstance(lengths, Tensor):
                lengths = torch.as_tensor(lengths)
            if lengths.is_floating_point() or lengths.dtype == torch.bool or lengths.is_complex():
                raise ValueError(f"lengths: expected an integer tensor, got dtype {lengths.dtype}")
            if tuple(lengths.shape) != (B,):
                raise ValueError(f"lengths: expected shape ({B},), got {tuple(lengths.shape)}")
            if lengths.numel() and (int(lengths.min()) < 1 or int(lengths.max()) > T):
                raise ValueError(f"lengths: every length must lie in [1, {T}], got min "
                                 f"{int(lengths.min())}, max {int(lengths.max())}")
            lengths = lengths.to(device=emissions.device, dtype=torch.int64)

        scores = emissions
        if self.centering == "mean":
            if lengths is None:
                scores = emissions - emissions.mean(dim=1, keepdim=True)
            else:
                valid = (torch.arange(T, device=emissions.device)[None, :] < lengths[:, None])
                valid = valid[:, :, None].to(emissions.dtype)
                mean = (emissions * valid).sum(1, keepdim=True) / lengths[:, None, None]
                scores = emissions - mean.to(emissions.dtype)
        terms = dict(scores=scores, transition=self.transition,
                     duration_bias=self.duration_bias(), lengths=lengths,
                     start=self.start, end=self.end)
        if self.boundary_dim is not None:
            terms["proj_start"] = self.proj_start(hidden)
            terms["proj_end"] = self.proj_end(hidden)
        return terms

    # ------------------------------------------------------------------ methods

    def log_partition(self, emissions: Tensor, lengths: Tensor | None = None,
                      hidden: Tensor | None = None, *, backend: str = "auto") -> Tensor:
        """log Z (B,) over all segmentations of each sequence, differentiable."""
        t = self._terms(emissions, lengths, hidden)
        return log_partition(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"),
                             backend=backend, **t)

    def decode(self, emissions: Tensor, lengths: Tensor | None = None,
               hidden: Tensor | None = None, *, backend: str = "auto") -> Segmentation:
        """The best segmentation of each sequence (Viterbi)."""
        t = self._terms(emissions, lengths, hidden)
        return viterbi(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"),
                       backend=backend, **t)

    def marginals(self, emissions: Tensor, lengths: Tensor | None = None,
                  hidden: Tensor | None = None, *, backend: str = "auto"):
        """Label marginals (B, T, C) and boundary marginals (B, T), 0 at t >= L_b."""
        t = self._terms(emissions, lengths, hidden)
        return marginals(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"),
                         backend=backend, **t)

    def nll(self, emissions: Tensor, labels: Tensor, lengths: Tensor | None = None,
            hidden: Tensor | None = None, *, backend: str = "auto") -> Tensor:
        """Negative log-likelihood (B,) of per-position labels: log Z - log Z(labels).

        Args:
            labels: (B, T) integers in [0, C), or -1 where the label is unknown; values at
                t >= L_b are ignored. log Z(labels) sums over every segmentation that
                agrees with each known label: boundaries inside a run of one label are
                latent (runs longer than K are fine) and unknown positions take any label.
                +inf where no segmentation agrees (e.g. the labels need a transition or a
                duration whose score is -inf).
        """
        t = self._terms(emissions, lengths, hidden)
        B, T, C = emissions.shape
        if not isinstance(labels, Tensor):
            raise ValueError(f"labels: expected a torch.Tensor, got {type(labels).__name__}")
        if labels.is_floating_point() or labels.dtype == torch.bool or labels.is_complex():
            raise ValueError(f"labels: expected an integer tensor, got dtype {labels.dtype}")
        if tuple(labels.shape) != (B, T):
            raise ValueError(f"labels: expected shape ({B}, {T}), got {tuple(labels.shape)}")
        if labels.device != emissions.device:
            raise ValueError(f"labels: on device {labels.device}, but emissions are on "
                             f"{emissions.device}")
        labels = labels.to(torch.int64)
        lengths = t["lengths"]
        if lengths is not None:
            valid = torch.arange(T, device=labels.device)[None, :] < lengths[:, None]
            labels = torch.where(valid, labels, torch.full_like(labels, -1))
        if labels.numel() and (int(labels.min()) < -1 or int(labels.max()) >= C):
            raise ValueError(f"labels: expected values in [0, {C}) or -1 (unknown), got min "
                             f"{int(labels.min())}, max {int(labels.max())}")
        allowed = (labels[:, :, None] == -1) | (
            labels[:, :, None] == torch.arange(C, device=labels.device))
        scores, tr, db = t.pop("scores"), t.pop("transition"), t.pop("duration_bias")
        # log Z and log Z(labels) in one call over 2B sequences: one pass instead of two
        twice = {k: (None if v is None else torch.cat([v, v]))
                 for k, v in t.items() if k in ("lengths", "proj_start", "proj_end")}
        z = log_partition(torch.cat([scores, scores]), tr, db, start=t["start"], end=t["end"],
                          allowed=torch.cat([torch.ones_like(allowed), allowed]),
                          backend=backend, **twice)
        log_z, log_z_gold = z[:B], z[B:]
        # no agreeing segmentation: +inf (also when nothing at all is allowed, not NaN)
        return torch.where(torch.isneginf(log_z_gold), torch.full_like(log_z, float("inf")),
                           log_z - log_z_gold)
