"""Checkpoint spacing against K (issue 9's K cliff; benchmarks/KERNELS_NOTES.md, session 17):

    PYTHONPATH=. python benchmarks/segment_length_probe.py [--ks 1000,2000,4000,8192]
        [--rules now,K/2,K,2K] [--reps 3] [--genome now,w32,...]

Each static backward segment program first sums the segments across its right end (the
local normaliser, chain._crossing: O(K^2 C)), then walks its P positions (O(P K C)), so
its work is K C (K + P) and the whole backward's B (T / P) K C (K + P). The shipped rule
(kernels._segment_length) picks P for the grid (2 programs per SM) and not for K: at
(16, 20000, K, 13) P = 1177 for every K, so from K ~ P on the crossing dominates and the
backward grows ~K^2. The rules here keep the shipped P but at least a multiple of K
(fewer, longer programs). CUDA events, median of --reps after a warm-up, at (16, 20000,
K, 13): forward, forward+backward (every gradient), the posterior backward; every
gradient's max abs difference from the shipped rule's (the same terms in another order).
--genome: B = 1, T = 1e6, K = 1000, C = 24, fwd+bwd once per variant after a call at
T = 20000 (w32 / w8: the tiled chains at 32 / 8 warps; t32k, t8k: tiles of 32768 / 8192
elements; regs: no tiles).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn

SHIPPED = kn._segment_length


def rule(name):
    """A _segment_length with P >= f K (name 'K/2', 'K', '2K'), or the shipped one."""
    if name == "now":
        return SHIPPED
    f = {"K/2": 0.5, "K": 1.0, "2K": 2.0, "3K/2": 1.5}[name]

    def seg(T, K, B=1, device=None, C=1):
        return max(1, min(T, max(SHIPPED(T, K, B, device, C), math.ceil(f * min(K, T)))))
    return seg


def posterior(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz), wanted=("scores", "proj_start"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ks", default="1000,2000,4000,8192")
    ap.add_argument("--rules", default="now,K/2,K,2K")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--genome", default="")
    a = ap.parse_args()
    print(f"{torch.cuda.get_device_name(0)}\n\n| B, T, K, C | rule | P | segments per "
          "sequence | fwd ms | fwd+bwd ms | posterior fwd+bwd ms | max abs gradient "
          "difference from `now` |\n|---|---|---|---|---|---|---|---|", flush=True)
    for K in (int(k) for k in a.ks.split(",") if k):
        B, T, C = 16, 20000, 13
        x = as_x(leaves(B, T, K, C))
        ref = None
        for name in a.rules.split(","):
            kn._segment_length = rule(name)
            P = kn._segment_length(T, K, B, x.scores.device, C)
            f = events(lambda x=x: kn.forward(x), a.reps)
            fb = events(lambda x=x: fwd_bwd(x), a.reps)
            po = events(lambda x=x: posterior(x), a.reps)
            g = fwd_bwd(x)
            if ref is None:
                ref = g
            diff = max((g[k] - ref[k]).abs().max().item() for k in g if g[k] is not None)
            print(f"| {B}, {T}, {K}, {C} | {name} | {P} | {math.ceil(T / P)} | {f:.1f} | "
                  f"{fb:.1f} | {po:.1f} | {diff:.2e} |", flush=True)
            kn._segment_length = SHIPPED
        del x, ref, g
        torch.cuda.empty_cache()
    if a.genome:
        x = as_x(leaves(1, 1_000_000, 1000, 24))
        small = as_x(leaves(1, 20000, 1000, 24))  # compiles each variant's kernels first
        knobs = {"now": {}, "w32": {"CHAIN_TILE_WARPS": 32},
                 "t32k": {"CHAIN_TILE_ELEMS": 32768, "CHAIN_TILE_WARPS": 32},
                 "w8": {"CHAIN_TILE_WARPS": 8}, "t8k": {"CHAIN_TILE_ELEMS": 8192},
                 "t8kw8": {"CHAIN_TILE_ELEMS": 8192, "CHAIN_TILE_WARPS": 8},
                 "regs": {"CHAIN_TILE_FROM": 1 << 62, "BWD_TILE_FROM": 1 << 62}}
        for name in a.genome.split(","):
            old = {k: getattr(kn, k) for k in knobs[name]}
            for k, v in knobs[name].items():
                setattr(kn, k, v)
            fwd_bwd(small)
            torch.cuda.reset_peak_memory_stats()
            t = events(lambda x=x: fwd_bwd(x), 1, warmup=0)
            peak = torch.cuda.max_memory_allocated() / 2**30
            print(f"| 1, 1e6, 1000, 24 | {name} | fwd+bwd {t / 1e3:.2f} s | "
                  f"peak {peak:.2f} GiB |", flush=True)
            for k, v in old.items():
                setattr(kn, k, v)


if __name__ == "__main__":
    main()
