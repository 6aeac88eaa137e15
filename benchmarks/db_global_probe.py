"""_bwd_kernel's duration-bias sum in registers or in global memory (DB_GLOBAL), measured
side by side on one GPU (benchmarks/KERNELS_NOTES.md, session 15):

    PYTHONPATH=. python benchmarks/db_global_probe.py

For each shape (static, or periodic with a P), forward+backward (CUDA events, median of
--reps after a warm-up) with the sum in registers (kernels.DB_GLOBAL_FROM = 2^62) and in
global memory (DB_GLOBAL_FROM = 0, whatever the shape rule says), and whether every
gradient is bitwise equal between the two. Prints a markdown table.
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
    ap.add_argument("--shapes", default="16x20000x1000x16,16x20000x2000x13,4x20000x1000x24",
                    help="comma-separated BxTxKxC[xP] (P: periodic transitions)")
    a = ap.parse_args()
    default = kn.DB_GLOBAL_FROM
    print("| B, T, K, C, P | KP x CP | duration sum | fwd+bwd ms | gradients bitwise "
          "equal |\n|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        B, T, K, C, *P = (int(v) for v in shape.split("x"))
        x = as_x(leaves(B, T, K, C, period=P[0] if P else None))
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
            print(f"| {B}, {T}, {K}, {C}, {P[0] if P else 'static'} | {KP} x {CP} | {name} | {out[name][0]:.1f} | "
                  f"{same} |", flush=True)
        del x, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
