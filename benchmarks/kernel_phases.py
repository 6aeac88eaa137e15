"""Where the time of one Triton forward+backward goes: per-kernel GPU time (torch.profiler)
and the wall time (CUDA events), for a few settings of the backward's segment schedule.

    PYTHONPATH=. python benchmarks/kernel_phases.py --configs "32,300,30,39;64,1000,100,24"

Prints a table per config; needs CUDA.
"""

import argparse
import time

import torch
from kernels import _events, make  # benchmarks/kernels.py, beside this script

from semiseg.crf import kernels as kn


def wall_ms(fn, reps):
    return _events(fn, reps) * 1e3


def step(x):
    lz, saved = kn.forward(x)
    return kn.backward(x, saved, torch.ones_like(lz))


def host_ms(fn, reps):
    """CPU time per call while the GPU runs free (no synchronisation inside the loop):
    close to the wall time per call when the host, not the GPU, sets the pace."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / reps * 1e3


def kernel_ms(fn, reps):
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t > 0:
            rows[e.key] = (e.count / reps, t / 1e3 / reps)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="32,300,30,39;64,1000,100,24")
    ap.add_argument("--programs-per-sm", default="1,2,4")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name(0)}")
    for cfg in args.configs.split(";"):
        B, T, K, C = (int(v) for v in cfg.split(","))
        x = make(B, T, K, C)
        print(f"\n## B, T, K, C = {B}, {T}, {K}, {C}")
        print("| programs/SM | P | backward rows | fwd ms | fwd+bwd ms | host ms per fwd+bwd |")
        print("|---|---|---|---|---|---|")
        for pps in (int(v) for v in args.programs_per_sm.split(",")):
            for path in ("written by the chains", "recomputed in waves"):
                kn.FULL_ROWS = None if path.startswith("written") else False
                kn.PROGRAMS_PER_SM = pps
                P = kn._segment_length(T, K, B, x.scores.device, C)
                f = wall_ms(lambda x=x: kn.forward(x), args.reps)
                fb = wall_ms(lambda x=x: step(x), args.reps)
                h = host_ms(lambda x=x: step(x), args.reps)
                print(f"| {pps} | {P} | {path} | {f:.3f} | {fb:.3f} | {h:.3f} |")
        kn.FULL_ROWS = None
        kn.PROGRAMS_PER_SM = None
        rows = kernel_ms(lambda x=x: step(x), args.reps)
        total = sum(ms for _, ms in rows.values())
        print(f"\nGPU kernels of one fwd+bwd (programs/SM 2), sum {total:.3f} ms:")
        print("| kernel | launches | ms |")
        print("|---|---|---|")
        for k, (n, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:14]:
            print(f"| {k[:60]} | {n:.0f} | {ms:.3f} |")


if __name__ == "__main__":
    main()
