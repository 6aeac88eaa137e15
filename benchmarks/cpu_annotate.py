"""`semiseg annotate` on the CPU as a user runs it, whole process (start-up included):
the shipped yeast model on yeast chrII (issue 42's CPU row), one code tree or several
side by side (runs alternate A B A B, so a drift of the machine hits each alike), and
whether their outputs are the same files.

    python benchmarks/cpu_annotate.py [--tree DIR ...] [--runs 3] [--threads 2]
        [--model yeast] [--fasta data/yeast/chrII.fa] [--regions BED] [--warmup 1]

--tree: a checkout to time (default: this one), e.g. `git worktree add /tmp/old COMMIT`
for a before/after pair; each runs from its own folder with a numba cache of its own.
One warm-up call per tree first (numba compiles on a cold cache). Prints a table of the
median wall seconds and bp/s per tree, and each process's median user and system CPU
seconds and minor page faults, with device, date and commits.
"""

from __future__ import annotations

import argparse
import filecmp
import glob
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lib import annotation_rows, commit, header  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(tree: str, args, prefix: str, cache: str) -> tuple[float, float, float, int]:
    """(wall s, user s, system s, minor page faults) of one annotate process."""
    cmd = [sys.executable, "-m", "semiseg.cli", "annotate", "--model", args.model,
           "--fasta", os.path.abspath(args.fasta), "--out", prefix, "--threads",
           str(args.threads), "--quiet"]
    if args.regions:
        cmd += ["--regions", os.path.abspath(args.regions)]
    env = dict(os.environ, SEMISEG_CACHE_DIR=cache, PYTHONPATH=tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
            after.ru_minflt - before.ru_minflt)


def _same(a: str, b: str) -> str:
    """Whether two runs' outputs are the same files: text files without their provenance
    lines (# and track lines, which name the command, prefix and date), the run's .json
    (its provenance) left out."""
    diff = []
    for fa in sorted(glob.glob(a + ".*")):
        fb = b + fa[len(a):]
        if fa.endswith(".json"):
            continue
        if fa.endswith((".gff3", ".bed")):
            ok = os.path.exists(fb) and annotation_rows(fa) == annotation_rows(fb)
        else:
            ok = os.path.exists(fb) and filecmp.cmp(fa, fb, shallow=False)
        if not ok:
            diff.append(os.path.basename(fa))
    return "same files" if not diff else "differ: " + ", ".join(diff)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", nargs="+", default=[ROOT])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default="yeast")
    ap.add_argument("--fasta", default=os.path.join(ROOT, "data/yeast/chrII.fa"))
    ap.add_argument("--regions", help="BED of regions to annotate (default: everything)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed calls per tree first")
    args = ap.parse_args()
    if args.regions:
        size = sum(int(f[2]) - int(f[1]) for f in (ln.split() for ln in open(args.regions))
                   if len(f) >= 3 and not f[0].startswith(("#", "track")))
    else:
        size = sum(len(ln.strip()) for ln in open(args.fasta) if not ln.startswith(">"))
    trees = [os.path.abspath(t) for t in args.tree]
    work = tempfile.mkdtemp(prefix="cpu_annotate_")
    caches = [os.path.join(work, f"cache{i}") for i in range(len(trees))]
    runs: list[list[tuple]] = [[] for _ in trees]
    for _ in range(args.warmup):  # warm-up: compile into each tree's own cache
        for i, tree in enumerate(trees):
            _run(tree, args, os.path.join(work, f"t{i}"), caches[i])
    for _ in range(args.runs):
        for i, tree in enumerate(trees):
            runs[i].append(_run(tree, args, os.path.join(work, f"t{i}"), caches[i]))
    print(header("benchmarks/cpu_annotate.py", "cpu", "python " + " ".join(sys.argv)))
    regions = f" --regions {os.path.relpath(args.regions, ROOT)}" if args.regions else ""
    print(f"`semiseg annotate --model {args.model} --fasta {os.path.relpath(args.fasta, ROOT)}"
          f"{regions} --threads {args.threads}`, {size:,} bp, {args.runs} runs per tree after "
          f"{args.warmup} warm-up(s), alternating; load average {os.getloadavg()[0]:.1f} "
          "at the end\n")
    # user and system CPU time and minor page faults (the kernel faulting fresh memory
    # in: on the 2-core CPU about a third of a run's CPU time, 2026-12-07) tell a change
    # in the work from the machine's noise in the wall clock
    print("| code | runs s | median s | bp/s | median user / system s | median minor faults "
          "| outputs against the first tree |")
    print("|---|---|---|---|---|---|---|")
    for i, tree in enumerate(trees):
        wall, user, system, faults = ([r[k] for r in runs[i]] for k in range(4))
        med = statistics.median(wall)
        same = "-" if i == 0 else _same(os.path.join(work, "t0"), os.path.join(work, f"t{i}"))
        print(f"| {commit(tree)} | {', '.join(f'{t:.1f}' for t in wall)} | {med:.1f} | "
              f"{size / med:,.0f} | {statistics.median(user):.1f} / "
              f"{statistics.median(system):.1f} | {statistics.median(faults):,.0f} | {same} |")


if __name__ == "__main__":
    main()
