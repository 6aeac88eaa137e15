"""Benchmark of the Triton semi-CRF kernels (issue 3's configurations).

    PYTHONPATH=. python benchmarks/kernels.py [--configs all|quick] [--rows FILE] [--torch]

For each (B, T, K, C): forward, forward+backward and Viterbi medians (CUDA events, one
warm-up, then >= 3 timed runs), peak memory of forward+backward beyond the inputs,
positions per second (B*T / forward+backward time), the torch backend's forward+backward
time where a short probe predicts it finishes within a minute, and the fraction of the
chip's exp and fp32 FMA throughput the kernels reach. Both ceilings are measured here
by two small Triton kernels; the work is counted per sequence step:
    forward:  exps K*C + C*C, other fp32 ops ~5*K*C + 3*C*C
    backward: a forward recompute plus the reversed chain with its gradients,
              exps 2*K*C + 3*C*C + 3*C, other ops ~8*K*C + 6*C*C
(exps counted as MUFU ex2, other ops as one FMA-pipe instruction each).
Prints a markdown table; with --rows appends the rows (device, date, commit) to FILE.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import torch
import triton
import triton.language as tl

from semiseg.crf import kernels as kn
from semiseg.crf import reference
from semiseg.crf.inputs import check_inputs

CONFIGS = [(32, 300, 30, 39), (64, 1000, 100, 24), (8, 20000, 100, 24), (8, 20000, 1000, 6),
           (1, 1_000_000, 1000, 24)]


@triton.jit
def _exp_ceiling(x, out, N: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = a + 0.5
    c = a - 0.5
    d = a * 0.25
    for _ in range(N):
        a = tl.exp(a) - 1.0
        b = tl.exp(b) - 1.0
        c = tl.exp(c) - 1.0
        d = tl.exp(d) - 1.0
    tl.store(out + offs, a + b + c + d)


@triton.jit
def _fma_ceiling(x, out, N: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x + offs)
    b = a + 0.5
    c = a - 0.5
    d = a * 0.25
    for _ in range(N):
        a = a * 0.999 + 0.001
        b = b * 0.999 + 0.001
        c = c * 0.999 + 0.001
        d = d * 0.999 + 0.001
    tl.store(out + offs, a + b + c + d)


def _events(fn, reps, warmup=True):
    """Median seconds of fn over reps runs, CUDA events (after one untimed run)."""
    if warmup:
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return statistics.median(times)


def ceilings():
    """(exp/s, fma/s) of the whole chip, measured."""
    BLOCK, N = 1024, 4096
    n = torch.cuda.get_device_properties(0).multi_processor_count * 16 * BLOCK
    x = torch.rand(n, device="cuda") * 0.1
    out = torch.empty_like(x)
    grid = (n // BLOCK,)
    t_exp = _events(lambda: _exp_ceiling[grid](x, out, N=N, BLOCK=BLOCK, num_warps=8), 3)
    t_fma = _events(lambda: _fma_ceiling[grid](x, out, N=N, BLOCK=BLOCK, num_warps=8), 3)
    return 4 * N * n / t_exp, 4 * N * n / t_fma


def make(B, T, K, C, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    return check_inputs(3 * r(B, T, C), r(C, C), r(K, C), None, start=r(C), end=r(C))


def work(B, T, K, C):
    f_exp, f_ops = K * C + C * C, 5 * K * C + 3 * C * C
    b_exp, b_ops = f_exp + 2 * K * C + 3 * C * C + 3 * C, f_ops + 8 * K * C + 6 * C * C
    return B * T * f_exp, B * T * f_ops, B * T * (f_exp + b_exp), B * T * (f_ops + b_ops)


def torch_time(x, limit=60.0):
    """Forward+backward of the torch backend, if a probe predicts <= limit seconds."""
    probe_T = min(x.T, 500)
    xp = x.replace(scores=x.scores[:, :probe_T].contiguous(),
                   lengths=torch.full_like(x.lengths, probe_T))

    def run(y):
        lz, saved = reference.forward(y)
        reference.backward(y, saved, torch.ones_like(lz))

    t0 = time.perf_counter()
    run(xp)
    torch.cuda.synchronize()
    predicted = (time.perf_counter() - t0) * x.T / probe_T
    if predicted > limit:
        return None, predicted
    return _events(lambda: run(x), 1), predicted


def bench(B, T, K, C, reps, with_torch, ceil):
    x = make(B, T, K, C)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()

    def fwd():
        return kn.forward(x)

    def fwd_bwd():
        lz, saved = kn.forward(x)
        return kn.backward(x, saved, torch.ones_like(lz))

    def vit():
        return kn.viterbi(x)

    t_f = _events(fwd, reps)
    torch.cuda.reset_peak_memory_stats()
    t_fb = _events(fwd_bwd, reps)
    peak = torch.cuda.max_memory_allocated() - base
    t_v = _events(vit, reps)
    fe, fo, fbe, fbo = work(B, T, K, C)
    row = {"B": B, "T": T, "K": K, "C": C, "fwd_ms": t_f * 1e3, "fwdbwd_ms": t_fb * 1e3, "vit_ms": t_v * 1e3,
               "peak_mb": peak / 2**20, "pos_s": B * T / t_fb,
               "us_step_fwd": t_f / T * 1e6,
               "exp_frac_fwd": fe / t_f / ceil[0], "fma_frac_fwd": fo / t_f / ceil[1],
               "exp_frac_fb": fbe / t_fb / ceil[0], "fma_frac_fb": fbo / t_fb / ceil[1]}
    row["torch_ms"] = None
    if with_torch:
        t, pred = torch_time(x)
        row["torch_ms"] = t * 1e3 if t is not None else None
        row["torch_pred_s"] = pred
    return row


HEADER = ("| date | commit | device | B, T, K, C | warps | fwd ms | fwd+bwd ms | Viterbi ms | "
          "us/step fwd | peak MB (fwd+bwd) | positions/s | torch fwd+bwd | "
          "exp frac fwd / fwd+bwd | FMA frac fwd / fwd+bwd |")


def fmt(r, device, commit, date):
    if r["torch_ms"] is not None:
        tt = f"{r['torch_ms']:.0f} ms"
    elif "torch_pred_s" in r:
        tt = f"not run (~{r['torch_pred_s']:.0f} s predicted)"
    else:
        tt = "not run"
    return (f"| {date} | {commit} | {device} | {r['B']}, {r['T']}, {r['K']}, {r['C']} | "
            f"{r['warps']} | "
            f"{r['fwd_ms']:.2f} | {r['fwdbwd_ms']:.2f} | {r['vit_ms']:.2f} | "
            f"{r['us_step_fwd']:.2f} | {r['peak_mb']:.0f} | {r['pos_s']:.3g} | {tt} | "
            f"{r['exp_frac_fwd']:.3f} / {r['exp_frac_fb']:.3f} | "
            f"{r['fma_frac_fwd']:.3f} / {r['fma_frac_fb']:.3f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="all", help="all, or B,T,K,C[;B,T,K,C...]")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--torch", action="store_true", help="also time the torch backend")
    ap.add_argument("--rows", default=None, help="append markdown rows to this file")
    ap.add_argument("--leave-out", action="store_true",
                    help="also time forward variants that leave one stage out")
    ap.add_argument("--warps", default=None,
                    help="comma-separated warps per program to compare (default: by shape)")
    args = ap.parse_args()
    configs = CONFIGS if args.configs == "all" else [
        tuple(int(v) for v in c.split(",")) for c in args.configs.split(";")]
    device = torch.cuda.get_device_name(0)
    commit = os.environ.get("COMMIT", "unknown")
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    ceil = ceilings()
    print(f"# {device}: exp ceiling {ceil[0]:.3g}/s, fp32 FMA ceiling {ceil[1]:.3g}/s", flush=True)
    lines = []
    warps = [None] if args.warps is None else [int(w) for w in args.warps.split(",")]
    for cfg in configs:
        reps = args.reps if cfg[0] * cfg[1] < 1_000_000 else 3
        for i, w in enumerate(warps):
            kn.WARPS = w
            KP, CP = kn._shape(make(1, cfg[1], cfg[2], cfg[3]))
            r = bench(*cfg, reps=reps, with_torch=args.torch and i == 0, ceil=ceil)
            r["warps"] = kn._warps(KP, CP)
            lines.append(fmt(r, device, commit, date))
            print(lines[-1], flush=True)
    kn.WARPS = None
    if args.leave_out:
        # where a forward step's time goes: time variants that leave one stage out
        print("\n| B, T, K, C | us/step full | no gamma | no ring LSE | no db load | no shift |")
        print("|---|---|---|---|---|---|")
        for cfg in configs:
            x = make(*cfg)
            us = []
            for lo in range(5):
                kn.LEAVE_OUT = lo
                us.append(_events(lambda x=x: kn.forward(x), 3) / cfg[1] * 1e6)
            kn.LEAVE_OUT = 0
            print(f"| {', '.join(map(str, cfg))} | " + " | ".join(f"{u:.2f}" for u in us) + " |")
    print()
    print(HEADER)
    print("|" + "---|" * HEADER.count(" |"))
    print("\n".join(lines))
    if args.rows:
        with open(args.rows, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
