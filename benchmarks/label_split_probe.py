"""What splitting the gene shape's labels into long and short rings could save (issue 13):
the periodic (P = 3) posterior pass and Viterbi at (B, T, K, C) for the gene model's
shape (K = 256, C = 37) beside the two halves a split would run (13 long labels at K =
256; 37 labels at K = 4, i.e. the transition step with a 4-slot ring) and K = 1 (the
transition step alone):

    PYTHONPATH=. python benchmarks/label_split_probe.py [--b 132] [--t 20000] [--reps 3]

CUDA events, medians of --reps after a warm-up, ms. Random float32 inputs
(periodic_kernels.leaves). A probe, nothing is recorded.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, leaves

from semiseg.crf import kernels as kn


def posterior(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz), wanted=("scores", "proj_start"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--b", type=int, default=132)
    ap.add_argument("--t", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shapes", default="256x37,256x13,256x16,4x37,4x24,1x37,256x24,256x32")
    a = ap.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"| B, T | K x C | posterior pass ms | Viterbi ms |\n|---|---|---|---|")
    for s in a.shapes.split(","):
        K, C = map(int, s.split("x"))
        x = as_x(leaves(a.b, a.t, K, C, period=3))
        po = events(lambda x=x: posterior(x), a.reps)
        vi = events(lambda x=x: kn.viterbi(x), a.reps)
        print(f"| {a.b}, {a.t} | {K} x {C} | {po:.1f} | {vi:.1f} |", flush=True)


if __name__ == "__main__":
    main()
