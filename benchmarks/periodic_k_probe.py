"""Periodic (P = 3) transitions against K at (16, 20000, K, 13), beside static, with the
shipped rules (issue 9: "no cliff in K ... for static, periodic and fully
duration-dependent transitions alike"):

    PYTHONPATH=. python benchmarks/periodic_k_probe.py [--ks 1000,2000] [--reps 3]

CUDA events, medians: forward, forward+backward (autograd's path) and Viterbi, ms.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ks", default="1000,2000")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print(f"{torch.cuda.get_device_name(0)}\n\n| B, T, K, C | transitions | fwd ms | fwd+bwd ms "
          "| Viterbi ms |\n|---|---|---|---|---|", flush=True)
    for K in (int(k) for k in a.ks.split(",")):
        for period in (None, 3):
            x = as_x(leaves(16, 20000, K, 13, period=period))
            why = kn.supports(x)
            if why:
                print(f"| 16, 20000, {K}, 13 | {period or 'static'} | not run: {why} |")
                continue
            f = events(lambda x=x: kn.forward(x), a.reps)
            fb = events(lambda x=x: fwd_bwd(x), a.reps)
            v = events(lambda x=x: kn.viterbi(x), a.reps)
            print(f"| 16, 20000, {K}, 13 | {'P = 3' if period else 'static'} | {f:.1f} | "
                  f"{fb:.1f} | {v:.1f} |", flush=True)
            del x
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
