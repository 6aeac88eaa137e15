"""The numba backend's backward as the posterior pass asks for it (only the per-position
gradients: `wanted`, dispatch.py) against the full backward (every gradient), side by side
in one process, at the 1-bp gene model's shape on this machine's cores.

    python benchmarks/cpu_posteriors.py [--B 2] [--T 100000] [--K 256] [--C 37] [--runs 3]
        [--record] [--viterbi [--label before]]

--viterbi instead times cpu.viterbi at (B, T, 117, C), P = 3 (the gene model's posterior
decode runs K = 117: FrameLayout.chain_duration) with a structured transition: per
residue the diagonal and 2 more random predecessors per label finite (the gene model
allows 61 of 37 x 37), the rest -inf; prints the median and a sha1 of the labels and
scores (to compare code versions run one after the other).

Inputs: float32 scores ~ N(0, 3^2), a periodic (3, C, C) transition, duration bias,
start and end ~ N(0, 1) (dense: every transition finite). One forward (kept for the
backward) per run, then the backward timed alone; median of --runs after a warm-up.
Also checks that the per-position gradients of the two are bitwise equal.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch

from semiseg.crf import cpu
from semiseg.crf.inputs import check_inputs

PER_POSITION = ("scores", "proj_start", "proj_end")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--T", type=int, default=100_000)
    ap.add_argument("--K", type=int, default=256)
    ap.add_argument("--C", type=int, default=37)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--viterbi", action="store_true")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    if a.viterbi:
        return viterbi_row(a)
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    x = check_inputs(3 * r(a.B, a.T, a.C), r(3, a.C, a.C), r(a.K, a.C), None,
                     start=r(a.C), end=r(a.C))
    w = torch.ones(a.B, dtype=torch.float64)
    saved = cpu.forward(x, keep=True)[1]
    out = {}
    times = {}
    for name, wanted in (("full backward", None), ("posterior pass (per-position only)",
                                                   PER_POSITION)):
        out[name] = cpu.backward(x, saved, w, wanted=wanted)  # warm-up, compiles
        ts = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            cpu.backward(x, saved, w, wanted=wanted)
            ts.append(time.perf_counter() - t0)
        times[name] = statistics.median(ts)
    same = all(torch.equal(out["full backward"][n],
                           out["posterior pass (per-position only)"][n]) for n in PER_POSITION)
    t0 = time.perf_counter()
    cpu.forward(x, keep=True)
    t_fwd = time.perf_counter() - t0
    full = times["full backward"]
    rows = ["| backward | s (median) | x full |", "|---|---|---|"]
    rows += [f"| {n} | {t:.2f} | {full / t:.2f}x |" for n, t in times.items()]
    note = (f"forward (kept for the backward), once: {t_fwd:.2f} s; per-position "
            f"gradients bitwise equal: {same}")
    rows += ["", note]
    print("\n".join(rows))
    if a.record:
        from results import append

        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        append(f"The numba posterior pass without the parameter sums - {stamp}, "
               f"{os.cpu_count()}-core CPU",
               "`python " + " ".join(sys.argv) + f"` (B = {a.B}, T = {a.T:,}, K = {a.K}, "
               f"C = {a.C}, P = 3)", rows)


def viterbi_row(a):
    import hashlib

    g = torch.Generator().manual_seed(0)
    K, C = 117, a.C
    tr = torch.full((3, C, C), float("-inf"))
    for r in range(3):
        for c in range(C):
            tr[r, c, c] = torch.randn((), generator=g)
            for src in torch.randperm(C, generator=g)[:2].tolist():
                tr[r, src, c] = torch.randn((), generator=g)
    x = check_inputs(3 * torch.randn(a.B, a.T, C, generator=g), tr,
                     torch.randn(K, C, generator=g), None)
    out = cpu.viterbi(x)  # warm-up, compiles
    ts = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        cpu.viterbi(x)
        ts.append(time.perf_counter() - t0)
    h = hashlib.sha1(out[0].numpy().tobytes() + out[1].numpy().tobytes()).hexdigest()[:12]
    finite = int(torch.isfinite(tr).sum())
    print(f"| {a.label} | {a.B}, {a.T}, {K}, {C}, P = 3, {finite} of {3 * C * C} transitions "
          f"finite | {statistics.median(ts):.3f} | {h} |")


if __name__ == "__main__":
    main()
