"""Where a training step of the 1-bp gene model spends its time, stage by stage, and how
much of the device time is the semi-CRF kernels (issue 10's training-speed goal).

    PYTHONPATH=. python benchmarks/train_stages.py [--config configs/demo.yaml]
        [--shapes 8x6000,128x1500,64x6000] [--reps 5] [--device cuda] [--out FILE.md]

For each BATCHxWINDOW shape: the config's data and model (as `semiseg train` builds
them, seed 0, untrained: train.new_model), the first
BATCH training windows, then one training step split into stages, each with the device
synchronised before and after it:
  batch     Dataset.batch (the windows' features and gold, on the host)
  encoder   the encoder forward (bfloat16 autocast on CUDA) -> float32 emissions
  CRF loss  the CRF head's NLL (CRF inputs from the emissions, the gold mask, one
            log_partition over the free and the clamped copies of the batch)
  backward  loss.backward() (CRF kernels' backward, then the encoder's)
  optimizer AdamW step
and a step as the trainer runs it (no synchronisation between stages; `trainer step`),
with the share of its wall the device is busy (the union of kernel intervals).
Median over --reps steps after one warm-up step (which also compiles the kernels). Then
torch.profiler over 3 more steps gives the share of device time in the Triton kernels
(kernel names ending in `_kernel`). Prints a markdown table; --out also writes it (with
device, date and commit) to FILE.md, to be appended to RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch

STAGES = ("batch", "encoder", "CRF loss", "backward", "optimizer")


def _sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def setup(config: str, batch: int, window: int, dev, sets=()):
    from semiseg.config.load import load_config
    from semiseg.train import loop as tr

    cfg = load_config(config, [*sets, f"windows.size={window}", f"train.batch_size={batch}",
                               "train.seed=0"])
    # the config with its "learned" settings resolved, as semiseg train builds from it
    cfg, _, scheme, columns, train_ds, _ = tr._load_data(cfg)
    model = tr.new_model(cfg, scheme, columns, train_ds)
    model.to(dev).train()
    return cfg, model, tr._optimizer(model, cfg), train_ds


def step(model, opt, ds, idx, dev, amp: bool):
    """One training step; returns the seconds of each stage."""
    from semiseg.train.loop import _forward

    t = [time.perf_counter()]
    x, lengths, y = ds.batch(idx, flip=[False] * len(idx))
    _sync(dev)
    t.append(time.perf_counter())
    em, hid, steps = _forward(model, x, lengths, dev, amp)
    _sync(dev)
    t.append(time.perf_counter())
    nll = model.crf.nll(em, y[:, :em.shape[1]].to(dev), steps, hidden=hid)
    loss = (nll / steps.to(nll.dtype)).sum() / len(idx)
    _sync(dev)
    t.append(time.perf_counter())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    _sync(dev)
    t.append(time.perf_counter())
    opt.step()
    _sync(dev)
    t.append(time.perf_counter())
    return [b - a for a, b in itertools.pairwise(t)]


def trainer_step(model, opt, ds, idx, dev, amp: bool) -> None:
    """One step with the trainer's update (train/stepcheck.apply_gradients), no
    synchronisation between stages, its verdict and loss read at once: a step alone
    (train_epoch reads each step's verdict a step late, so its steps overlap:
    benchmarks/step_syncs.py times them back to back)."""
    from semiseg.train.loop import BatchLoss
    from semiseg.train.stepcheck import apply_gradients

    x, lengths, y = ds.batch(idx, flip=[False] * len(idx))
    loss, nll, steps = BatchLoss(model, dev, amp)(x, lengths, y, 1.0 / len(idx))
    if not torch.isfinite(loss):
        raise RuntimeError("non-finite loss")
    if not bool(apply_gradients(model, opt, loss, 1.0)):
        raise RuntimeError("non-finite gradient")
    float(nll.detach().double().sum())


def trainer_timing(model, opt, ds, idx, dev, amp: bool, reps: int) -> tuple[float, float]:
    """(median ms of a trainer-like step over `reps` steps, the share of that wall the
    device is busy: the union of its kernels' and copies' intervals over 3 profiled
    steps, against their wall)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    walls = []
    for _ in range(reps):
        _sync(dev)
        t0 = time.perf_counter()
        trainer_step(model, opt, ds, idx, dev, amp)
        _sync(dev)
        walls.append(time.perf_counter() - t0)
    if dev.type != "cuda":
        return statistics.median(walls) * 1e3, float("nan")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _sync(dev)
        t0 = time.perf_counter()
        for _ in range(3):
            trainer_step(model, opt, ds, idx, dev, amp)
        _sync(dev)
        wall_us = (time.perf_counter() - t0) * 1e6
    spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == DeviceType.CUDA and e.time_range.end > e.time_range.start)
    busy, cur_s, cur_e = 0.0, None, None
    for a, b in spans:
        if cur_e is None or a > cur_e:
            busy += 0.0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    busy += 0.0 if cur_e is None else cur_e - cur_s
    return statistics.median(walls) * 1e3, busy / wall_us


def kernel_share(model, opt, ds, idx, dev, amp: bool, top: int = 0) -> float:
    """The share of device time in the Triton CRF kernels over 3 steps; with `top`, also
    prints the `top` kernels by device time (ms per step)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step(model, opt, ds, idx, dev, amp)
    total = crf = 0.0
    per = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        t = getattr(e, "self_cuda_time_total", 0.0) if t is None else t
        total += t
        per.append((t, e.key, e.count))
        if e.key.endswith("_kernel") and e.key.startswith("_"):
            crf += t
    for t, key, count in sorted(per, reverse=True)[:top]:
        print(f"  {t / 3e3:8.2f} ms/step  {count // 3:5d} calls/step  {key[:90]}")
    if top:
        print(f"  {total / 3e3:8.2f} ms/step device time in all")
    return crf / total if total else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "demo.yaml"))
    ap.add_argument("--shapes", default="8x6000,128x1500,64x6000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="config override, as `semiseg train --set` (repeatable)")
    ap.add_argument("--top", type=int, default=0,
                    help="also print the TOP kernels by device time per step")
    args = ap.parse_args()
    dev = torch.device(args.device)
    amp = dev.type == "cuda"
    rows = []
    for shape in args.shapes.split(","):
        batch, window = (int(v) for v in shape.lower().split("x"))
        _, model, opt, ds = setup(args.config, batch, window, dev, args.sets)
        idx = list(range(min(batch, len(ds))))
        step(model, opt, ds, idx, dev, amp)  # warm-up, compiles
        times = [step(model, opt, ds, idx, dev, amp) for _ in range(args.reps)]
        med = [statistics.median(ts[i] for ts in times) * 1e3 for i in range(len(STAGES))]
        total = statistics.median(sum(ts) for ts in times) * 1e3
        share = (kernel_share(model, opt, ds, idx, dev, amp, args.top)
                 if dev.type == "cuda" else None)
        bp = len(idx) * window
        tstep, busy = trainer_timing(model, opt, ds, idx, dev, amp, args.reps)
        rows.append(f"| {len(idx)} x {window:,} | " + " | ".join(f"{m:.1f}" for m in med)
                    + f" | {total:.1f} | {bp / total / 1e3:.3f} | "
                    + ("-" if share is None else f"{100 * share:.0f}%")
                    + f" | {tstep:.1f} | {bp / tstep / 1e3:.3f} | {100 * busy:.0f}% |")
        print(rows[-1], flush=True)
    head = ("| batch x window bp | " + " | ".join(f"{s} ms" for s in STAGES)
            + " | step ms | Mb/s | device time in CRF kernels | trainer step ms | trainer Mb/s"
            " | device busy |\n|" + "---|" * (len(STAGES) + 7))
    table = head + "\n" + "\n".join(rows)
    print(table)
    if args.out:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True,
                             check=False).stdout.strip() or "unknown"
        name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
        when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        with open(args.out, "w") as fh:
            fh.write(f"## training step of the gene model, stage by stage "
                     f"(benchmarks/train_stages.py) - {when}, commit {sha}, {name}\n\n"
                     f"`PYTHONPATH=. python benchmarks/train_stages.py --config "
                     f"{os.path.relpath(args.config, ROOT)} --shapes {args.shapes} "
                     f"--reps {args.reps} --device {args.device}`\n\n{table}\n")


if __name__ == "__main__":
    main()
