"""What N runs cost `semiseg annotate` (issue 42, "gaps cost nothing"): time and peak
memory of one annotate call, with the shipped yeast model on the CPU, for

* `n1m`:       one sequence of 1 Mb of N,
* `n1m_yeast`: 1 Mb of N followed by 50 kb of yeast chrI (one sequence),
* `yeast50k`:  the same 50 kb of chrI alone (what the N costs on top of it),
* `tiny`:      1 kb of chrI (the process's floor: python, torch, the model),
* `nKm`:       K Mb of N, e.g. n20m (not in the default cases: how the writer's part
               scales).

Each case runs in its own process; it prints the annotate call's wall time (model
loaded and first call warmed on 1 kb before the clock starts; --cold: no warm-up, the
case is the process's only work), the whole process's wall
time, and the process's peak resident memory (resource.getrusage ru_maxrss), with the
date, commit, machine and load average.

    python benchmarks/gaps.py [--cases n1m,n1m_yeast,yeast50k,tiny] [--threads 1]
        [--cold] [--record TITLE]

With --record the table is appended to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = os.path.join(ROOT, "semiseg", "models", "yeast_cds_frames.pt")
CHRI = os.path.join(ROOT, "data", "yeast", "chrI.fa")
CASES = ("n1m", "n1m_yeast", "yeast50k", "tiny")


def _yeast(n: int, at: int = 50_000) -> str:
    with open(CHRI) as fh:
        seq = "".join(line.strip() for line in fh if not line.startswith(">"))
    return seq[at:at + n]


def _sequence(case: str) -> str:
    if case == "n1m":
        return "N" * 1_000_000
    if case.startswith("n") and case.endswith("m") and case[1:-1].isdigit():
        return "N" * (int(case[1:-1]) * 1_000_000)  # e.g. n20m: 20 Mb of N
    if case == "n1m_yeast":
        return "N" * 1_000_000 + _yeast(50_000)
    if case == "yeast50k":
        return _yeast(50_000)
    if case == "tiny":
        return _yeast(1_000)
    raise SystemExit(f"unknown case {case!r} (expected one of {', '.join(CASES)}, nKm)")


def _write_fasta(path: str, seq: str) -> None:
    with open(path, "w") as fh:
        fh.write(">s\n")
        fh.writelines(seq[i:i + 80] + "\n" for i in range(0, len(seq), 80))


def child(case: str, work: str, threads: int, cold: bool) -> None:
    """One case in this process: warm up on 1 kb (unless `cold`), then time the case's
    annotate call."""
    t_proc = time.perf_counter()
    from semiseg import ui
    from semiseg.annotate import annotate

    ui.set_quiet(True)
    if not cold:
        warm = os.path.join(work, "warm.fa")
        _write_fasta(warm, _yeast(1_000))
        annotate(MODEL, warm, os.path.join(work, "warm"), device="cpu", threads=threads)
    fa = os.path.join(work, f"{case}.fa")
    _write_fasta(fa, _sequence(case))
    t0 = time.perf_counter()
    annotate(MODEL, fa, os.path.join(work, case), device="cpu", threads=threads)
    secs = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    with open(os.path.join(work, f"{case}.bed")) as fh:
        gaps = sum(1 for line in fh if line.split("\t")[3] == "gap")
    print(json.dumps({"case": case, "annotate_s": secs,
                      "process_s": time.perf_counter() - t_proc, "peak_mb": peak_mb,
                      "gap_rows": gaps}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cold", action="store_true",
                    help="no warm-up call: the case is the process's only work (its peak "
                    "memory then has no decoder in it when nothing is decoded)")
    ap.add_argument("--record", help="append the table to RESULTS.md under this title")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.work, a.threads, a.cold)
        return
    from results import commit

    head = (f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit()}, "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start, "
            f"--threads {a.threads}" + (", cold (no warm-up call)" if a.cold else ""))
    print(head)
    lines = ["| case | annotate call s | process s | peak RSS MB | gap rows |",
             "|---|---|---|---|---|"]
    for case in a.cases.split(","):
        with tempfile.TemporaryDirectory(prefix="gaps_bench_") as work:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", case,
                                "--work", work, "--threads", str(a.threads)]
                               + (["--cold"] if a.cold else []),
                               capture_output=True, text=True, check=False)
            if r.returncode:
                print(r.stdout + r.stderr, file=sys.stderr)
                raise SystemExit(f"case {case} failed (exit {r.returncode})")
            d = json.loads(r.stdout.strip().splitlines()[-1])
        lines.append(f"| {case} | {d['annotate_s']:.2f} | {d['process_s']:.1f} | "
                     f"{d['peak_mb']:.0f} | {d['gap_rows']} |")
        print(lines[-1], flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load}")
    if a.record:
        from results import append

        append(a.record, f"`python benchmarks/gaps.py --cases {a.cases} --threads {a.threads}"
               + (" --cold`" if a.cold else "`"),
               [head + f"; load average at the end {load}", ""] + lines)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
