"""The compiled CPU backend (numba, semiseg/crf/numba/) against the torch backend, side by
side in one run.

    python benchmarks/cpu_backend.py [--record]  # full table; --record: to RESULTS-log.md
    python benchmarks/cpu_backend.py --quick     # fewer runs

Shape B=4, T=10,000, K=64, C=8, float32 scores ~ N(0, 3^2): fwd+bwd (log Z and every
gradient) and Viterbi for static, periodic P=3 and fully duration-dependent (K, C, C)
transitions (the torch backend's duration-dependent runs at a smaller T, noted in the
table, with the numba backend at that T beside it). Median of several runs after a
warm-up. Compile cost: the first fwd+bwd+Viterbi of every form in a fresh process with an
empty numba cache, then the same in a second process that reads the cache. Plus a
gene-model-like shape: B=1, T=230,000, K=256, C=25, periodic P=3, fwd+bwd.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import lib
import torch

from semiseg.crf import log_partition, viterbi


def inputs(B, T, K, C, form, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, T, C, generator=g) * 3
    shape = {"static": (C, C), "periodic": (3, C, C), "dur-dependent": (K, C, C)}[form]
    return scores, torch.randn(*shape, generator=g), torch.randn(K, C, generator=g)


def fwd_bwd(backend, scores, tr, db):
    xs = [v.clone().requires_grad_() for v in (scores, tr, db)]
    log_partition(*xs, backend=backend).sum().backward()


def vit(backend, scores, tr, db):
    viterbi(scores, tr, db, backend=backend)


def median_time(fn, runs):
    fn()  # warm-up (and compilation)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


COMPILE_SNIPPET = """
import time, torch
t = time.perf_counter()
from semiseg.crf import log_partition, viterbi
for tr in (torch.randn(3, 3), torch.randn(2, 3, 3), torch.randn(4, 3, 3)):
    s = torch.randn(2, 20, 3)
    xs = [v.clone().requires_grad_() for v in (s, tr, torch.randn(4, 3))]
    log_partition(*xs, backend="numba").sum().backward()
    viterbi(s, tr, xs[2].detach(), backend="numba")
print(time.perf_counter() - t)
"""


def compile_times():
    """(first process with an empty cache, second process reading it), seconds, wall."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=ROOT)
        out = []
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", COMPILE_SNIPPET], env=env, cwd=ROOT,
                               capture_output=True, text=True, check=True)
            out.append(float(r.stdout.strip().splitlines()[-1]))
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    ap.add_argument("--record", action="store_true", help="append to RESULTS-log.md")
    args = ap.parse_args()
    head = lib.header("benchmarks/cpu_backend.py", "cpu", "python " + " ".join(sys.argv))
    load = os.getloadavg()[0]
    runs_np, runs_t = (3, 1) if args.quick else (7, 3)
    B, T, K, C = 4, 10_000, 64, 8
    T_dd = 1_000  # the torch backend's duration-dependent pass is ~1 ms per step
    rows = []
    for form in ("static", "periodic", "dur-dependent"):
        for what, fn in (("fwd+bwd", fwd_bwd), ("Viterbi", vit)):
            x = inputs(B, T, K, C, form)
            t_np = median_time(lambda fn=fn, x=x: fn("numba", *x), runs_np)
            if form == "dur-dependent":
                xs = inputs(B, T_dd, K, C, form)
                t_t = median_time(lambda fn=fn, xs=xs: fn("torch", *xs), runs_t)
                t_np_small = median_time(lambda fn=fn, xs=xs: fn("numba", *xs), runs_np)
                rows.append((form, what, T_dd, t_t, t_np_small))
                rows.append((form, what, T, None, t_np))
            else:
                t_t = median_time(lambda fn=fn, x=x: fn("torch", *x), runs_t)
                rows.append((form, what, T, t_t, t_np))
            print(rows[-1], flush=True)
    first, cached = compile_times()
    print("compile", first, cached, flush=True)
    gB, gT, gK, gC = 1, 230_000, 256, 25
    x = inputs(gB, gT, gK, gC, "periodic")
    t_gene = median_time(lambda: fwd_bwd("numba", *x), 1 if args.quick else 2)
    print("gene", t_gene, flush=True)

    lines = [
        ("float32 scores ~ N(0, 3^2), K=64, C=8, B=4; median of "
         f"{runs_np} (numba) / {runs_t} (torch) runs after a warm-up; wall clock; both "
         "backends ran in the same process, one after the other (other load on the machine "
         f"is not controlled: load average {load:.1f} at the start, "
         f"{os.getloadavg()[0]:.1f} at the end).\n"),
        "| transitions | pass | T | torch backend | numba backend | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for form, what, t, t_t, t_np in rows:
        tt = f"{t_t * 1e3:.0f} ms" if t_t is not None else "-"
        sp = f"{t_t / t_np:.0f}x" if t_t is not None else "-"
        lines.append(f"| {form} | {what} | {t:,} | {tt} | {t_np * 1e3:.1f} ms | {sp} |")
    st = {w: t for f, w, _, _, t in rows if f == "static"}
    pe = {w: t for f, w, _, _, t in rows if f == "periodic"}
    lines += [
        "",
        (f"- periodic P=3 / static (numba): fwd+bwd {pe['fwd+bwd'] / st['fwd+bwd']:.2f}x, "
         f"Viterbi {pe['Viterbi'] / st['Viterbi']:.2f}x"),
        ("- compile: first fwd+bwd+Viterbi of all three forms in a fresh process with an "
         f"empty numba cache {first:.1f} s (import included); a second process reading the "
         f"cache {cached:.1f} s"),
        ("- gene-model-like shape B=1, T=230,000, K=256, C=25, periodic P=3, fwd+bwd "
         f"(one sequence: one core): {t_gene:.2f} s"),
        "",
    ]
    text = "\n".join(lines)
    print(head + "\n\n" + text)
    if args.record:
        lib.append("Compiled CPU backend (numba) vs torch backend (benchmarks/cpu_backend.py)",
                   head, [text])
    print(json.dumps({"rows": rows, "compile": [first, cached], "gene": t_gene}))


if __name__ == "__main__":
    main()
