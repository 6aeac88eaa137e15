"""Where the host time of one training step goes, and which calls synchronise with the
device (issue 41's training speed: the device sat idle for a third of a fly step).

    PYTHONPATH=. python benchmarks/step_host_profile.py [--config ...] [--set K=V ...]
        [--shape 8x10000] [--top 30]

A step as the trainer runs it (benchmarks/train_stages.trainer_step), after a warm-up:
  1. every synchronising call (torch.cuda.set_sync_debug_mode), counted by the first
     three semiseg frames of its Python stack;
  2. cProfile of 3 steps, the functions by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import torch
import train_stages as ts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "gene_structure.yaml"))
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--shape", default="8x10000")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    batch, window = (int(v) for v in args.shape.lower().split("x"))
    _, model, opt, ds = ts.setup(args.config, batch, window, dev, args.sets)
    idx = list(range(min(batch, len(ds))))
    amp = dev.type == "cuda"
    for _ in range(2):
        ts.trainer_step(model, opt, ds, idx, dev, amp)
    if dev.type == "cuda":
        seen = collections.Counter()

        def show(message, category, filename, lineno, file=None, line=None):
            frames = [f"{os.path.relpath(f.filename, ROOT)}:{f.lineno} {f.name}"
                      for f in traceback.extract_stack()
                      if f.filename.startswith(ROOT) and "benchmarks" not in f.filename]
            seen[" <- ".join(reversed(frames[-3:]))] += 1

        old = warnings.showwarning
        warnings.showwarning = show
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        ts.trainer_step(model, opt, ds, idx, dev, amp)
        torch.cuda.set_sync_debug_mode("default")
        warnings.showwarning = old
        print(f"synchronising calls in one step: {sum(seen.values())}")
        for where, n in seen.most_common(40):
            print(f"  {n:4d}  {where}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3):
        ts.trainer_step(model, opt, ds, idx, dev, amp)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    prof.disable()
    st = pstats.Stats(prof)
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
