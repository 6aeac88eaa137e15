"""A training step's update and its checks without making the host wait for the device
(issue 41's training speed).

Each step must stop training with a clear error when its loss or its gradients are not
finite (train/nonfinite.py), and never apply such gradients. Asking the device "is it
finite?" makes the host wait until the device has caught up, and then the device idles
while the host launches the next step's many small kernels (the encoder, the gene head's
terms): on an H100 the fly config's step was 26% idle (benchmarks/step_syncs.py).

So on a CUDA device the step is applied by the fused AdamW with `found_inf` (the update
of a step whose loss or gradient norm is not finite is skipped on the device, its moment
estimates and step count untouched), the gradients are clipped only where they are
finite, and the step's verdict is read on the host one step later (`Verdicts.settle`,
waiting for that step alone), when the device has long finished it: the error then names
that step's windows, and its gradients are still in place for the message. On a CPU
nothing runs ahead of the host, so each step is checked before its update, as before,
with the same optimiser and the same bits. `to_device` copies a batch to the device
without waiting either.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import SemisegError
from .nonfinite import nonfinite_gradient, nonfinite_loss


def make_optimizer(groups: list[dict], lr: float, fused: bool | None = None
                   ) -> torch.optim.Optimizer:
    """AdamW over the parameter groups; fused (one kernel, and `found_inf` honoured) when
    every parameter is a float32 CUDA tensor (`fused` None), or as `fused` says (the
    tests run the deferred checks on the CPU with fused=True)."""
    if fused is None:
        params = [p for g in groups for p in g["params"]]
        fused = bool(params) and all(p.is_cuda and p.dtype == torch.float32 for p in params)
    return torch.optim.AdamW(groups, lr=lr, fused=fused or None)


def checks_on_device(opt: torch.optim.Optimizer) -> bool:
    """Whether opt's steps are checked on the device (a fused AdamW: `found_inf`): every
    parameter group's own flag, which is what its step reads."""
    return all(bool(g.get("fused")) for g in opt.param_groups)


def load_optimizer_state(opt: torch.optim.Optimizer, state: dict) -> None:
    """A checkpoint's optimiser state into opt (a resumed run), keeping opt's own fused
    flag: a saved state carries its run's flag in every group (a run resumed on another
    kind of device would otherwise step fused on a CPU, or unfused on a GPU, where a
    non-finite step would then be applied), and a fused step wants its step counts on
    the parameters' device."""
    fused = opt.defaults.get("fused")
    opt.load_state_dict(state)
    for g in opt.param_groups:
        g["fused"] = fused
    if fused:
        for p, st in opt.state.items():
            if "step" in st:
                st["step"] = torch.as_tensor(st["step"], dtype=torch.float32).to(
                    p.device, copy=True)


def apply_gradients(model, opt, loss: torch.Tensor, grad_clip: float,
                    loss_ok: torch.Tensor | None = None) -> torch.Tensor:
    """One optimiser step on `loss`'s gradients, clipped to norm `grad_clip` (0: not).
    Returns the step's verdict, a bool tensor: the loss (`loss_ok`, when given) and the
    gradient norm finite. Where it is False no update is made and the gradients are left
    as they were (the clip would spread a NaN to every one of them, hiding where it came
    from). A deferred optimiser (`checks_on_device`) decides that on the device and the verdict
    stays there; otherwise it is read here, before the step."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads)
    ok = torch.isfinite(norm)
    if loss_ok is not None:
        ok = ok & loss_ok.to(ok.device)
    on_device = checks_on_device(opt)
    if not on_device and not bool(ok):
        return ok
    if grad_clip > 0:  # clip_grads_with_norm_'s factor, 1 where the step is skipped
        coef = torch.clamp(grad_clip / (norm + 1e-6), max=1.0)
        torch._foreach_mul_(grads, torch.where(ok, coef, torch.ones_like(coef)))
    opt.found_inf = (~ok).float() if on_device else None
    try:
        opt.step()
    finally:
        opt.found_inf = None
    return ok


@dataclass
class _Step:
    """One step awaiting its verdict: [loss finite, step finite, mean loss] on the host
    (filled by a copy the device makes when it gets there), that copy's event, and what
    the error messages need."""

    host: torch.Tensor
    event: object
    nll: torch.Tensor
    idx: list
    batch: list
    number: int


class Verdicts:
    """The verdicts of an epoch's steps, read on the host one step late on a CUDA device
    (module docstring). `push` after each step's update; `settle` reads the oldest step
    pending (waiting for nothing queued after it) and raises its error, or reports its
    mean loss to on_batch: train_epoch settles step n - 1 after step n's loss and before
    its update, so the error's weights and gradients are step n - 1's. `settle(all=True)`
    at the epoch's end."""

    def __init__(self, ds, flips: list, epoch: int, model, on_batch=None):
        self.ds, self.flips, self.epoch, self.model = ds, flips, epoch, model
        self.on_batch = on_batch
        self.pending: list[_Step] = []

    def push(self, loss_ok: torch.Tensor, ok: torch.Tensor, mean: torch.Tensor, nll, idx,
             batch, number: int, now: bool) -> None:
        """Record a step's verdict (`loss_ok`, `ok` from apply_gradients, the batch mean
        loss); settled at once with `now`, else by the next `settle`."""
        vals = torch.stack([loss_ok.to(mean.device).to(mean.dtype),
                            ok.to(mean.device).to(mean.dtype), mean.detach().reshape(())])
        if vals.is_cuda:
            host = torch.empty(3, dtype=vals.dtype, pin_memory=True)
            host.copy_(vals, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        else:
            host, event = vals, None
        self.pending.append(_Step(host, event, nll.detach(), idx, batch, number))
        if now:
            self.settle()

    def settle(self, all: bool = False) -> None:
        """Read the oldest pending step's verdict (every one with `all`)."""
        while self.pending:
            s = self.pending.pop(0)
            if s.event is not None:
                s.event.synchronize()
            loss_ok, ok, mean = s.host.tolist()
            if not loss_ok:
                self.pending.clear()
                raise SemisegError(nonfinite_loss(mean, s.nll, self.ds, s.idx, self.flips,
                                                  self.epoch, s.number))
            if not ok:
                self.pending.clear()
                raise SemisegError(nonfinite_gradient(self.model, self.ds, s.batch,
                                                      self.flips, self.epoch, s.number))
            if self.on_batch is not None:
                self.on_batch(mean)
            if not all:
                return


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """A host tensor of a batch on `device`; to a CUDA device from pinned memory without
    waiting (a copy from pageable memory makes the host wait for the device's queue)."""
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
