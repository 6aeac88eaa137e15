"""CPU benchmark of the exact torch backend (semiseg/crf/reference.py).

    python benchmarks/reference.py           # timings + memory at two T; appends to RESULTS.md
    python benchmarks/reference.py --quick   # timings only, printed, nothing appended
    python benchmarks/reference.py --variants  # also fwd+bwd with each optimisation undone

Timings: B=4, T=10,000, K=64, C=8, float32 scores ~ N(0, 3^2), static transitions;
forward+backward (log Z and every gradient) and Viterbi, median of --runs after a
warm-up. Memory: forward+backward at T=10,000 and T=100,000 with K=256, C=8, each in a
fresh process: peak RSS, and the growth of peak RSS over the RSS just before the call
(inputs already allocated). That growth must stay far below the O(T K C) of a
non-streaming implementation; what grows with T is the O(T C) inputs' gradients.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import contextlib  # noqa: E402

import torch  # noqa: E402

from semiseg.crf import SemiCRF, log_partition, reference, viterbi  # noqa: E402


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
            else:
                name = "unknown CPU"
    except OSError:
        name = "unknown CPU"
    return f"{name} ({len(os.sched_getaffinity(0))} cores visible, " \
           f"{torch.get_num_threads()} torch threads)"


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
        mine = ["semiseg/crf/reference.py", "semiseg/crf/inputs.py", "semiseg/crf/dispatch.py"]
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *mine],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def inputs(B, T, K, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = (torch.randn(B, T, C, generator=g) * 3).requires_grad_()
    tr = torch.randn(C, C, generator=g).requires_grad_()
    db = torch.randn(K, C, generator=g).requires_grad_()
    return scores, tr, db


def fwd_bwd(scores, tr, db):
    for x in (scores, tr, db):
        x.grad = None
    log_partition(scores, tr, db, backend="torch").sum().backward()


def nll_fwd_bwd(head, scores, labels):
    scores.grad = None
    head.zero_grad()
    head.nll(scores, labels, backend="torch").sum().backward()


def vit(scores, tr, db):
    viterbi(scores.detach(), tr.detach(), db.detach(), backend="torch")


def timed(fn, args, runs):
    fn(*args)  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def memory_child(B, T, K, C):
    """Run in a fresh process: one forward+backward, report RSS before and peak."""
    args = inputs(B, T, K, C)
    before = rss_mb()
    t0 = time.perf_counter()
    fwd_bwd(*args)
    secs = time.perf_counter() - t0
    print(json.dumps(dict(before=before, peak=peak_rss_mb(), secs=secs)))


def memory(B, T, K, C):
    out = subprocess.run([sys.executable, __file__, "--memory-child", f"{B},{T},{K},{C}"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="timings only; append nothing")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--variants", action="store_true",
                    help="also time forward+backward without each optimisation")
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.memory_child:
        memory_child(*map(int, a.memory_child.split(",")))
        return

    rows = []
    B, T, K, C = 4, 10_000, 64, 8
    args = inputs(B, T, K, C)
    med, all_ = timed(fwd_bwd, args, a.runs)
    rows.append(("forward+backward", f"B={B} T={T:,} K={K} C={C}", med, all_, peak_rss_mb()))
    print(f"fwd+bwd  median {med:.3f} s  runs {[round(t, 3) for t in all_]}", flush=True)
    head = SemiCRF(C, K)
    labels = torch.randint(0, C, (B, T // 50), generator=torch.Generator().manual_seed(1))
    labels = labels.repeat_interleave(50, dim=1)
    labels[:, ::7] = -1  # some unknown positions
    med, all_ = timed(nll_fwd_bwd, (head, args[0], labels), a.runs)
    rows.append(("SemiCRF.nll forward+backward (runs of 50, every 7th label unknown)",
                 f"B={B} T={T:,} K={K} C={C}", med, all_, peak_rss_mb()))
    print(f"nll      median {med:.3f} s  runs {[round(t, 3) for t in all_]}", flush=True)
    med, all_ = timed(vit, args, a.runs)
    rows.append(("viterbi", f"B={B} T={T:,} K={K} C={C}", med, all_, peak_rss_mb()))
    print(f"viterbi  median {med:.3f} s  runs {[round(t, 3) for t in all_]}", flush=True)

    if a.variants:
        # the same fwd+bwd with one optimisation undone at a time, in this run
        variants = [
            ("forward+backward, chunks recomputed one at a time", "RECOMPUTE_RING", 1),
            ("forward+backward, torch's default threads in the loops", "_one_thread",
             lambda device: contextlib.nullcontext()),
        ]
        for what, name, value in variants:
            old = getattr(reference, name)
            setattr(reference, name, value)
            try:
                med, all_ = timed(fwd_bwd, args, a.runs)
            finally:
                setattr(reference, name, old)
            rows.append((what, f"B={B} T={T:,} K={K} C={C}", med, all_, peak_rss_mb()))
            print(f"{what}: median {med:.3f} s  runs {[round(t, 3) for t in all_]}", flush=True)

    mem = []
    if not a.quick:
        for t in (10_000, 100_000):
            r = memory(4, t, 256, 8)
            mem.append((t, r))
            print(f"memory T={t:,} K=256: peak RSS {r['peak']:.0f} MB, growth "
                  f"{r['peak'] - r['before']:.0f} MB, fwd+bwd {r['secs']:.1f} s", flush=True)

    table = ["| config | what | median s | runs s | peak RSS MB |", "|---|---|---|---|---|"]
    for what, cfg, med, all_, peak in rows:
        table.append(f"| {cfg} | {what} | {med:.3f} | "
                     f"{', '.join(f'{t:.3f}' for t in all_)} | {peak:.0f} |")
    for t, r in mem:
        grads = 3 * (4 * t * 8) * 4 / 2**20  # B*T*C float32: scores, proj_start, proj_end
        table.append(f"| B=4 T={t:,} K=256 C=8 | forward+backward, memory (fresh process, 1 run) "
                     f"| {r['secs']:.3f} | - | {r['peak']:.0f} (growth during the call "
                     f"{r['peak'] - r['before']:.0f}, of which {grads:.0f} the O(T C) float32 "
                     f"gradients of scores, proj_start, proj_end) |")
    if mem:
        big = 4 * 100_000 * 256 * 8 * 8 / 2**20
        note = (f"An O(T K C) float64 buffer at T=100,000, K=256 would be {big:,.0f} MB. "
                "Memory growth = the O(T C) gradients + one chunk of per-step float64 values "
                "(chunks of ~sqrt(T K) steps, so this part grows like sqrt(T)) + checkpoints.")
    else:
        note = ""
    print("\n".join(table))
    if a.quick:
        return
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"\n## torch backend, CPU (benchmarks/reference.py) - {now}, commit {commit()}\n"
            f"CPU: {cpu_model()}; float32 scores ~ N(0, 3^2), static transitions, "
            f"median of {a.runs} runs after a warm-up. {note}\n\n" + "\n".join(table) + "\n")
    with open(os.path.join(ROOT, "benchmarks", "RESULTS.md"), "a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
