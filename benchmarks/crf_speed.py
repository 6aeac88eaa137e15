"""Speed of the semi-CRF's GPU kernels (Triton): static (C, C), periodic (P, C, C) and
duration-dependent (K, C, C) transitions across shapes, on one GPU (issues 3, 9, 42).

    PYTHONPATH=. python benchmarks/crf_speed.py [--sections shapes,kcliff,vit,host]
        [--reps 5] [--shapes "B,T,K,C;..."] [--dd-shapes "B,T,K,C;..."] [--record]

Inputs: float32 scores ~ N(0, 3^2); transition, duration bias, start, end ~ N(0, 1);
full lengths; no mask or projections. Periodic: P = 3, the static table plus noise.
Sections (medians after a warm-up that also compiles):
  shapes: kernels.forward, forward+backward (every gradient) and Viterbi, CUDA events, for
          each family at each shape; peak GPU memory of forward+backward beyond the
          inputs; positions per second (B*T / forward+backward); and, as a check, log Z
          of the first sequence's first <= 2,000 positions against the torch backend in
          float64 (relative difference).
  kcliff: static and periodic forward+backward at (16, 20000, K, 13), K = 1000 ... 8192:
          periodic / static (issue 42: <= 1.3x) and each K doubling (issue 9: <= 2.2x).
  vit:    the public API's wall clock: semiseg.crf.viterbi with `.segments` read, against
          semiseg.crf.log_partition (issue 42: <= 1.2x); also with every sequence's
          segments read as arrays (SegmentList.arrays) and walked as Python tuples.
  host:   wall clock of a small log_partition(...).sum().backward() at (32, 300, 30, 39)
          (issue 9: <= 1.5 ms); CUDA graphs as configured (SEMISEG_CUDA_GRAPHS=0: eager).
Prints Markdown tables headed by date, GPU, commit and versions; --record appends them to
benchmarks/RESULTS-log.md. Without a GPU, TRITON_INTERPRET=1 runs the kernels in Triton's
interpreter on the CPU (wall clock): a check of the script at tiny shapes, not a timing.
"""

from __future__ import annotations

import argparse
import os
import sys

import lib
import torch

from semiseg.crf import dispatch, log_partition, reference, viterbi
from semiseg.crf.inputs import check_inputs

SHAPES = [(32, 300, 30, 39), (64, 1000, 100, 24), (8, 20000, 100, 24), (16, 20000, 1000, 16),
          (64, 20000, 256, 37)]
DD_SHAPES = [(32, 300, 30, 12), (8, 2000, 32, 8), (4, 5000, 100, 6)]
KS = (1000, 2000, 4000, 8192)
VIT_SHAPES = [(32, 300, 30, 39), (64, 1000, 100, 24), (8, 20000, 100, 24), (16, 20000, 1000, 16)]
HOST_SHAPE = (32, 300, 30, 39)
kn = None  # the Triton backend (dispatch's, wherever its package lives), set by main
DEV = "cuda"  # "cpu" under TRITON_INTERPRET=1 without a GPU


def timed_ms(fn, reps):
    """Median ms: CUDA events on a GPU, else wall clock."""
    return lib.cuda_ms(fn, reps) if DEV == "cuda" else lib.wall_ms(fn, reps)


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def parse_shapes(text: str) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in s.split(",")) for s in text.split(";") if s.strip()]


def leaves(B, T, K, C, family="static", seed=0):
    """The float32 inputs of one call: a dict of the check_inputs arguments."""
    g = torch.Generator(device=DEV).manual_seed(seed)

    def r(*s):
        return torch.randn(*s, device=DEV, generator=g)

    tr = r(C, C)
    if family == "periodic":
        tr = torch.stack([tr] * 3) + 0.1 * r(3, C, C)
    elif family == "dd":
        tr = r(K, C, C)
    return {"scores": 3 * r(B, T, C), "transition": tr, "duration_bias": r(K, C),
            "start": r(C), "end": r(C)}


def as_x(p):
    return check_inputs(p["scores"], p["transition"], p["duration_bias"], None,
                        start=p["start"], end=p["end"])


def fwd_bwd(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz))


def logz_check(p, n=2000):
    """Relative |log Z| difference, kernels (float32) vs torch backend (float64), on the
    first sequence's first n positions."""
    q = {k: (v[:1, :n].contiguous() if k == "scores" else v) for k, v in p.items()}
    lz = kn.forward(as_x(q))[0].double().item()
    want = reference.forward(as_x({k: v.double() for k, v in q.items()}))[0].item()
    return abs(lz - want) / max(1.0, abs(want))


def section_shapes(args):
    rows = []
    todo = [(f, s) for s in args.shapes for f in ("static", "periodic")]
    todo += [("dd", s) for s in args.dd_shapes]
    for family, (B, T, K, C) in todo:
        p = leaves(B, T, K, C, family)
        x = as_x(p)
        why = kn.supports(x)
        if why is not None:
            rows.append(f"| {family} | {B}, {T}, {K}, {C} | not run: {why} |||||||")
            print(rows[-1], flush=True)
            continue
        reps = args.reps if B * T <= 400_000 else max(3, args.reps // 2)
        t_f = timed_ms(lambda x=x: kn.forward(x), reps)
        cuda = DEV == "cuda"
        sync()
        base = torch.cuda.memory_allocated() if cuda else 0
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t_fb = timed_ms(lambda x=x: fwd_bwd(x), reps)
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else float("nan")
        t_v = timed_ms(lambda x=x: kn.viterbi(x), reps)
        rows.append(f"| {family} | {B}, {T}, {K}, {C} | {t_f:.2f} | {t_fb:.2f} | {t_v:.2f} | "
                    f"{t_f / T * 1e3:.2f} | {peak:.0f} | {B * T / t_fb * 1e3:.3g} | "
                    f"{logz_check(p):.1e} |")
        print(rows[-1], flush=True)
    head = ("| family | B, T, K, C | fwd ms | fwd+bwd ms | Viterbi ms | us/step fwd | peak MB "
            "fwd+bwd | positions/s fwd+bwd | log Z rel. diff vs float64 |\n"
            "|---|---|---|---|---|---|---|---|---|")
    return head, rows


def section_kcliff(args):
    rows, prev = [], None
    for K in args.ks:
        B, T, C = args.kcliff_btc
        t = {}
        for family in ("static", "periodic"):
            x = as_x(leaves(B, T, K, C, family))
            why = kn.supports(x)
            t[family] = (None, why) if why else (
                timed_ms(lambda x=x: fwd_bwd(x), max(1, args.reps // 2)), None)
        s, q = t["static"][0], t["periodic"][0]

        def cell(v, why):
            return f"{v:.1f}" if v is not None else f"not run: {why}"

        ratio = f"{q / s:.2f}x" if s and q else "-"
        dbl = f"{s / prev:.2f}x" if s and prev else "-"
        rows.append(f"| {B}, {T}, {K}, {C} | {cell(*t['static'])} | {cell(*t['periodic'])} | "
                    f"{ratio} | {dbl} |")
        print(rows[-1], flush=True)
        prev = s
    head = ("| B, T, K, C | static fwd+bwd ms | periodic fwd+bwd ms | periodic / static "
            "(goal <= 1.3x) | static vs previous K (goal <= 2.2x) |\n|---|---|---|---|---|")
    return head, rows


def section_vit(args):
    rows = []
    for B, T, K, C in args.vit_shapes:
        p = leaves(B, T, K, C)
        a = (p["scores"], p["transition"], p["duration_bias"])
        kw = {"start": p["start"], "end": p["end"], "backend": "triton"}
        n = args.reps if B * T < 100_000 else max(3, args.reps // 2)
        t_f = lib.wall_ms(lambda a=a, kw=kw: log_partition(*a, **kw), n, 2, sync)
        t_l = lib.wall_ms(lambda a=a, kw=kw: viterbi(*a, **kw).labels, n, 2, sync)
        t_s = lib.wall_ms(lambda a=a, kw=kw: viterbi(*a, **kw).segments, n, 2, sync)
        # the segments on the host as arrays (what .segments holds), and as Python tuples
        t_a = lib.wall_ms(lambda a=a, kw=kw: [sl.arrays() for sl in
                                              viterbi(*a, **kw).segments], n, 2, sync)
        t_t = lib.wall_ms(lambda a=a, kw=kw: [list(sl) for sl in
                                              viterbi(*a, **kw).segments], n, 2, sync)
        rows.append(f"| {B}, {T}, {K}, {C} | {t_f:.2f} | {t_l:.2f} | {t_s:.2f} | "
                    f"{t_s / t_f:.2f}x | {t_a:.2f} | {t_t:.2f} |")
        print(rows[-1], flush=True)
    head = ("| B, T, K, C | log_partition ms | viterbi().labels ms | viterbi().segments ms | "
            "segments / forward (goal <= 1.2x) | every sequence's arrays() ms | every "
            "segment as a tuple ms |\n|---|---|---|---|---|---|---|")
    return head, rows


def section_host(args):
    B, T, K, C = args.host_shape
    p = leaves(B, T, K, C)
    sc = p["scores"].clone().requires_grad_(True)
    req = {k: v.clone().requires_grad_(True) for k, v in p.items() if k != "scores"}

    def call():
        log_partition(sc, req["transition"], req["duration_bias"], start=req["start"],
                      end=req["end"], backend="triton").sum().backward()

    reps = 30 * args.reps
    wall = lib.wall_ms(call, reps, 3, sync)
    rows = [f"| {B}, {T}, {K}, {C} | {wall:.3f} | {timed_ms(call, reps):.3f} |"]
    print(rows[-1], flush=True)
    head = ("| B, T, K, C | log_partition + backward, wall ms (goal <= 1.5) | GPU events ms "
            "|\n|---|---|---|")
    return head, rows


SECTIONS = {"shapes": ("families across shapes (CUDA events)", section_shapes),
            "kcliff": ("periodic against static, and K doubling (CUDA events)", section_kcliff),
            "vit": ("Viterbi with segments against the forward (wall clock)", section_vit),
            "host": ("a small call's wall clock", section_host)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="shapes,kcliff,vit,host")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shapes", type=parse_shapes, default=SHAPES,
                    help='static and periodic shapes, "B,T,K,C;..."')
    ap.add_argument("--dd-shapes", type=parse_shapes, default=DD_SHAPES,
                    help='duration-dependent shapes, "B,T,K,C;..."')
    ap.add_argument("--vit-shapes", type=parse_shapes, default=VIT_SHAPES)
    ap.add_argument("--host-shape", type=lambda t: parse_shapes(t)[0], default=HOST_SHAPE)
    ap.add_argument("--ks", type=lambda t: tuple(int(k) for k in t.split(",")), default=KS)
    ap.add_argument("--kcliff-btc", type=lambda t: tuple(int(v) for v in t.split(",")),
                    default=(16, 20000, 13), help="B,T,C of the kcliff section")
    ap.add_argument("--record", action="store_true", help="append to RESULTS-log.md")
    args = ap.parse_args()
    global kn, DEV
    if not torch.cuda.is_available():
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("crf_speed.py: needs a CUDA GPU, or TRITON_INTERPRET=1 to check the script "
                  "on the CPU (the CPU backend: cpu_backend.py)", file=sys.stderr)
            sys.exit(3)
        DEV = "cpu"
    kn = dispatch._triton_module()
    head = lib.header("benchmarks/crf_speed.py", DEV,
                      "PYTHONPATH=. python " + " ".join(sys.argv))
    print(head, flush=True)
    tables = []
    for key in args.sections.split(","):
        label, fn = SECTIONS[key]
        print(f"\n### {label}", flush=True)
        top, rows = fn(args)
        tables.append(f"### {label}\n\n{top}\n" + "\n".join(rows))
        print(top + "\n" + "\n".join(rows), flush=True)
    if args.record:
        lib.append("Semi-CRF kernel speed (benchmarks/crf_speed.py)", head, tables)


if __name__ == "__main__":
    main()
