"""The errors for a training step that is not finite: an infinite or NaN loss, a NaN or
infinite gradient under a finite loss. Each names the epoch, the batch and its windows;
neither gives learning-rate advice (train/stepcheck.py raises them; the step's update is
not made)."""

from __future__ import annotations

import math

import torch

from .data import Dataset


def nonfinite_loss(value: float, nll, ds: Dataset, idx: list[int], flips: list[bool],
                   epoch: int, batch: int) -> str:
    """The error for an infinite or NaN training loss: the windows of the batch whose
    loss is not finite (this process's share), and what it means. Not a learning-rate
    matter: an infinite loss is a gold segmentation the model cannot take (which the
    check before training should have masked), a NaN one a numerical bug."""
    bad = [j for j, v in zip(idx, nll.detach().cpu().tolist()) if not math.isfinite(v)]
    where = ", ".join(_window(ds, j, flips) for j in bad[:4]) or "in another process's share"
    kind = "NaN" if math.isnan(value) else "infinite"
    why = ("log Z(gold) = -inf: the window's gold labels have no segmentation the model "
           "allows, which the gold-path check before training should have masked"
           if kind == "infinite" else "a NaN in the encoder or the CRF")
    return (f"{kind} training loss at epoch {epoch}, batch {batch} (window {where}): {why}. "
            "This is a bug in semiseg; please report it with the window and the config")


def nonfinite_gradient(model, ds: Dataset, idx: list[int], flips: list[bool], epoch: int,
                       batch: int) -> str:
    """The error for a NaN or infinite gradient under a finite loss: the batch's windows
    (the whole global batch: the gradients are its sum) and the parameters whose
    gradient is not finite (read before the gradients are clipped, which would spread a
    NaN to all of them). Raised before the optimiser step, so the weights (and any
    checkpoint written later) stay finite."""
    names = [n for n, p in model.named_parameters()
             if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
    where = ", ".join(_window(ds, j, flips) for j in idx[:4])
    more = f" and {len(idx) - 4} more" if len(idx) > 4 else ""
    what = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (f"non-finite gradient at epoch {epoch}, batch {batch} (windows {where}{more}; "
            f"parameters {what}) under a finite loss: a numerical bug in semiseg; please "
            "report it with the windows and the config")


def _window(ds: Dataset, j: int, flips: list[bool]) -> str:
    w = ds.windows[j]
    flipped = " reverse-complemented" if flips[j] and ds.rc_columns is not None else ""
    return f"{w.chrom}:{w.start}-{w.end}{flipped}"
