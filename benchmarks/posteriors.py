"""CPU benchmark of semiseg/crf/posteriors.py against one forward and forward+backward.

    python benchmarks/posteriors.py            # table, appended to benchmarks/RESULTS.md
    python benchmarks/posteriors.py --quick    # smaller shape, printed only

Shape (default): B=2, T=2,000, K=32, C=8, float64 scores ~ N(0, 3^2), torch backend, static
and periodic (P=3) transitions. Rows: log Z (one forward), marginals (forward+backward),
segment posteriors of every Viterbi segment, run posteriors of every Viterbi run (the
BED score), whole-distribution entropy, 100 posterior samples per sequence. Median of
--runs after a warm-up; the ratio column divides by the forward (and, for the posteriors,
by forward+backward). Peak RSS of the process is reported once. The issue's goals are for
an H100 at B=8, T=20,000, K=100, C=24; this CPU table cannot show them.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch

from semiseg.crf import (
    entropy,
    log_partition,
    marginals,
    run_posteriors,
    sample,
    segment_posteriors,
    viterbi,
)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return (f"{line.split(':', 1)[1].strip()} ({len(os.sched_getaffinity(0))}"
                            f" cores visible, {torch.get_num_threads()} torch threads)")
    except OSError:
        pass
    return "unknown CPU"


def median_time(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(B, T, K, C, form, runs):
    g = torch.Generator().manual_seed(0)
    scores = 3 * torch.randn(B, T, C, generator=g, dtype=torch.float64)
    tr = torch.randn(*((3, C, C) if form == "periodic" else (C, C)), generator=g,
                     dtype=torch.float64)
    db = torch.randn(K, C, generator=g, dtype=torch.float64)
    kw = {"backend": "torch"}
    best = viterbi(scores, tr, db, **kw)
    segs = [(b, s, d, c) for b, row in enumerate(best.segments) for s, d, c in row]
    spans = []
    for b in range(B):
        lab = best.labels[b].tolist()
        starts = [0] + [t for t in range(1, T) if lab[t] != lab[t - 1]]
        spans += [(b, s, e) for s, e in zip(starts, starts[1:] + [T])]
    rows = [
        ("log Z (forward)", lambda: log_partition(scores, tr, db, **kw)),
        ("marginals (fwd+bwd)", lambda: marginals(scores, tr, db, **kw)),
        (f"segment posteriors ({len(segs)} Viterbi segments)",
         lambda: segment_posteriors(scores, tr, db, segments=segs, **kw)),
        (f"run posteriors ({len(spans)} Viterbi runs)",
         lambda: run_posteriors(scores, tr, db, labels=best.labels, spans=spans, **kw)),
        ("entropy (per sequence)", lambda: entropy(scores, tr, db, **kw)),
        ("100 samples per sequence", lambda: sample(scores, tr, db, num_samples=100, seed=0)),
    ]
    out = []
    for name, fn in rows:
        out.append((name, median_time(fn, runs)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    B, T, K, C = (2, 500, 16, 4) if a.quick else (2, 2000, 32, 8)
    lines = []
    for form in ("static", "periodic"):
        res = bench(B, T, K, C, form, a.runs)
        fwd, fb = res[0][1], res[1][1]
        lines.append(f"\n{form} transitions, B={B}, T={T:,}, K={K}, C={C}, float64, torch "
                     f"backend, median of {a.runs} after a warm-up\n")
        lines.append("| operation | seconds | / forward | / fwd+bwd |")
        lines.append("|---|---|---|---|")
        for name, t in res:
            lines.append(f"| {name} | {t:.3f} | {t / fwd:.2f} | {t / fb:.2f} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    head = (f"\n## Segment posteriors, entropy, samples (benchmarks/posteriors.py)\n\n"
            f"Date 2026-11-23 (run {datetime.date.today()}), commit {commit}, device "
            f"{cpu_model()}, peak RSS {peak:.0f} MiB.\n")
    text = head + "\n".join(lines) + "\n"
    print(text)
    if not a.quick:
        with open(os.path.join(ROOT, "benchmarks", "RESULTS.md"), "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
