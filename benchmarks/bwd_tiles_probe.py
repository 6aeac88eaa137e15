"""The static backward's ring walked in tiles (chain._bwd_kernel TILE) and 32 warps for big
static rings, against the session-15 rules, side by side on one GPU (issue 9's K cliff;
benchmarks/KERNELS_NOTES.md, session 16):

    PYTHONPATH=. python benchmarks/bwd_tiles_probe.py [--shapes BxTxKxC,...] [--reps 2]
        [--sweep 2000,4000] [--check 4000] [--genome]

Variants (module knobs of semiseg.crf.kernels; --variants picks them):
    before:    registers everywhere (BWD_TILE_FROM, CHAIN_TILE_FROM, BIG_VITERBI off),
               the rules of session 15 (rings over MAX_RING were refused then; run
               here anyway);
    bwd tiles: the backward tiled, the chains (_fwd_kernel) in registers;
    now:       the shipped rules (backward and chains tiled from KP x CP = 32768);
    tiled:     both forced (.._TILE_FROM = 0), for shapes below the rule;
--chain-sweep K,...: the tiled chains' tile elements 4096 / 8192 / 16384 x warps 8 / 16 /
32 (forward and Viterbi).
--sweep K,...: at (16, 20000, K, 13), tile elements 2048 / 4096 / 8192 x warps 8 / 16 / 32.
CUDA events, median of --reps after a warm-up: forward, forward+backward with every
gradient (autograd's path), the posterior backward (per-position gradients only) and the
Viterbi. --check K: every gradient of (2, 12000, K, 13) against the torch backend in
float64, and two runs bitwise. --genome: B = 1, T = 1e6, K = 1000, C = 24, before / now,
forward+backward once, with the peak memory.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import against_float64, as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn

OFF = 1 << 62
VARIANTS = {
    "before": {"BWD_TILE_FROM": OFF, "BIG_VITERBI": OFF, "CHAIN_TILE_FROM": OFF},
    "bwd tiles": {"CHAIN_TILE_FROM": OFF},
    "now": {},
    "tiled": {"BWD_TILE_FROM": 0, "CHAIN_TILE_FROM": 0},
}
KNOBS = ("BWD_TILE_FROM", "BWD_TILE_ELEMS", "BWD_TILE_WARPS", "BIG_VITERBI",
         "CHAIN_TILE_FROM", "CHAIN_TILE_ELEMS", "CHAIN_TILE_WARPS")


def knobs(**kw):
    saved = {k: getattr(kn, k) for k in KNOBS}
    for k, v in saved.items():
        setattr(kn, k, kw.get(k, v))
    return saved


def posterior(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz), wanted=("scores", "proj_start"))


def row(name, x, reps, vit=True):
    f = events(lambda x=x: kn.forward(x), reps)
    fb = events(lambda x=x: fwd_bwd(x), reps)
    po = events(lambda x=x: posterior(x), reps)
    v = events(lambda x=x: kn.viterbi(x), reps) if vit else float("nan")
    KP, CP = kn._shape(x)
    lz = kn.forward(x)[0]
    labels = kn.viterbi(x)[1]
    print(f"| {x.batch}, {x.T}, {x.K}, {x.C} | {KP} x {CP} | {name} | tile "
          f"{kn._bwd_tile(KP, CP)} | {f:.1f} | {fb:.1f} | {po:.1f} | {v:.1f} | "
          f"{lz[0].item():.4f} |", end=" ", flush=True)
    return labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="16x20000x1000x16,16x20000x1000x13,16x20000x2000x13,"
                    "16x20000x4000x13,16x20000x8192x13")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sweep", default="")
    ap.add_argument("--chain-sweep", default="", help="K,...: the tiled chains' tile x warps")
    ap.add_argument("--variants", default="before,bwd tiles,now")
    ap.add_argument("--check", default="")
    ap.add_argument("--genome", action="store_true")
    a = ap.parse_args()
    kn.MAX_RING_TILED = 1 << 20
    print(f"{torch.cuda.get_device_name(0)}\n\n| B, T, K, C | KP x CP | variant | backward | "
          "fwd ms | fwd+bwd ms | posterior fwd+bwd ms | Viterbi ms | log Z[0] | Viterbi labels "
          "as the first row's |\n|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for s in a.shapes.split(","):
        B, T, K, C = (int(v) for v in s.split("x"))
        x = as_x(leaves(B, T, K, C))
        KP, CP = kn._shape(x)
        names = a.variants.split(",") if KP * CP >= kn.BWD_TILE_FROM else ["now", "tiled"]
        if K >= 8000:
            names = [n for n in names if n != "before"]
        first = None
        for name in names:
            old = knobs(**VARIANTS[name])
            labels = row(name, x, a.reps)
            first = labels if first is None else first
            print(f"{torch.equal(labels, first)} |", flush=True)
            knobs(**old)
        del x
        torch.cuda.empty_cache()
    for K in (int(k) for k in a.sweep.split(",") if k):
        x = as_x(leaves(16, 20000, K, 13))
        for elems in (2048, 4096, 8192):
            for w in (8, 16, 32):
                old = knobs(BWD_TILE_ELEMS=elems, BWD_TILE_WARPS=w)
                f = events(lambda x=x: fwd_bwd(x), a.reps)
                print(f"| 16, 20000, {K}, 13 | tiles of {elems} elements, {w} warps | "
                      f"fwd+bwd {f:.1f} ms |", flush=True)
                knobs(**old)
        del x
    for K in (int(k) for k in a.chain_sweep.split(",") if k):
        x = as_x(leaves(16, 20000, K, 13))
        for elems in (4096, 8192, 16384):
            for w in (8, 16, 32):
                old = knobs(CHAIN_TILE_ELEMS=elems, CHAIN_TILE_WARPS=w)
                f = events(lambda x=x: kn.forward(x), a.reps)
                v = events(lambda x=x: kn.viterbi(x), a.reps)
                print(f"| 16, 20000, {K}, 13 | chain tiles of {elems} elements, {w} warps | "
                      f"fwd {f:.1f} ms | Viterbi {v:.1f} ms |", flush=True)
                knobs(**old)
        del x
    for K in (int(k) for k in a.check.split(",") if k):
        same, _, diffs = against_float64(leaves(2, 12000, K, 13))
        print(f"| 2, 12000, {K}, 13 | two runs bitwise: {same} | max abs vs float64: {diffs} |",
              flush=True)
    if a.genome:
        x = as_x(leaves(1, 1_000_000, 1000, 24))
        for name in a.variants.split(","):
            old = knobs(**VARIANTS[name])
            torch.cuda.reset_peak_memory_stats()
            t = events(lambda x=x: fwd_bwd(x), 1, warmup=0)
            peak = torch.cuda.max_memory_allocated() / 2**30
            print(f"| 1, 1e6, 1000, 24 | {name} | fwd+bwd {t / 1e3:.2f} s (first call) | "
                  f"peak {peak:.2f} GiB |", flush=True)
            knobs(**old)


if __name__ == "__main__":
    main()
