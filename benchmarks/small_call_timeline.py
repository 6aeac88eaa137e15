"""Where one small public call's wall clock goes: host and GPU timestamps of
`log_partition(...).sum().backward()` at (32, 300, 30, 39) with CUDA graphs (needs CUDA).

Each CUDA graph replay is wrapped to take the host's clock and record a CUDA event before
and after it; an event recorded at the call's start on an idle GPU anchors the GPU's clock
to the host's. Prints medians (ms from the call's start) of: the host reaching each
replay, the GPU reaching it (its events), and the call's end on both; then the kernels'
GPU times by torch.profiler (one eager and one graphed call).

    PYTHONPATH=. python benchmarks/small_call_timeline.py [--reps 60]
"""
import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import leaves

from semiseg.crf import log_partition


def _wrap_stages(mark):
    """Host-only marks (no events) around the stages of the public call."""
    from semiseg.crf import dispatch, kernels
    from semiseg.crf.kernels import graphs

    def wrap(owner, name, label, inner=None):
        fn = getattr(owner, name)

        def wrapped(*a, **k):
            mark(label + ">", event=False)
            out = fn(*a, **k)
            mark(label + "<", event=False)
            return inner(out) if inner else out
        setattr(owner, name, staticmethod(wrapped) if isinstance(owner, type) else wrapped)

    def verdict_marked(out):
        x, verdict = out

        def v():
            mark("verdict>", event=False)
            verdict()
            mark("verdict<", event=False)
        return x, v

    wrap(dispatch, "check_inputs", "check", verdict_marked)
    wrap(dispatch, "_backend", "backend")
    wrap(kernels, "forward", "k.forward")
    wrap(kernels, "backward", "k.backward")
    wrap(graphs, "_copies", "copies")
    wrap(dispatch._LogPartition, "backward", "F.backward")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--shape", default="32,300,30,39")
    ap.add_argument("--fine", action="store_true",
                    help="also mark the host's entry to and exit from each stage")
    args = ap.parse_args()
    B, T, K, C = map(int, args.shape.split(","))
    req = {k: v.requires_grad_(True) for k, v in leaves(B, T, K, C).items()}
    sc, tr, db, st, en = (req[k] for k in ("scores", "transition", "duration_bias",
                                           "start", "end"))
    marks = []
    real = torch.cuda.CUDAGraph.replay

    def mark(name, event=True):
        e = None
        if event:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
        marks.append((name, time.perf_counter(), e))

    def replay(self):
        mark("replay>")
        real(self)
        mark("replay<")

    torch.cuda.CUDAGraph.replay = replay
    if args.fine:
        _wrap_stages(mark)

    def api():
        lz = log_partition(sc, tr, db, start=st, end=en)
        mark("api:logZ", event=False)
        s = lz.sum()
        mark("api:sum", event=False)
        s.backward()

    for _ in range(5):
        api()
    torch.cuda.synchronize()
    rows = {}
    for _ in range(args.reps):
        marks.clear()
        torch.cuda.synchronize()
        time.sleep(0.002)
        mark("start")
        api()
        mark("end")
        torch.cuda.synchronize()
        t_end = time.perf_counter()
        h0, e0 = marks[0][1], marks[0][2]
        for i, (name, h, e) in enumerate(marks):
            gpu = e0.elapsed_time(e) if e is not None else float("nan")
            rows.setdefault(f"{i}:{name}", []).append(((h - h0) * 1e3, gpu))
        rows.setdefault("wall", []).append(((t_end - h0) * 1e3, 0.0))
    print(f"({B}, {T}, {K}, {C}) public fwd+bwd, CUDA graphs, {args.reps} calls, medians, "
          f"{torch.cuda.get_device_name(0)}")
    print("| mark | host ms | GPU ms |\n|---|---|---|")
    for k, v in rows.items():
        gpu = [b for _, b in v if not math.isnan(b)]
        gpu = f"{statistics.median(gpu):.3f}" if gpu else "-"
        print(f"| {k} | {statistics.median(a for a, _ in v):.3f} | {gpu} |")
    torch.cuda.CUDAGraph.replay = real
    if args.fine:
        return
    from torch.profiler import ProfilerActivity, profile

    from semiseg.crf.kernels import graphs
    for graphed in (False, True):
        graphs.ENABLED = graphed
        for _ in range(3):
            api()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                api()
            torch.cuda.synchronize()
        print(f"\nkernels, {'graphed' if graphed else 'eager'} (10 calls; us per call)")
        for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:14]:
            print(f"  {ev.device_time_total / 10:9.1f}  x{ev.count / 10:4.1f}  {ev.key[:90]}")
    graphs.ENABLED = True


if __name__ == "__main__":
    main()
