"""Weight averaging (`train.average_epochs`): an exponential moving average of the model's
weights over the optimiser steps, the model that validation scores, best.pt holds and
annotation uses.

Why: the gene model's decisions on long introns sit on near-ties of a few scalars (the
tied introns' per-base constants, transition and length scores) that the head's
learning rate (train.crf_lr_scale) moves by about lr x scale at every step, noise
included; the last step's weights carry that noise into the genes. The average over
the last `average_epochs` epochs' steps keeps the drift and damps the noise.

The average after step t is  a_t = d_t a_{t-1} + (1 - d_t) w_t  (a_0 = the initial
weights), with d_t = min(1 - 1/H, (1 + t) / (10 + t)) and H = average_epochs x the
batches of an epoch: early steps weigh more while the average is young, so it does
not keep the random initialisation. Integer buffers (counters) are copied, not averaged.
"""

from __future__ import annotations

import contextlib

import torch


class WeightAverage:
    """The running average of `model`'s state_dict (floating entries averaged, others
    copied), kept on the model's device in float32 or the entry's own dtype."""

    def __init__(self, model: torch.nn.Module, horizon_steps: float):
        if horizon_steps < 1:
            raise ValueError(f"horizon_steps must be >= 1 (got {horizon_steps})")
        self.decay = 1.0 - 1.0 / horizon_steps
        self.updates = 0
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def factor(self, t: int) -> float:
        """d_t, the weight of the old average at update t (1-based)."""
        return min(self.decay, (1.0 + t) / (10.0 + t))

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        self.updates += 1
        d = self.factor(self.updates)
        for k, v in model.state_dict().items():
            s = self.shadow[k]
            if s.is_floating_point():
                s.mul_(d).add_(v.detach().to(s.dtype), alpha=1.0 - d)
            else:
                s.copy_(v)

    @contextlib.contextmanager
    def applied(self, model: torch.nn.Module):
        """The model holds the averaged weights inside the block, its own after."""
        own = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.shadow)
        try:
            yield model
        finally:
            model.load_state_dict(own)

    def state_dict(self) -> dict:
        """The averaged weights (on the CPU) and the number of updates."""
        return {"updates": self.updates,
                "weights": {k: v.detach().cpu() for k, v in self.shadow.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.updates = int(state["updates"])
        for k, v in state["weights"].items():
            self.shadow[k].copy_(v)


def horizon(cfg, batches_per_epoch: int) -> float | None:
    """H in optimiser steps for a config, or None when averaging is off."""
    epochs = float(cfg.train.average_epochs)
    return max(1.0, epochs * batches_per_epoch) if epochs > 0 else None


def resume(model: torch.nn.Module, average: WeightAverage | None, ckpt: dict) -> None:
    """A checkpoint's weights back into a run: the model gets the weights it trained
    with ("trained_model" where the run averaged, else "model"), the average its own."""
    model.load_state_dict(ckpt.get("trained_model", ckpt["model"]))
    if average is not None:
        if "average" in ckpt:
            average.load_state_dict({"updates": ckpt["average"]["updates"],
                                     "weights": ckpt["model"]})
        else:  # a run that did not average until now: the average starts here
            average.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}


def checkpoint_weights(model: torch.nn.Module, average: WeightAverage | None) -> dict:
    """A checkpoint's weight entries: "model" (what validation scored and annotation
    uses: the average where there is one) and, when averaging, "trained_model" (the
    optimiser's own weights, for --resume) and "average" (its update count)."""
    own = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    if average is None:
        return {"model": own}
    state = average.state_dict()
    return {"model": state["weights"], "trained_model": own,
            "average": {"updates": state["updates"]}}
