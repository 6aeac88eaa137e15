"""Training on several processes (torch.distributed, launched by torchrun).

`semiseg train` runs as one process when started directly, and as one process per GPU
(or per CPU worker) under `torchrun --nproc_per_node N semiseg train ...`: torchrun sets
RANK, LOCAL_RANK and WORLD_SIZE, and `start` joins the process group (NCCL on CUDA,
gloo on CPU). The global batch (`train.batch_size`) stays the same whatever the number
of processes: each process takes batch_size / world_size windows of every batch
(`shard`), the gradients are averaged across processes (DistributedDataParallel), so the
model follows the same optimisation path as a single process, up to the order in which
floating-point sums are reduced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import torch

from ..errors import SemisegError
from ..runtime import pick_device


@dataclass
class Context:
    """Where this process stands: its rank, the number of processes, its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def main(self) -> bool:
        """Rank 0: the process that writes checkpoints, metrics and logs."""
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SemisegError(f"{name}={raw!r}: expected an integer (set by torchrun)") from None


def world_size() -> int:
    """The number of processes torchrun started (WORLD_SIZE; 1 without torchrun)."""
    return max(1, _env_int("WORLD_SIZE", 1))


def start(device: str) -> Context:
    """Join the process group when started by torchrun with WORLD_SIZE > 1 (NCCL on
    CUDA, gloo on CPU); otherwise a single-process Context. `device` is the config's
    device key; under CUDA each process takes GPU LOCAL_RANK."""
    world = world_size()
    rank, local = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    dev = pick_device(device)
    if world <= 1:
        return Context(device=dev)
    if dev.type == "cuda":
        n = torch.cuda.device_count()
        if local >= n:
            raise SemisegError(f"LOCAL_RANK {local}: only {n} CUDA device(s) are visible "
                               "(torchrun --nproc_per_node must not exceed the GPUs)")
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    import torch.distributed as dist

    if not dist.is_available():
        raise SemisegError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo",
                                rank=rank, world_size=world)
    return Context(rank=rank, world_size=world, local_rank=local, device=dev)


def stop(ctx: Context, wait: bool = True) -> None:
    """Leave the process group, after every process has arrived here when `wait` (the
    normal end); at once on an error, when the others may never arrive."""
    if ctx.enabled:
        import torch.distributed as dist

        if dist.is_initialized():
            if wait:
                dist.barrier()
            dist.destroy_process_group()


def per_rank_batch(batch_size: int, world: int) -> int:
    """Windows per process in each batch: the global batch split evenly."""
    if batch_size % world:
        raise SemisegError(
            f"train.batch_size: {batch_size} is not divisible by the number of processes "
            f"({world}); the global batch is split evenly across processes, so use a "
            f"multiple of {world} (or another --nproc_per_node)")
    return batch_size // world


def shard(items: list, ctx: Context) -> list:
    """This process's share of a batch: items rank, rank + W, rank + 2W, ... (every item
    goes to exactly one process; shares differ in size by at most one)."""
    return items[ctx.rank::ctx.world_size]


def all_sum(values: torch.Tensor, ctx: Context) -> torch.Tensor:
    """The elementwise sum of `values` over all processes (a copy; unchanged with one
    process). Runs on the process's device (NCCL needs CUDA tensors)."""
    if not ctx.enabled:
        return values
    import torch.distributed as dist

    t = values.detach().to(ctx.device).clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.to(values.device)


def wrap(module: torch.nn.Module, ctx: Context) -> torch.nn.Module:
    """`module` under DistributedDataParallel (gradients averaged across processes when
    backward runs); the module itself with one process."""
    if not ctx.enabled:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids)
