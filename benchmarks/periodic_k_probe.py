"""Periodic (P = 3) transitions against K at (16, 20000, K, 13), beside static, with the
shipped rules (issue 9: "no cliff in K ... for static, periodic and fully
duration-dependent transitions alike"):

    PYTHONPATH=. python benchmarks/periodic_k_probe.py [--ks 1000,2000,4000,8192]
        [--reps 3] [--registers 2000] [--sweep 4000] [--check 4000]

CUDA events, medians of --reps after a warm-up: forward, forward+backward (autograd's
path, every gradient), the posterior pass (forward keeping its rows, per-position
gradients only) and Viterbi, ms; the Viterbi labels of periodic against those of the
first periodic row of the same K.
--registers K,...: periodic with the rings in registers (the tiles of session 17 off:
CHAIN_TILE_FROM, BWD_TILE_FROM; the end-indexed chain in its 64-slot tiles as before).
--sweep K,...: periodic with the end-indexed chain's tiles (END_TILE_ELEMS 1024 / 4096 /
16384) x the reversed chain's tile warps (CHAIN_TILE_WARPS 8 / 16).
--check K,...: (2, 9000, K, 13) P = 3 against the torch backend in float64 (max abs of
every gradient) and two runs bitwise.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import against_float64, as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn

OFF = 1 << 62
KNOBS = ("CHAIN_TILE_FROM", "BWD_TILE_FROM", "END_TILE_ELEMS", "CHAIN_TILE_WARPS")


def knobs(**kw):
    saved = {k: getattr(kn, k) for k in KNOBS}
    for k, v in kw.items():
        setattr(kn, k, v)
    return saved


def posterior(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz), wanted=("scores", "proj_start"))


def row(K, name, x, reps, first):
    f = events(lambda x=x: kn.forward(x), reps)
    fb = events(lambda x=x: fwd_bwd(x), reps)
    po = events(lambda x=x: posterior(x), reps)
    v = events(lambda x=x: kn.viterbi(x), reps)
    labels = kn.viterbi(x)[1]
    same = "-" if first is None else str(torch.equal(labels, first))
    print(f"| 16, 20000, {K}, 13 | {name} | {f:.1f} | {fb:.1f} | {po:.1f} | {v:.1f} | "
          f"{same} |", flush=True)
    return labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ks", default="1000,2000,4000,8192")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--registers", default="")
    ap.add_argument("--sweep", default="")
    ap.add_argument("--check", default="")
    a = ap.parse_args()
    ints = lambda s: [int(k) for k in s.split(",") if k]
    print(f"{torch.cuda.get_device_name(0)}\n\n| B, T, K, C | transitions | fwd ms | "
          "fwd+bwd ms | posterior ms | Viterbi ms | Viterbi labels as the first P = 3 row's |"
          "\n|---|---|---|---|---|---|---|", flush=True)
    for K in ints(a.ks):
        first = None
        for period in (None, 3):
            x = as_x(leaves(16, 20000, K, 13, period=period))
            why = kn.supports(x)
            if why:
                print(f"| 16, 20000, {K}, 13 | {period or 'static'} | not run: {why} |")
                continue
            lab = row(K, "P = 3" if period else "static", x, a.reps, first if period else None)
            if period:
                first = lab
                if K in ints(a.registers):
                    old = knobs(CHAIN_TILE_FROM=OFF, BWD_TILE_FROM=OFF)
                    row(K, "P = 3, registers", x, a.reps, first)
                    knobs(**old)
                if K in ints(a.sweep):
                    for elems in (1024, 4096, 16384):
                        for w in (8, 16):
                            old = knobs(END_TILE_ELEMS=elems, CHAIN_TILE_WARPS=w)
                            row(K, f"P = 3, end tiles {elems}, warps {w}", x, a.reps, first)
                            knobs(**old)
            del x
            torch.cuda.empty_cache()
    for K in ints(a.check):
        same, lz, diffs = against_float64(leaves(2, 9000, K, 13, period=3))
        print(f"| 2, 9000, {K}, 13, P = 3 | two runs bitwise: {same} | log Z {lz:.2e} | "
              f"max abs vs float64: {diffs} |", flush=True)


if __name__ == "__main__":
    main()
