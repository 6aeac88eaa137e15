"""The training step as `semiseg train` runs it, back to back (issue 41's training speed):
where the host waits for the device, and what a step costs when nothing else waits.

    PYTHONPATH=. python benchmarks/step_syncs.py [--config configs/gene_structure.yaml]
        [--set KEY=VALUE ...] [--shape 8x10000] [--batches 30] [--rounds 3] [--syncs]

The config's data and model as `semiseg train` builds them (train_stages.setup: seed 0,
untrained), then `train.loop.train_epoch` itself over the first --batches batches of the
training windows of the shape's size (Dataset.subset: no validation, no checkpoint):
one warm-up epoch (compiles the kernels), then --rounds timed epochs, each timed from
a synchronised start to a synchronised end. Unlike train_stages.py's "trainer step"
(synchronised around every step), consecutive steps may overlap here, as in training.
Prints ms per step and Mb/s of window sequence (median over the rounds), device, date
and commit.

--tunings "SPEC;SPEC;...": Triton launch settings compared in this one process (each SPEC
"field=value,..." as SEMISEG_TRITON_TUNING takes it, "" = the defaults): one warm-up epoch
per setting, then --rounds rounds, each timing every setting once in turn (the
settings alternate, so a drift of the machine falls on all of them alike); a row each.

--syncs: one more epoch of 2 batches under torch.cuda.set_sync_debug_mode("warn"); every
operation that makes the host wait for the device is listed once with the semiseg (or
benchmarks) frames that called it, innermost last.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
if os.environ.get("SEMISEG_CODE"):  # another checkout's semiseg/ (fly_gene_gpu.sh's OLD)
    sys.path.insert(0, os.environ["SEMISEG_CODE"])

import torch  # noqa: E402
from lib import header  # noqa: E402
from train_stages import setup  # noqa: E402


def run_epoch(cfg, model, opt, ds, dev, amp: bool) -> float:
    """Seconds of one train_epoch over ds, device synchronised at both ends."""
    from semiseg.train import loop as tr

    sched = tr.Schedule.for_run(cfg, tr.epoch_batches(ds, cfg))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    tr.train_epoch(model, opt, ds, cfg, 1, tr.RunState(), sched, dev, amp)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return time.perf_counter() - t0


def timed(specs: list[str], rounds: int, epoch) -> dict[str, list[float]]:
    """Seconds of `epoch` under each Triton tuning spec: a warm-up each, then `rounds`
    rounds over the specs in turn. The backend reads its module's DEFAULT when no tuning
    is passed (crf/triton/__init__.py), so each spec is set there for its epochs."""
    import semiseg.crf.triton as trk
    from semiseg.crf.triton.schedule import Tuning

    base = trk.DEFAULT
    out: dict[str, list[float]] = {s: [] for s in specs}
    try:
        for r in range(-1, rounds):
            for spec in specs:
                trk.DEFAULT = Tuning.from_env(spec, base)
                secs = epoch()
                if r >= 0:
                    out[spec].append(secs)
    finally:
        trk.DEFAULT = base
    return out


def sync_sites(cfg, model, opt, ds, dev, amp: bool) -> list[tuple[int, str]]:
    """(count, call site) of each synchronising operation in one train_epoch over ds."""
    sites: collections.Counter = collections.Counter()

    def record(message, category, filename, lineno, file=None, line=None):
        frames = [f for f in traceback.extract_stack()[:-1]
                  if ("/semiseg/" in f.filename or "/benchmarks/" in f.filename)
                  and "step_syncs.py" not in f.filename]
        where = " <- ".join(f"{os.path.relpath(f.filename, ROOT)}:{f.lineno} {f.name}"
                            for f in reversed(frames[-4:]))
        sites[f"{str(message).splitlines()[0][:60]} | {where}"] += 1

    old = warnings.showwarning
    warnings.showwarning = record
    warnings.simplefilter("always")
    torch.cuda.set_sync_debug_mode("warn")
    try:
        run_epoch(cfg, model, opt, ds, dev, amp)
    finally:
        torch.cuda.set_sync_debug_mode(0)
        warnings.showwarning = old
    return sorted(((n, s) for s, n in sites.items()), reverse=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "gene_structure.yaml"))
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--shape", default="8x10000")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--syncs", action="store_true")
    ap.add_argument("--tunings", default=None, metavar="SPEC;SPEC")
    args = ap.parse_args()
    dev = torch.device(args.device)
    amp = dev.type == "cuda"
    batch, window = (int(v) for v in args.shape.lower().split("x"))
    cfg, model, opt, ds = setup(args.config, batch, window, dev, args.sets)
    full = [i for i, w in enumerate(ds.windows) if w.end - w.start == window]
    idx = full[:batch * args.batches]
    sub = ds.subset(idx)
    bp = sum(ds.windows[i].end - ds.windows[i].start for i in idx)
    n = -(-len(idx) // batch)
    specs = [""] if args.tunings is None else args.tunings.split(";")
    secs = timed(specs, args.rounds, lambda: run_epoch(cfg, model, opt, sub, dev, amp))
    print(header("benchmarks/step_syncs.py", args.device,
                 "python " + " ".join(sys.argv)))
    print("| tuning | batch x window bp | batches | epoch s (rounds) | ms per step | Mb/s |")
    print("|---|---|---|---|---|---|")
    for spec in specs:
        med = statistics.median(secs[spec])
        print(f"| {spec or 'defaults'} | {batch} x {window:,} | {n} | "
              f"{', '.join(f'{s:.2f}' for s in secs[spec])} | {1e3 * med / n:.1f} | "
              f"{bp / med / 1e6:.3f} |")
    if args.syncs and dev.type == "cuda":
        print("\nsynchronising operations in one epoch of 2 batches (count | site):")
        for count, site in sync_sites(cfg, model, opt, ds.subset(idx[:2 * batch]), dev, amp):
            print(f"  {count:4d} | {site}")


if __name__ == "__main__":
    main()
