"""Certified posterior seams against the whole sequence's posteriors (issue 42): for each
window size, on a region of the shared fly sequence with the shipped fly model, the
seam counts, seconds, the stitched posteriors' largest difference from the whole
sequence's and how many steps differ by more than 1e-3 and 1e-5.

The certificate is posterior_bound.py's (docs/decoding.md, "The posterior bound"). Up to
a6c4ca9 this script compared the test seams used before it (two windows' posteriors
agreeing over a run of steps, absolute, and a relative variant): git show
a6c4ca9:benchmarks/posterior_seam_check.py.

    PYTHONPATH=. python benchmarks/posterior_seam_check.py --region 3000000-3300000 \
        --windows 6000:1000,16384:4096,65536:16384
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--region", default="3000000-3300000")
    ap.add_argument("--windows", default="16384:4096,65536:16384",
                    help="window:overlap pairs, comma-separated")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    from semiseg.annotate import posterior_seams as ps
    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.annotate.seams import SeamStats
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    dev = torch.device(args.device)
    a, b = (int(v) for v in args.region.split("-"))
    ck = load_checkpoint(resolve_model("fly"))
    with Fasta(os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, dev, 200000, 10000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", a, b))
    head = ann.model.crf
    t = time.perf_counter()
    with torch.no_grad():
        terms = head._terms(em[None], torch.tensor([em.shape[0]], device=dev))
        whole = head._posteriors(terms, "auto")[0].cpu()
    print(f"whole posteriors of {b - a:,} steps: {time.perf_counter() - t:.1f} s", flush=True)
    print("| windows | s | seams first / widened / merged | largest bound | max diff from "
          "whole | steps > 1e-3 | steps > 1e-5 |")
    print("|---|---|---|---|---|---|---|")
    for pair in args.windows.split(","):
        W, ov = (int(v) for v in pair.split(":"))
        st = SeamStats()
        t = time.perf_counter()
        with torch.no_grad():
            g, _, _ = ps.stitched_posteriors(head, em, W, ov, max(1, 2_640_000 // W),
                                             stats=st)
        s = time.perf_counter() - t
        d = (g - whole).abs().amax(-1)
        print(f"| {W:,} / {ov:,} | {s:.1f} | {st.post_first} / {st.post_widened} / "
              f"{st.post_whole} | {st.post_max_diff:.2g} | {float(d.max()):.2g} | "
              f"{int((d > 1e-3).sum())} | {int((d > 1e-5).sum())} |", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    name = torch.cuda.get_device_name() if dev.type == "cuda" else f"{os.cpu_count()} CPU cores"
    print(f"\nregion chr2R_2M_6M:{a:,}-{b:,}, {name}, commit {os.environ.get('COMMIT', commit)}, "
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
