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
    *_, scheme, columns, train_ds, _ = tr._load_data(cfg)  # (cfg,) data, scheme, ...
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
        rows.append(f"| {len(idx)} x {window:,} | " + " | ".join(f"{m:.1f}" for m in med)
                    + f" | {total:.1f} | {bp / total / 1e3:.3f} | "
                    + ("-" if share is None else f"{100 * share:.0f}%") + " |")
        print(rows[-1], flush=True)
    head = ("| batch x window bp | " + " | ".join(f"{s} ms" for s in STAGES)
            + " | step ms | Mb/s | device time in CRF kernels |\n|"
            + "---|" * (len(STAGES) + 4))
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
