"""Warps per program for the Triton kernels, measured (benchmarks/KERNELS_NOTES.md,
"Warps per kernel"). Two sections, each a markdown table on stdout:

    PYTHONPATH=. python benchmarks/warps_probe.py [--sections all,wave]

all:  every kernel of a call at 16 and at 32 warps (kernels.WARPS), forward, forward +
      backward and Viterbi (CUDA events, median of 3; random inputs as in
      periodic_kernels.py), at static and periodic shapes with KP x CP = 16384, with
      log Z's bitwise equality and the largest gradient difference between the two.
wave: the periodic backward's two wave kernels (recompute, _bwd_kernel END) at 16 or 32
      warps each, at the gene model's shape (B x 20000, K 256, C 37, P 3), then the
      periodic Viterbi at 16 warps against kernels._viterbi_per_warps' choice.
rev:  the periodic family's reversed chain (_fwd_kernel NP > 1: the forward's and the
      backward's halves and the Viterbi's) at 4, 8, 16 and 32 warps (kernels.REV_WARPS),
      every other kernel by its rule: forward, forward + backward and Viterbi (CUDA
      events, median of 3) at issue 9's periodic shapes and the gene model's, with the
      largest log Z and gradient differences against the rule's run.
static: every kernel of a static call at 8, 16 and 32 warps (kernels.WARPS) against the
      rule, the same three timings, at issue 9's static shapes and K = 2000.
svit: the static Viterbi alone at 4, 8 and 16 warps against the rule (kernels.WARPS), at
      KP x CP = 16384 shapes, with its labels compared; and the static forward+backward at
      (16, 20000, 2000, 13) at 32 warps (one timed call).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves

from semiseg.crf import kernels as kn


def section_all():
    print("| B, T, K, C, transition | fwd ms 16 / 32 warps | fwd+bwd ms 16 / 32 | Viterbi ms "
          "16 / 32 | log Z bitwise equal | max abs diff of d/d scores |\n|---|---|---|---|---|---|")
    shapes = [(16, 20000, 1000, 16, None), (16, 20000, 1000, 16, 3), (8, 20000, 512, 24, None),
              (8, 20000, 512, 24, 3), (64, 20000, 256, 37, 3), (100, 20000, 256, 37, 3)]
    for B, T, K, C, P in shapes:
        x = as_x(leaves(B, T, K, C, period=P))
        out = {}
        for w in (16, 32):
            kn.WARPS = w
            out[w] = (events(lambda x=x: kn.forward(x), 3), events(lambda x=x: fwd_bwd(x), 3),
                      events(lambda x=x: kn.viterbi(x), 3))
            out[f"g{w}"] = (kn.forward(x)[0], fwd_bwd(x)["scores"])
        kn.WARPS = None
        same = torch.equal(out["g16"][0], out["g32"][0])
        dg = (out["g16"][1] - out["g32"][1]).abs().max().item()
        a, b = out[16], out[32]
        print(f"| {B}, {T}, {K}, {C}, {'static' if P is None else 'P=3'} | "
              + " | ".join(f"{a[i]:.1f} / {b[i]:.1f} ({a[i] / b[i]:.2f}x)" for i in range(3))
              + f" | {same} | {dg:.1e} |", flush=True)
        del x, out
        torch.cuda.empty_cache()


def section_wave():
    orig = kn._wave_warps
    print("| B, T, K, C | recompute / bwd warps | fwd+bwd ms | max abs diff of d/d scores vs "
          "16/16 | d/d transition bitwise equal |\n|---|---|---|---|---|")
    for B in (64, 100):
        x = as_x(leaves(B, 20000, 256, 37, period=3))
        ref = None
        for rec, bwd in ((16, 16), (None, None), (16, 32), (32, 16)):
            if rec is None:
                kn._wave_warps = orig
                name = "rule: " + "/".join(str(orig(256, 64, k)) for k in ("recompute", "bwd"))
            else:
                kn._wave_warps = (lambda KP, CP, k, params=True, rec=rec, bwd=bwd:
                                  rec if k == "recompute" else bwd)
                name = f"{rec}/{bwd}"
            t = events(lambda x=x: fwd_bwd(x), 3)
            g = fwd_bwd(x)
            ref = g if ref is None else ref
            d = (g["scores"] - ref["scores"]).abs().max().item()
            print(f"| {B}, 20000, 256, 37 | {name} | {t:.1f} | {d:.1e} | "
                  f"{torch.equal(g['transition'], ref['transition'])} |", flush=True)
        kn._wave_warps = orig
        del x, ref, g
        torch.cuda.empty_cache()
    print("| B, T, K, C | Viterbi ms, 16 warps | Viterbi ms, rule | rule's warps | same path "
          "|\n|---|---|---|---|---|")
    for B, T, K, C in ((16, 20000, 1000, 16), (8, 20000, 512, 24), (100, 20000, 256, 37)):
        x = as_x(leaves(B, T, K, C, period=3))
        kn.WARPS = 16
        a, va = events(lambda x=x: kn.viterbi(x), 3), kn.viterbi(x)
        kn.WARPS = None
        b, vb = events(lambda x=x: kn.viterbi(x), 3), kn.viterbi(x)
        KP, CP = kn._shape(x)
        same = torch.equal(va[1], vb[1]) and torch.equal(va[0], vb[0])
        print(f"| {B}, {T}, {K}, {C} | {a:.1f} | {b:.1f} | {kn._viterbi_per_warps(KP, CP)} | "
              f"{same} |", flush=True)
        del x
        torch.cuda.empty_cache()


def _sweep(shapes, period, knob, counts):
    """Rows of fwd / fwd+bwd / Viterbi ms with kn.<knob> at each of `counts` (None = the
    rule), and the largest log Z and d/d scores differences and Viterbi label equality
    against the rule's run."""
    for B, T, K, C in shapes:
        x = as_x(leaves(B, T, K, C, period=period))
        KP, CP = kn._shape(x)
        reps = 1 if K >= 2000 else 3
        ref = None
        for w in counts:
            setattr(kn, knob, w)
            t = (events(lambda x=x: kn.forward(x), reps),
                 events(lambda x=x: fwd_bwd(x), reps),
                 events(lambda x=x: kn.viterbi(x), reps))
            out = (kn.forward(x)[0], fwd_bwd(x)["scores"], kn.viterbi(x)[1])
            ref = out if ref is None else ref
            name = f"rule ({kn._warps(KP, CP)})" if w is None else str(w)
            dz = (out[0] - ref[0]).abs().max().item()
            dg = (out[1] - ref[1]).abs().max().item()
            print(f"| {B}, {T}, {K}, {C} | {name} | {t[0]:.1f} | {t[1]:.1f} | {t[2]:.1f} | "
                  f"{dz:.1e} / {dg:.1e} | {torch.equal(out[2], ref[2])} |", flush=True)
        setattr(kn, knob, None)
        del x, ref, out
        torch.cuda.empty_cache()


def section_rev():
    print("| B, T, K, C, P=3 | reversed chain warps | fwd ms | fwd+bwd ms | Viterbi ms | "
          "max abs diff log Z / d/d scores vs rule | Viterbi labels equal |\n"
          "|---|---|---|---|---|---|---|")
    _sweep(((8, 20000, 100, 24), (16, 20000, 1000, 16), (64, 20000, 256, 37)), 3,
           "REV_WARPS", (None, 4, 8, 16, 32))


def section_static():
    print("| B, T, K, C, static | warps | fwd ms | fwd+bwd ms | Viterbi ms | max abs diff "
          "log Z / d/d scores vs rule | Viterbi labels equal |\n|---|---|---|---|---|---|---|")
    _sweep(((8, 20000, 100, 24), (16, 20000, 1000, 16), (16, 20000, 2000, 13)), None,
           "WARPS", (None, 8, 16, 32))


def section_svit():
    print("| B, T, K, C, static | warps | Viterbi ms | labels equal to the rule's |\n"
          "|---|---|---|---|")
    for B, T, K, C in ((16, 20000, 1000, 16), (16, 20000, 512, 32), (64, 20000, 256, 37)):
        x = as_x(leaves(B, T, K, C))
        KP, CP = kn._shape(x)
        ref = None
        for w in (None, 4, 8, 16):
            kn.WARPS = w
            t, lab = events(lambda x=x: kn.viterbi(x), 3), kn.viterbi(x)[1]
            ref = lab if ref is None else ref
            name = f"rule ({kn._warps(KP, CP)})" if w is None else str(w)
            print(f"| {B}, {T}, {K}, {C} | {name} | {t:.1f} | {torch.equal(lab, ref)} |",
                  flush=True)
        kn.WARPS = None
        del x, ref, lab
        torch.cuda.empty_cache()
    x = as_x(leaves(16, 20000, 2000, 13))
    kn.WARPS = 32
    print(f"| 16, 20000, 2000, 13, fwd+bwd, 32 warps | {events(lambda: fwd_bwd(x), 1):.1f} ms |",
          flush=True)
    kn.WARPS = None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="all,wave")
    args = ap.parse_args()
    for s in args.sections.split(","):
        {"all": section_all, "wave": section_wave, "rev": section_rev,
         "static": section_static, "svit": section_svit}[s]()


if __name__ == "__main__":
    main()
