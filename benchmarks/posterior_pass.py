"""The posterior pass against training's full backward, kernel by kernel, on one GPU.

    PYTHONPATH=. python benchmarks/posterior_pass.py [--reps 5] [--tag TEXT]
        [--shapes 100x20000x256x37p3,...] [--results benchmarks/RESULTS.md]

Posteriors (annotation's label and boundary tracks, and the gene model's posterior
decoding) need only the per-position gradients of log Z (scores, proj_start); training
needs every one, the duration bias and transition sums included. For each shape
B x T x K x C (pP: periodic transitions of period P, else static) this times, with CUDA
events (median of --reps after one warm-up that also compiles):
  fwd        kernels.forward
  fwd+bwd    forward + backward with every gradient
  posterior  forward + backward(wanted=("scores", "proj_start")), as dispatch.marginals
  post. 16w  the same with the periodic backward's _bwd_kernel at 16 warps instead of
             kernels._wave_warps' choice (8 at the gene shape since session 12; periodic
             shapes only)
  viterbi    kernels.viterbi
on random inputs (scores ~ N(0, 3^2), proj_start, transition, duration bias, start and
end ~ N(0, 1), full lengths, no mask). Run it with an older semiseg first on PYTHONPATH
to time that code on the same device (its backward takes no `wanted`: "-"); --tag names
the code measured. Prints a markdown table; --results appends it (device, date, tag).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

import torch

from semiseg.crf import kernels as kn
from semiseg.crf.inputs import check_inputs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from periodic_kernels import events  # noqa: E402 (CUDA events, median ms after a warm-up)

SHAPES = "100x20000x256x37p3,16x6000x256x37p3,8x20000x100x24,64x20000x100x24"


def problem(B, T, K, C, period, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    tr = r(period, C, C) if period else r(C, C)
    return check_inputs(3 * r(B, T, C), tr, r(K, C), None, start=r(C), end=r(C),
                        proj_start=r(B, T, C))


def parse(shape: str):
    dims, _, per = shape.partition("p")
    B, T, K, C = (int(v) for v in dims.split("x"))
    return B, T, K, C, int(per) if per else None


def measure(shape: str, reps: int) -> str:
    B, T, K, C, period = parse(shape)
    x = problem(B, T, K, C, period)
    one = torch.ones(B, device="cuda")

    def full():
        lz, saved = kn.forward(x)
        return kn.backward(x, saved, one)

    def posterior():
        lz, saved = kn.forward(x)
        return kn.backward(x, saved, one, wanted=("scores", "proj_start"))

    t_f = events(lambda: kn.forward(x), reps)
    t_fb = events(full, reps)
    try:
        t_p = f"{events(posterior, reps):.1f}"
    except TypeError:  # an older backward: no `wanted`
        t_p = "-"
    t_p16 = "-"
    if period and t_p != "-":
        chosen = kn._wave_warps
        kn._wave_warps = lambda kp, cp, kernel, params=True: (
            16 if kernel == "bwd" else chosen(kp, cp, kernel, params))
        try:
            t_p16 = f"{events(posterior, reps):.1f}"
        finally:
            kn._wave_warps = chosen
    t_v = events(lambda: kn.viterbi(x), reps)
    kind = f"periodic P={period}" if period else "static"
    row = (f"| {B}, {T}, {K}, {C}, {kind} | {t_f:.1f} | {t_fb:.1f} | {t_p} | {t_p16} | "
           f"{t_v:.1f} |")
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=SHAPES)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tag", default="working tree")
    ap.add_argument("--results", default=None)
    a = ap.parse_args()
    head = [f"code: {a.tag}", "",
            "| B, T, K, C, transition | fwd ms | fwd+bwd ms (every gradient) | "
            "fwd+bwd ms (posteriors: scores, proj_start) | same, _bwd_kernel at 16 warps | "
            "Viterbi ms |",
            "|---|---|---|---|---|---|"]
    print("\n".join(head), flush=True)
    rows = []
    for shape in a.shapes.split(","):
        rows.append(measure(shape, a.reps))
        torch.cuda.empty_cache()  # the shape's tensors went with measure's frame
        print(rows[-1], flush=True)
    if a.results:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        with open(a.results, "a") as fh:
            fh.write(f"\n### posterior pass (benchmarks/posterior_pass.py) - {now}, "
                     f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n\n")
            fh.write("\n".join(head + rows) + "\n")


if __name__ == "__main__":
    main()
