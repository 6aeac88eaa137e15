"""Issue 9's periodic row, kernel by kernel: static (C, C) against periodic (3, C, C)
transitions at (8, 20000, 100, 24) and (16, 20000, 1000, 16), with knob variants and
fingerprints, to compare code versions in one run:

    PYTHONPATH=. python benchmarks/periodic_profile.py [--shapes 8x20000x100x24,...]
        [--reps 5] [--variants "now;..."] [--profile] [--label new] [--record]

Inputs as benchmarks/periodic_kernels.py's `per` section (the same seeds): the periodic
transition is the static one stacked three times plus N(0, 0.1^2). Times: CUDA events,
median of --reps after a warm-up call, of kernels.forward, forward+backward and viterbi.
fingerprint: sha1 of log Z and every gradient (k_doubling.fingerprint). --profile: CUDA
time per kernel of one forward+backward of each transition form under each variant
(torch.profiler; the two chains run side by side, so kernel times add up beyond the wall
clock). --record appends the table to benchmarks/RESULTS.md.
"""

import argparse
import os
import sys
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from k_doubling import fingerprint, profile_once, run_args, variants, with_knobs
from periodic_kernels import as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn


def forms(B, T, K, C):
    p = leaves(B, T, K, C)
    g = torch.Generator(device="cuda").manual_seed(1)
    tr3 = (torch.stack([p["transition"]] * 3)
           + 0.1 * torch.randn(3, C, C, device="cuda", generator=g))
    return {"static": as_x(p), "P=3": as_x(dict(p, transition=tr3))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="8x20000x100x24,16x20000x1000x16")
    a = run_args(ap).parse_args()
    vs = variants(a.variants)
    dev = torch.cuda.get_device_name(0)
    print(dev, a.label, flush=True)
    rows = ["| code | variant | B, T, K, C | form | fwd ms | fwd+bwd ms | Viterbi ms | "
            "fwd+bwd / static | fingerprint |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    prof = []
    for shape in a.shapes.split(","):
        B, T, K, C = (int(v) for v in shape.split("x"))
        xs = forms(B, T, K, C)
        for name, knobs in vs:
            base = None
            for form, x in xs.items():
                t = with_knobs(knobs, lambda x=x: (
                    events(lambda: kn.forward(x), a.reps),
                    events(lambda: fwd_bwd(x), a.reps),
                    events(lambda: kn.viterbi(x), a.reps)))
                fp = with_knobs(knobs, lambda x=x: fingerprint(x))
                base = base or t[1]
                rows.append(f"| {a.label} | {name} | {B}, {T}, {K}, {C} | {form} | "
                            f"{t[0]:.2f} | {t[1]:.2f} | {t[2]:.2f} | {t[1] / base:.2f}x | "
                            f"{fp} |")
                print(rows[-1], flush=True)
                if a.profile:
                    prof.append(f"{shape} {name} {form}: "
                                + with_knobs(knobs, lambda x=x: profile_once(x)))
                    print(prof[-1], flush=True)
        del xs
        torch.cuda.empty_cache()
    if a.record:
        from results import append

        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        append(f"Periodic against static, kernel by kernel (benchmarks/periodic_profile.py)"
               f" - {stamp}, {dev}",
               "`PYTHONPATH=. python " + " ".join(sys.argv) + "`", rows + [""] + prof)


if __name__ == "__main__":
    main()
