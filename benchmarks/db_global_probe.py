"""_bwd_kernel's duration-bias sum in registers or in global memory (DB_GLOBAL), measured
side by side on one GPU (benchmarks/KERNELS_NOTES.md, session 15):

    PYTHONPATH=. python benchmarks/db_global_probe.py

For each static shape, forward+backward (CUDA events, median of --reps after a warm-up)
with kernels.DB_GLOBAL_FROM at its default and switched off (registers), and whether
every gradient is bitwise equal between the two. Prints a markdown table.
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
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    default = kn.DB_GLOBAL_FROM
    print("| B, T, K, C, static | KP x CP | duration sum | fwd+bwd ms | gradients bitwise "
          "equal |\n|---|---|---|---|---|")
    for B, T, K, C in ((16, 20000, 1000, 16), (16, 20000, 2000, 13), (4, 20000, 1000, 24)):
        x = as_x(leaves(B, T, K, C))
        KP, CP = kn._shape(x)
        out = {}
        for name, frm in (("registers", 1 << 62), ("global", 0)):
            kn.DB_GLOBAL_FROM = frm
            t = events(lambda x=x: fwd_bwd(x), a.reps)
            out[name] = (t, fwd_bwd(x))
        kn.DB_GLOBAL_FROM = default
        same = all(torch.equal(out["registers"][1][k], out["global"][1][k])
                   for k in out["global"][1])
        for name in ("registers", "global"):
            print(f"| {B}, {T}, {K}, {C} | {KP} x {CP} | {name} | {out[name][0]:.1f} | "
                  f"{same} |", flush=True)
        del x, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
