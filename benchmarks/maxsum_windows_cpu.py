"""The gene decode's max-sum of one long sequence on the CPU: certified windows one after
the other (seams.certified_viterbi) against windows decoded side by side and certified
in order (maxsum_windows.parallel_certified_viterbi), on the same posterior scores.

    PYTHONPATH=. python benchmarks/maxsum_windows_cpu.py --region 3000000-4000000

The scores: the shipped fly model's posterior-decode scores of a region of the shared
fly sequence (terms and posteriors computed whole, once). Each variant runs --repeats
times after a warm-up (numba compiled); the table gives the median wall time, the seam
counts and whether the labels equal the first variant's. Prints a Markdown table with
the date, machine and commit.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--region", default="3000000-4000000", help="START-END of chr2R_2M_6M")
    ap.add_argument("--window", type=int, default=65_536)
    ap.add_argument("--overlap", type=int, default=4_096)
    ap.add_argument("--threads", default="1,2", help="thread counts of the side-by-side form")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.annotate.maxsum_windows import parallel_certified_viterbi
    from semiseg.annotate.seams import SeamStats, certified_viterbi
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    a, b = (int(v) for v in args.region.split("-"))
    ck = load_checkpoint(resolve_model("fly"))
    t = time.perf_counter()
    with Fasta(os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, torch.device("cpu"), 200000, 10000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", a, b))
    head = ann.model.crf
    with torch.no_grad():
        terms = head._terms(em[None], torch.tensor([em.shape[0]]))
        g = head._posteriors(terms, "auto")[0]
        sc = head.decode_posteriors(g)
    ok, ps = terms["allowed"][0], terms["proj_start"][0]
    print(f"scores of {b - a:,} steps in {time.perf_counter() - t:.1f} s", flush=True)
    kw = dict(allowed=ok, proj_start=ps, window=args.window, overlap=args.overlap)
    variants = [("one after the other", lambda st: certified_viterbi(
        sc, head.decode_tmask, head.decode_dmask, stats=st, **kw))]
    for n in (int(v) for v in args.threads.split(",")):
        variants.append((f"side by side, {n} thread(s)", lambda st, n=n:
                         parallel_certified_viterbi(sc, head.decode_tmask, head.decode_dmask,
                                                    threads=n, stats=st, **kw)))
    short = {k: (v[:50_000] if torch.is_tensor(v) and v.dim() == 2 else v)
             for k, v in kw.items()}
    certified_viterbi(sc[:50_000], head.decode_tmask, head.decode_dmask, **short)  # compile
    parallel_certified_viterbi(sc[:50_000], head.decode_tmask, head.decode_dmask, threads=2,
                               **short)
    rows, first = [], None
    for name, fn in variants:
        times = []
        for _ in range(args.repeats):
            st = SeamStats()
            t = time.perf_counter()
            lab, _ = fn(st)
            times.append(time.perf_counter() - t)
        first = lab if first is None else first
        rows.append((name, statistics.median(times), times, st, bool(np.array_equal(lab, first))))
        print(f"{name}: {', '.join(f'{x:.1f}' for x in times)} s", flush=True)
    commit = os.environ.get("COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        check=False).stdout.strip() or "?"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\nmaxsum_windows_cpu: {now}, {os.cpu_count()} CPU cores, commit {commit}, shipped "
          f"fly model, chr2R_2M_6M:{a:,}-{b:,} ({b - a:,} steps), windows {args.window:,}, "
          f"overlap {args.overlap:,}\n")
    print("| max-sum | median s | runs s | steps/s | seams | labels as the first |")
    print("|---|---|---|---|---|---|")
    for name, med, times, st, same in rows:
        print(f"| {name} | {med:.1f} | {', '.join(f'{x:.1f}' for x in times)} | "
              f"{(b - a) / med:,.0f} | {st.line()[len('seams: '):]} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
