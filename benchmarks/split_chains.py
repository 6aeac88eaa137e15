"""Static chains split over several programs per sequence (issue 9: B = 1, T = 1e6 in <= 7 s):

    PYTHONPATH=. python benchmarks/split_chains.py [--genome 1,rule,4,8,16] [--warps rule,16,8]
        [--ks 2000,4000,8192] [--small 1x20000x1000x16,...] [--reps 3] [--no-record]

A tiled static chain (chain._fwd_kernel with its ring in memory) walks its whole ring on
one SM every step, so at B = 1 two SMs of an H100's 132 work and the 1e6 steps of the
two chains take ~9 us each (benchmarks/RESULTS.md, "Checkpoint spacing against K").
With SPLIT = G, G programs share a chain, each walking KP / G slots and exchanging their
partial logsumexps every step (kernels._split_opts). Prediction: the step's ring work
falls G-fold and each step pays one exchange (~1-2 us: two L2 round trips), so at G = 8
~2-3 us per step, fwd+bwd at B = 1, T = 1e6 ~3 s.

--genome: B = 1, T = 1e6, K = 1000, C = 24 (static, KP x CP = 1024 x 32), fwd+bwd once per
variant (G = 1 is the unsplit chain, at the first --warps only; rule: kernels._split_opts'
choice), each at every --warps, after a call at T = 20,000 that compiles it; log Z checked against G = 1's.
--ks: issue 9's K-doubling shape (16, 20000, K, 13), fwd+bwd median of --reps, unsplit
and by rule. --small: shapes (BxTxKxC) whose rings the shipped rule keeps in registers,
against the same forced into tiles and split. CUDA events. Appends the tables to benchmarks/RESULTS.md unless --no-record.
"""

import argparse
import os
import sys
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves
from results import append

from semiseg.crf import kernels as kn


def _set(split, warps):
    kn.CHAIN_SPLIT = split
    kn.CHAIN_TILE_WARPS = None if warps == "rule" else warps


def split_of(B, KP, CP):
    """(programs per chain, warps) that kernels._split_opts picks for B chains of this ring
    under the current CHAIN_SPLIT / CHAIN_TILE_WARPS / CHAIN_TILE_FROM."""
    sk = kn._split_opts(B, KP, CP, kn._chain_opts(KP, CP, 16), torch.empty(1, device="cuda"))
    return sk.get("SPLIT", 1), sk["num_warps"]


def genome_call(x, small):
    """(fwd+bwd ms, peak GiB, log Z) of one call on a genome-scale x, after a call on
    `small` (the same kernels at a short T) compiled them; CUDA events, peak memory
    allocated during the call."""
    fwd_bwd(small)
    torch.cuda.reset_peak_memory_stats()
    t = events(lambda: fwd_bwd(x), 1, warmup=0)
    peak = torch.cuda.max_memory_allocated() / 2**30
    return t, peak, kn.forward(x)[0].double().item()


def genome(variants, warps):
    x = as_x(leaves(1, 1_000_000, 1000, 24))
    small = as_x(leaves(1, 20000, 1000, 24))
    KP, CP = kn._shape(x)
    rows = ["| G (programs per chain) | warps | fwd s | fwd+bwd s | peak GiB | log Z - G=1's |",
            "|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    ref = None
    for v in variants:
        for w in warps[:1] if v == "1" else warps:
            _set(None if v == "rule" else int(v), w)
            G, nw = split_of(1, KP, CP)
            t, peak, lz = genome_call(x, small)
            f = events(lambda: kn.forward(x), 1, warmup=0)
            if ref is None:
                ref = lz
            name = f"{G} (rule)" if v == "rule" else str(G)
            rule = " (rule)" if w == "rule" else ""
            rows.append(f"| {name} | {nw}{rule} | {f / 1e3:.2f} | {t / 1e3:.2f} | "
                        f"{peak:.2f} | {lz - ref:.2e} |")
            print(rows[-1], flush=True)
    _set(None, None)
    return rows


def kdoubling(ks, reps):
    rows = [("| B, T, K, C | G by rule | fwd+bwd ms unsplit | fwd+bwd ms split | x per "
             "doubling unsplit / split |"), "|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    prev = None
    for K in ks:
        B, T, C = 16, 20000, 13
        x = as_x(leaves(B, T, K, C))
        KP, CP = kn._shape(x)
        _set(None, None)
        G = split_of(B, KP, CP)[0]
        _set(1, None)
        un = events(lambda x=x: fwd_bwd(x), reps)
        _set(None, None)
        sp = events(lambda x=x: fwd_bwd(x), reps)
        ratio = "" if prev is None else f"{un / prev[0]:.2f} / {sp / prev[1]:.2f}"
        rows.append(f"| {B}, {T}, {K}, {C} | {G} | {un:.1f} | {sp:.1f} | {ratio} |")
        print(rows[-1], flush=True)
        prev = (un, sp)
        del x
        torch.cuda.empty_cache()
    return rows


def small(shapes, reps):
    """Register-ring shapes at small B: the shipped path against the ring forced into
    memory (CHAIN_TILE_FROM = 0) and split by rule."""
    rows = ["| B, T, K, C | fwd+bwd ms, register ring | fwd+bwd ms, tiled and split (G) |",
            "|---|---|---|"]
    print("\n".join(rows), flush=True)
    for B, T, K, C in shapes:
        x = as_x(leaves(B, T, K, C))
        KP, CP = kn._shape(x)
        _set(None, "rule")
        reg = events(lambda x=x: fwd_bwd(x), reps)
        old = kn.CHAIN_TILE_FROM
        kn.CHAIN_TILE_FROM = 0
        G = split_of(B, KP, CP)[0]
        sp = events(lambda x=x: fwd_bwd(x), reps)
        kn.CHAIN_TILE_FROM = old
        rows.append(f"| {B}, {T}, {K}, {C} | {reg:.1f} | {sp:.1f} ({G}) |")
        print(rows[-1], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--genome", default="1,rule,4,8,16")
    ap.add_argument("--warps", default="rule,16,8")
    ap.add_argument("--ks", default="1000,2000,4000,8192")
    ap.add_argument("--small", default="1x20000x1000x16,4x20000x1000x16,1x20000x256x24")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    dev = torch.cuda.get_device_name(0)
    print(dev, flush=True)
    lines = []
    if a.genome:
        warps = [w if w == "rule" else int(w) for w in a.warps.split(",")]
        lines += genome(a.genome.split(","), warps) + [""]
    if a.ks:
        lines += kdoubling([int(k) for k in a.ks.split(",")], a.reps) + [""]
    if a.small:
        shapes = [tuple(int(v) for v in s.split("x")) for s in a.small.split(",")]
        lines += small(shapes, a.reps)
    if not a.no_record:
        append(f"Static chains split over programs (issue 9) - "
               f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {dev}, torch {torch.__version__}",
               "`PYTHONPATH=. python benchmarks/split_chains.py " + " ".join(sys.argv[1:]) + "`",
               lines)


if __name__ == "__main__":
    main()
