"""The periodic family's end-indexed chain with its ring in registers against the ring in
global memory walked in tiles (kernels.RING_TILE, tiled.py), on one GPU, in one run.

    PYTHONPATH=. python benchmarks/ring_tiles.py [--variants 0,32x16,64x16]
        [--shapes 100x20000x256x37p3,...] [--reps 3] [--results benchmarks/RESULTS.md]

A variant is `0` (the register ring: chain._fwd_end_kernel), `auto` (kernels._ring_tile's
choice by shape) or TILExWARPS (the tiled kernel with TILE slots per tile and WARPS warps;
`TILExauto`: kernels._ring_tile's warps). For each periodic shape B x T x K x C pP (random inputs as posterior_pass.py's,
plus an `allowed` mask with 75% of labels allowed, as the gene model's sequence mask) it
times with CUDA events (median of --reps after a warm-up that also compiles):
  fwd        kernels.forward (the end-indexed half beside the reversed chain's)
  posterior  forward + backward(wanted=("scores", "proj_start")) (the recompute waves run
             the end-indexed chain in MODE 1)
  viterbi    kernels.viterbi (the end-indexed half in MODE 2)
and checks every variant's log Z, posterior gradients and Viterbi path bitwise against
the first variant's ("same bits": yes / NO). Prints a markdown table; --results appends
it with the device, date and commit.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys

import torch

from semiseg.crf import kernels as kn
from semiseg.crf.inputs import check_inputs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from periodic_kernels import events  # noqa: E402 (CUDA events, median ms after a warm-up)

SHAPES = "100x20000x256x37p3,16x6000x256x37p3,8x20000x100x24p3,16x20000x1000x16p3"


def problem(B, T, K, C, period, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    allowed = torch.rand(B, T, C, device="cuda", generator=g) < 0.75
    return check_inputs(3 * r(B, T, C), r(period, C, C), r(K, C), None, start=r(C),
                        end=r(C), proj_start=r(B, T, C), allowed=allowed)


def parse(shape: str):
    dims, _, per = shape.partition("p")
    B, T, K, C = (int(v) for v in dims.split("x"))
    return B, T, K, C, int(per)


def set_variant(v: str) -> None:
    if v in ("0", "auto"):  # the register ring / kernels._ring_tile's choice
        kn.RING_TILE, kn.TILE_WARPS = (0 if v == "0" else None), None
        return
    tile, warps = v.split("x")
    kn.RING_TILE = int(tile)
    kn.TILE_WARPS = None if warps == "auto" else int(warps)


def outputs(x, one):
    lz, saved = kn.forward(x)
    g = kn.backward(x, saved, one, wanted=("scores", "proj_start"))
    score, labels, starts = kn.viterbi(x)
    return [lz, g["scores"], g["proj_start"], score, labels, starts]


def measure(shape: str, variants: list[str], reps: int) -> list[str]:
    B, T, K, C, period = parse(shape)
    x = problem(B, T, K, C, period)
    one = torch.ones(B, device="cuda")

    def posterior():
        lz, saved = kn.forward(x)
        return kn.backward(x, saved, one, wanted=("scores", "proj_start"))

    rows, ref = [], None
    for v in variants:
        set_variant(v)
        out = outputs(x, one)
        if ref is None:
            ref, same = out, "-"
        else:
            same = "yes" if all(torch.equal(a, b) for a, b in zip(ref, out)) else "NO"
        del out
        t_f = events(lambda: kn.forward(x), reps)
        t_p = events(posterior, reps)
        t_v = events(lambda: kn.viterbi(x), reps)
        rows.append(f"| {B}, {T}, {K}, {C}, P={period} | {v} | {t_f:.1f} | {t_p:.1f} | "
                    f"{t_v:.1f} | {same} |")
        print(rows[-1], flush=True)
    set_variant("auto")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--variants", default="0,32x16,64x16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--results", default=None)
    a = ap.parse_args()
    head = ["| B, T, K, C, transition | ring (TILExWARPS) | fwd ms | posterior fwd+bwd ms | "
            "Viterbi ms | same bits as the first |",
            "|---|---|---|---|---|---|"]
    print("\n".join(head), flush=True)
    rows = []
    for shape in a.shapes.split(","):
        rows += measure(shape, a.variants.split(","), a.reps)
        torch.cuda.empty_cache()
    if a.results:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], text=True,
                                    capture_output=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
        with open(a.results, "a") as fh:
            fh.write(f"\n### ring in registers vs tiled in global memory "
                     f"(benchmarks/ring_tiles.py) - {now}, commit {commit}, "
                     f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n\n")
            fh.write("\n".join(head + rows) + "\n")


if __name__ == "__main__":
    main()
