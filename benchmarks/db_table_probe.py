"""The duration bias as a (KP, CP) table read whole (kernels._db_table) against the (K, C)
rows read with a mask per label, on one GPU (issues 9 and 13; benchmarks/KERNELS_NOTES.md,
session 17). Run once per code version, in one session, e.g.

    PYTHONPATH=old_tree python benchmarks/db_table_probe.py --tag before
    PYTHONPATH=. python benchmarks/db_table_probe.py --tag after

CUDA events, median of --reps after a warm-up: forward, forward+backward (every
gradient), the posterior pass (forward keeping its rows, per-position gradients) and the
Viterbi, ms, on random inputs (a 75% `allowed` mask at the gene shape); and a fingerprint
(sha1 of log Z, every gradient and the Viterbi labels) that must match between versions:
the kernels read the same values, so the results are the same bits. --genome adds B = 1,
T = 1e6, K = 1000, C = 24 forward+backward once (after a compiling call at T = 20000).
"""

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn
from semiseg.crf.inputs import check_inputs

SHAPES = ["8x20000x100x24", "16x20000x1000x13", "16x20000x4000x13", "16x20000x1000x16p",
          "16x20000x4000x13p", "64x20000x256x37p"]


def posterior(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz), wanted=("scores", "proj_start"))


def inputs(spec):
    periodic = spec.endswith("p")
    B, T, K, C = (int(v) for v in spec.rstrip("p").split("x"))
    p = leaves(B, T, K, C, period=3 if periodic else None)
    if C == 37:  # the gene shape: a sequence-like mask
        g = torch.Generator(device="cuda").manual_seed(1)
        allowed = torch.rand(B, T, C, device="cuda", generator=g) < 0.75
        return check_inputs(p["scores"], p["transition"], p["duration_bias"], None,
                            start=p["start"], end=p["end"], allowed=allowed)
    return as_x(p)


def fingerprint(x):
    h = hashlib.sha1()
    lz, saved = kn.forward(x, keep=True)
    g = kn.backward(x, saved, torch.ones_like(lz))
    for t in [lz] + [g[k] for k in sorted(g) if g[k] is not None] + [kn.viterbi(x)[1]]:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tag", default="")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--genome", action="store_true")
    a = ap.parse_args()
    print(f"{torch.cuda.get_device_name(0)}, {a.tag}: semiseg from "
          f"{os.path.dirname(os.path.dirname(kn.__file__))}\n\n| B, T, K, C | version | "
          "fwd ms | fwd+bwd ms | posterior ms | Viterbi ms | fingerprint |\n"
          "|---|---|---|---|---|---|---|", flush=True)
    for spec in a.shapes.split(","):
        x = inputs(spec)
        f = events(lambda x=x: kn.forward(x), a.reps)
        fb = events(lambda x=x: fwd_bwd(x), a.reps)
        po = events(lambda x=x: posterior(x), a.reps)
        v = events(lambda x=x: kn.viterbi(x), a.reps)
        print(f"| {spec} | {a.tag} | {f:.1f} | {fb:.1f} | {po:.1f} | {v:.1f} | "
              f"{fingerprint(x)} |", flush=True)
        del x
        torch.cuda.empty_cache()
    if a.genome:
        fwd_bwd(as_x(leaves(1, 20000, 1000, 24)))
        x = as_x(leaves(1, 1_000_000, 1000, 24))
        t = events(lambda x=x: fwd_bwd(x), 1, warmup=0)
        print(f"| 1, 1e6, 1000, 24 | {a.tag} | fwd+bwd {t / 1e3:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
