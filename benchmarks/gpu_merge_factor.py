"""The certified gene decode's merge rounds on a GPU: GPU_MERGE_FACTOR against 1 (issue 42).

A posterior seam that does not certify at the first width merges its two windows; the
merge round's windows are few and long, and a latency-bound call takes its longest
chain's time whatever the number of windows in it. Calls of the merge round took the
first width's steps a call (GPU_STEPS), so 13 merged windows of ~400 k steps ran as two
calls. This script annotates the same region in one process (after a warm-up) with each
factor in turn, twice over, and prints each run's wall time, peak GPU memory and
whether its BED and GFF3 equal the first factor's.

    PYTHONPATH=. python benchmarks/gpu_merge_factor.py --factors 1,2,4 --region 0-4000000

A factor written M/F also multiplies the first width's steps a call (GPU_STEPS) by F:
"1/2" is the merge rounds as they are with twice the first round's windows a call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from lib import annotation_rows, header  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--factors", default="1,2,4")
    ap.add_argument("--region", default="0-4000000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    import torch

    from semiseg import ui
    from semiseg.annotate import posterior_seams
    from semiseg.annotate.run import annotate

    ui.set_quiet(True)
    fasta = os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa")
    work = tempfile.mkdtemp(prefix="semiseg_merge_")

    def bed(name, span):
        a, b = span.split("-")
        path = os.path.join(work, "region_" + name + ".bed")
        with open(path, "w") as f:
            f.write(f"chr2R_2M_6M\t{a}\t{b}\n")
        return path

    annotate("fly", fasta, os.path.join(work, "warm"), device=args.device,
             regions=bed("warm", "3000000-3300000"))
    reg = bed("region", args.region)
    a, b = (int(v) for v in args.region.split("-"))
    factors = args.factors.split(",")
    steps0 = posterior_seams.GPU_STEPS
    times = {f: [] for f in factors}
    peaks = {f: [] for f in factors}
    same = {}
    for r in range(args.rounds):
        for f in factors:
            m, _, first = f.partition("/")
            posterior_seams.GPU_MERGE_FACTOR = int(m)
            posterior_seams.GPU_STEPS = steps0 * int(first or 1)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            out = os.path.join(work, f"r{r}_f{f}")
            t = time.perf_counter()
            annotate("fly", fasta, out, device=args.device, regions=reg)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
                peaks[f].append(torch.cuda.max_memory_allocated() / 2**30)
            times[f].append(time.perf_counter() - t)
            first = os.path.join(work, f"r0_f{factors[0]}")
            same.setdefault(f, True)
            for ext in (".bed", ".gff3"):
                same[f] &= (annotation_rows(first + ext, scores=False)
                            == annotation_rows(out + ext, scores=False))
            print(f"round {r + 1}, factor {f}: {times[f][-1]:.2f} s", flush=True)
    print(header("benchmarks/gpu_merge_factor.py", args.device, "python " + " ".join(sys.argv)))
    print(f"shipped fly model, chr2R_2M_6M:{args.region}, {args.rounds} rounds (factors in "
          "turn)\n")
    print("| merge factor | runs s | median s | bp/s | peak GPU GiB | BED and GFF3 rows as "
          f"factor {factors[0]}'s |\n|---|---|---|---|---|---|")
    for f in factors:
        med = statistics.median(times[f])
        pk = f"{max(peaks[f]):.2f}" if peaks[f] else "-"
        print(f"| {f} | {', '.join(f'{t:.2f}' for t in times[f])} | {med:.2f} | "
              f"{(b - a) / med:,.0f} | {pk} | {'yes' if same[f] else 'NO'} |")


if __name__ == "__main__":
    main()
