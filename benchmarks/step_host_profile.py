"""Where the host time of one training step goes, and which calls synchronise with the
device (issue 41's training speed: the device sat idle for a third of a fly step).

    PYTHONPATH=. python benchmarks/step_host_profile.py [--config ...] [--set K=V ...]
        [--shape 8x10000] [--top 30]

After a warm-up:
  1. every synchronising call (torch.cuda.set_sync_debug_mode) of `train_epoch` itself
     over two batches, counted by its call site (benchmarks/step_syncs.sync_sites);
  2. cProfile of 3 steps as benchmarks/train_stages.trainer_step runs them (each step
     alone), the functions by own time and by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import step_syncs as ss
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
    cfg, model, opt, ds = ts.setup(args.config, batch, window, dev, args.sets)
    idx = list(range(min(batch, len(ds))))
    amp = dev.type == "cuda"
    for _ in range(2):
        ts.trainer_step(model, opt, ds, idx, dev, amp)
    if dev.type == "cuda":
        sites = ss.sync_sites(cfg, model, opt, ds.subset(list(range(min(2 * batch,
                                                                        len(ds))))),
                              dev, amp)
        print(f"synchronising calls in one epoch of 2 batches: {sum(n for n, _ in sites)}")
        for n, where in sites:
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
