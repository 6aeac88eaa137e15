"""Posterior seams' agreement test, absolute (the default) against absolute and relative
(an experiment; issue 42): stitched posteriors against the whole sequence's.

The default accepts a seam where the two windows' posteriors agree within `tol`
(absolute) over a run of steps. Near-0/1 posteriors hide a window's edge effect from an
absolute test (docs/decoding.md, "The posterior bound"). The variant also asks every
label whose posterior lies in [floor, 0.5] in both windows to agree within `rtol`
relative. For each test, on a region of the shared fly sequence with the shipped fly
model (CPU): the seam counts, seconds, and the stitched posteriors' largest difference
from the whole sequence's and how many steps differ by more than 1e-3.

    PYTHONPATH=. python benchmarks/posterior_seam_check.py --region 3000000-4000000
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402


def relative_seam_cut(real, rtol: float, floor: float):
    """_seam_cut whose per-step difference is max(absolute, tol / rtol x relative), the
    relative one over labels in [floor, 0.5] in both windows."""
    def cut(lo, hi, gl, left, gr, right, tol, agree):
        a0, a1 = max(lo, left[0], right[0]), min(hi, left[1], right[1])
        if a1 - a0 < 1:
            return real(lo, hi, gl, left, gr, right, tol, agree)
        x = gl[a0 - left[0]:a1 - left[0]].double()
        y = gr[a0 - right[0]:a1 - right[0]].double()
        lo_p, hi_p = torch.minimum(x, y), torch.maximum(x, y)
        rel = torch.where((lo_p >= floor) & (hi_p <= 0.5), (x - y).abs() / hi_p.clamp(min=floor),
                          torch.zeros_like(x))
        scaled = (rel * (tol / rtol)).amax(-1)  # over labels
        g2 = gl.clone()  # the absolute part as the default computes it, plus the scaled one
        g2[a0 - left[0]:a1 - left[0]] = (
            gr[a0 - right[0]:a1 - right[0]]
            + torch.sign(x - y).float() * torch.maximum((x - y).abs(), scaled[:, None]).float())
        return real(lo, hi, g2, left, gr, right, tol, agree)
    return cut


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--region", default="3000000-4000000")
    ap.add_argument("--window", type=int, default=65_536)
    ap.add_argument("--overlap", type=int, default=16_384)
    ap.add_argument("--rtol", type=float, default=1e-2)
    ap.add_argument("--floor", type=float, default=1e-6)
    args = ap.parse_args()

    from semiseg.annotate import posterior_seams as ps
    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.annotate.seams import SeamStats
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    a, b = (int(v) for v in args.region.split("-"))
    ck = load_checkpoint(resolve_model("fly"))
    with Fasta(os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, torch.device("cpu"), 200000, 10000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", a, b))
    head = ann.model.crf
    t = time.perf_counter()
    with torch.no_grad():
        terms = head._terms(em[None], torch.tensor([em.shape[0]]))
        whole = head._posteriors(terms, "auto")[0]
    print(f"whole posteriors of {b - a:,} steps: {time.perf_counter() - t:.1f} s", flush=True)
    real = ps._seam_cut
    print("| test | s | seams first / widened / merged | max diff from whole | steps > 1e-3 |")
    print("|---|---|---|---|---|")
    for name, cut in (("absolute 1e-5 (default)", real),
                      (f"and relative {args.rtol:g} over [{args.floor:g}, 0.5]",
                       relative_seam_cut(real, args.rtol, args.floor))):
        ps._seam_cut = cut
        st = SeamStats()
        t = time.perf_counter()
        with torch.no_grad():
            g, _, _ = ps.stitched_posteriors(head, em, args.window, args.overlap, 2, stats=st)
        s = time.perf_counter() - t
        d = (g - whole).abs().amax(-1)
        print(f"| {name} | {s:.1f} | {st.post_first} / {st.post_widened} / {st.post_whole} | "
              f"{float(d.max()):.2g} | {int((d > 1e-3).sum())} |", flush=True)
    ps._seam_cut = real
    print(f"\nregion chr2R_2M_6M:{a:,}-{b:,}, windows {args.window:,}, overlap {args.overlap:,}, "
          f"{os.cpu_count()} CPU cores")


if __name__ == "__main__":
    main()
