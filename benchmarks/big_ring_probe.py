"""Rings beyond MAX_RING: do the register-ring kernels run, how fast, and how right, at
K = 2000-8192 (issue 9's K cliff; benchmarks/KERNELS_NOTES.md, session 16)?

    PYTHONPATH=. python benchmarks/big_ring_probe.py [--shapes 16x20000x1000x13,...]
        [--warps 16,32] [--vit-warps 8,16,32] [--reps 2] [--check 4000,8192]

The register rings as they were before session 16's tiles: kernels.MAX_RING and
MAX_RING_TILED are lifted and the tiles are off (CHAIN_TILE_FROM, BWD_TILE_FROM). For
each shape (BxTxKxC[xP]) and each warp count
(kernels.WARPS, every kernel of the call), CUDA-event medians of the forward, the
forward+backward as autograd runs it, and the Viterbi. --check K,...: log Z and the
gradient of the scores of (2, 12000, K, 13) at 32 warps against the torch backend in
float64 (the exact reference), max abs differences.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn
from semiseg.crf import log_partition


def shapes(text):
    for s in text.split(","):
        B, T, K, C, *P = (int(v) for v in s.split("x"))
        yield B, T, K, C, (P[0] if P else None)


def time_shape(B, T, K, C, P, warps, vit_warps, reps):
    x = as_x(leaves(B, T, K, C, period=P))
    KP, CP = kn._shape(x)
    for w in sorted(set(warps) | set(vit_warps)):
        kn.WARPS = w
        f = events(lambda x=x: kn.forward(x), reps) if w in warps else None
        fb = events(lambda x=x: fwd_bwd(x), reps) if w in warps else None
        v = events(lambda x=x: kn.viterbi(x), reps) if w in vit_warps else None
        lz = kn.forward(x)[0]
        cell = lambda t: "-" if t is None else f"{t:.1f}"
        print(f"| {B}, {T}, {K}, {C}, {P or 'static'} | {KP} x {CP} | {w} | {cell(f)} | "
              f"{cell(fb)} | {cell(v)} | {lz[0].item():.6f} |", flush=True)
    kn.WARPS = None
    del x
    torch.cuda.empty_cache()


def check(K, warps):
    p = leaves(2, 12000, K, 13)
    kn.WARPS = warps
    out = {}
    for name, dt, be in (("triton", torch.float32, "triton"), ("torch", torch.float64, "torch")):
        q = {k: v.to(dt).detach().requires_grad_(k == "scores") for k, v in p.items()}
        lz = log_partition(q["scores"], q["transition"], q["duration_bias"], start=q["start"],
                           end=q["end"], backend=be)
        lz.sum().backward()
        out[name] = (lz.double(), q["scores"].grad.double())
    kn.WARPS = None
    dz = (out["triton"][0] - out["torch"][0]).abs().max().item()
    rel = dz / out["torch"][0].abs().max().item()
    dg = (out["triton"][1] - out["torch"][1]).abs().max().item()
    print(f"| 2, 12000, {K}, 13 | {warps} | {dz:.3e} ({rel:.1e} relative) | {dg:.3e} |",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="16x20000x1000x13,16x20000x2000x13,"
                    "16x20000x4000x13,16x20000x8192x13")
    ap.add_argument("--warps", default="16,32")
    ap.add_argument("--vit-warps", default="8,16,32")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--check", default="")
    a = ap.parse_args()
    kn.MAX_RING = kn.MAX_RING_TILED = 1 << 20
    kn.CHAIN_TILE_FROM = kn.BWD_TILE_FROM = 1 << 62
    warps = [int(w) for w in a.warps.split(",") if w]
    vit = [int(w) for w in a.vit_warps.split(",") if w]
    print(f"{torch.cuda.get_device_name(0)}\n\n| B, T, K, C, P | KP x CP | warps | fwd ms | "
          "fwd+bwd ms | Viterbi ms | log Z[0] |\n|---|---|---|---|---|---|---|", flush=True)
    for B, T, K, C, P in shapes(a.shapes):
        time_shape(B, T, K, C, P, warps, vit, a.reps)
    if a.check:
        print("\n| B, T, K, C | warps | log Z vs float64 torch | d log Z / d scores vs "
              "float64 |\n|---|---|---|---|", flush=True)
        for K in a.check.split(","):
            check(int(K), 32)


if __name__ == "__main__":
    main()
