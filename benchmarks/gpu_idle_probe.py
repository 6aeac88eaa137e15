"""When is the GPU idle during `semiseg annotate`, and what is the main thread doing then?

    PYTHONPATH=. python benchmarks/gpu_idle_probe.py --size 12e6 --chrom-size 2.5e6 \
        --contigs 500 --max-decode-steps 20000 --batch-steps 2640000

One annotate run of the synthetic genome of annotate_throughput.py (after two warm-up
runs) under torch.profiler, with the stages of annotate marked (record_function): the
GPU's busy time is the union of its kernels, copies and sets; each idle moment is
charged to the innermost marked stage the main thread was in then (or "unmarked").
The profiler slows the host, so the shares matter more than the seconds. Prints a
table; nothing is recorded (a probe).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import torch
from annotate_stages import genome_args, warmed_genome

BIN_US = 20.0


def marked(name, fn):
    @functools.wraps(fn)
    def run(*a, **k):
        with torch.profiler.record_function(f"@{name}"):
            return fn(*a, **k)
    return run


def stages():
    """(owner, attribute, name) of what is marked."""
    import semiseg.annotate as A
    import semiseg.crf.dispatch as D
    import semiseg.emit as E
    import semiseg.framehead as F

    return [(A.Annotator, "emissions", "emissions"), (A.Annotator, "_encode", "encoder"),
            (A.Annotator, "load_batch", "load_batch"),
            (A.Annotator, "decode", "decode"), (A.Annotator, "decode_long", "decode_long"),
            (A.Annotator, "run_batch", "run_batch"), (E.LocalWriter, "submit", "submit"),
            (E, "write_chrom", "write_chrom"), (F.FrameHead, "_terms", "terms"),
            (F.FrameHead, "_posteriors", "posterior pass"),
            (F.FrameHead, "_decode_posteriors", "posterior decode"),
            (F.FrameHead, "_marginals_from", "marginals"),
            (D, "check_inputs", "check_inputs")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    genome_args(ap, 12e6, 2_640_000)
    ap.add_argument("--device", default="cuda", help="cpu: only to try the script")
    a = ap.parse_args()

    import semiseg.annotate as A

    work, fasta, lengths, kw = warmed_genome(a, "idle_")
    plain = [(o, n, getattr(o, n)) for o, n, _ in stages()]
    for (o, n, name), (_, _, fn) in zip(stages(), plain):
        setattr(o, n, marked(name, fn))
    main_tid = threading.get_native_id()
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            with torch.profiler.record_function("@annotate"):
                A.annotate(a.model, fasta, os.path.join(work, "run"), **kw)
            if a.device == "cuda":
                torch.cuda.synchronize()
    finally:
        for o, n, fn in plain:
            setattr(o, n, fn)
    trace = os.path.join(work, "trace.json")
    prof.export_chrome_trace(trace)
    with open(trace) as fh:
        ev = json.load(fh)["traceEvents"]
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in ev
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    marks = [e for e in ev if e.get("cat") == "user_annotation"
             and str(e.get("name", "")).startswith("@") and "dur" in e]
    top = next(e for e in marks if e["name"] == "@annotate")
    tid = top["tid"]
    t0, t1 = top["ts"], top["ts"] + top["dur"]
    n = int((t1 - t0) / BIN_US) + 1
    busy = np.zeros(n + 1, np.int64)
    for s, e in gpu:
        i, j = int((max(s, t0) - t0) / BIN_US), int((min(e, t1) - t0) / BIN_US) + 1
        if i < j:
            busy[i] += 1
            busy[min(j, n)] -= 1
    busy = np.cumsum(busy)[:n] > 0
    names = sorted({e["name"] for e in marks})
    owner = np.full(n, -1)
    main = sorted((e for e in marks if e["tid"] == tid), key=lambda e: -e["dur"])
    for e in main:  # outer stages first, inner ones paint over them
        i = int((e["ts"] - t0) / BIN_US)
        j = int((e["ts"] + e["dur"] - t0) / BIN_US) + 1
        owner[max(0, i):min(n, j)] = names.index(e["name"])
    idle = ~busy
    dev = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"{dev}; genome {sum(lengths.values()):,} bp; main thread "
          f"{tid} (native {main_tid}); profiled wall {(t1 - t0) / 1e6:.2f} s, GPU busy "
          f"{busy.sum() * BIN_US / 1e6:.2f} s, idle {idle.sum() * BIN_US / 1e6:.2f} s "
          f"(bins of {BIN_US:.0f} us)")
    print("| main thread in (innermost) | GPU idle s | share of idle | stage's own time s |")
    print("|---|---|---|---|")
    rows = []
    for k, name in [(-1, "unmarked")] + list(enumerate(names)):
        sel = owner == k
        rows.append((idle[sel].sum() * BIN_US / 1e6, name, sel.sum() * BIN_US / 1e6))
    for s, name, own in sorted(rows, reverse=True):
        print(f"| {name} | {s:.2f} | {s / max(1e-9, idle.sum() * BIN_US / 1e6):.0%} | "
              f"{own:.2f} |")
    other = {}
    for e in marks:
        if e["tid"] != tid:
            other[e["name"]] = other.get(e["name"], 0) + e["dur"] / 1e6
    print("other threads' marked time (s):",
          ", ".join(f"{k} {v:.2f}" for k, v in sorted(other.items())))


if __name__ == "__main__":
    main()
