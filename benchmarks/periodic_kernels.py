"""Issue 9 on one GPU: periodic (P = 3) vs static Triton kernels, Viterbi with its segments
vs the forward (wall clock), host time of a small forward+backward, and the K cliff.

    PYTHONPATH=. python benchmarks/periodic_kernels.py [--sections per,vit,host,kcliff]
        [--commit SHA] [--date 2026-11-23] [--results benchmarks/RESULTS.md] [--reps 5]

Sections (all medians; inputs: scores ~ N(0, 3^2) float32, transition, duration bias,
start, end ~ N(0, 1), full lengths, no mask or projections):
  per:    kernels.forward, forward+backward and viterbi, CUDA events (one warm-up that also
          compiles), static (C, C) against periodic (3, C, C) transitions on the same
          scores, at (8, 20000, 100, 24), (16, 20000, 1000, 16) and the 1-bp gene model's
          shape (64, 20000, 256, 37); goal periodic <= 1.3x.
  vit:    wall clock (host timer, synchronised) of the public API: semiseg.crf.viterbi
          with `.segments` read (and, separately, with only `.labels`), against
          semiseg.crf.log_partition (forward only), at the four shapes of issue 9;
          goal <= 1.2x the forward.
  host:   wall clock of log_partition(...).sum().backward() (autograd, the user's path)
          and of kernels.forward + kernels.backward at (32, 300, 30, 39), with the GPU time
          of the same call (CUDA events around it) and the host time per call with the GPU
          running free; goal wall <= 1.5 ms. Eager (kernels.graphs off) and with
          CUDA graphs (the default for calls this small).
  kcliff: static forward+backward at (16, 20000, K, 13), K = 1000, 2000, 4000, 8192
          (CUDA events; shapes the kernels refuse are reported as such); goal each
          doubling <= 2.2x.
Prints markdown tables; with --results appends them (device, date, commit) to that file.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from semiseg.crf import kernels as kn
from semiseg.crf import log_partition, viterbi
from semiseg.crf.inputs import check_inputs
from semiseg.crf.kernels import graphs


def sync():
    torch.cuda.synchronize()


def events(fn, reps, warmup=1):
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        sync()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def wall(fn, reps, warmup=2):
    """Median wall-clock ms of fn() followed by a device synchronisation."""
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def host_only(fn, reps):
    """CPU ms per call while the GPU runs free (no synchronisation inside the loop)."""
    fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) / reps * 1e3


def leaves(B, T, K, C, period=None, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    scores = 3 * r(B, T, C)
    tr_static = r(C, C)
    tr = r(period, C, C) if period else tr_static
    return {"scores": scores, "transition": tr, "duration_bias": r(K, C),
            "start": r(C), "end": r(C)}


def as_x(p):
    return check_inputs(p["scores"], p["transition"], p["duration_bias"], None,
                        start=p["start"], end=p["end"])


def fwd_bwd(x):
    """forward + backward as autograd runs them (keep=True: a backward follows)."""
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz))


def against_float64(p):
    """Every gradient of the kernels on the float32 leaves p (leaves()) against the torch
    backend in float64, and two runs compared: (bitwise equal, log Z max abs difference,
    "name max-abs-difference, ..." over the gradients)."""
    from semiseg.crf import reference

    x = as_x(p)
    g1, g2 = fwd_bwd(x), fwd_bwd(x)
    same = all(torch.equal(g1[k], g2[k]) for k in g1 if g1[k] is not None)
    x64 = as_x({k: v.double() for k, v in p.items()})
    lz64, saved = reference.forward(x64)
    want = reference.backward(x64, saved, torch.ones_like(lz64))
    lz = (kn.forward(x)[0].double() - lz64).abs().max().item()
    diffs = ", ".join(f"{k} {(g1[k].double() - v).abs().max().item():.2e}"
                      for k, v in want.items() if v is not None and g1.get(k) is not None)
    return same, lz, diffs


def section_per(reps):
    rows = []
    for B, T, K, C in [(8, 20000, 100, 24), (16, 20000, 1000, 16), (64, 20000, 256, 37)]:
        p = leaves(B, T, K, C)
        res = {}
        for name, tr in (("static", p["transition"]),
                         ("periodic P=3", torch.stack([p["transition"]] * 3)
                          + 0.1 * torch.randn(3, C, C, device="cuda"))):
            x = as_x(dict(p, transition=tr))
            assert x.periodic == (name != "static")
            res[name] = (events(lambda x=x: kn.forward(x), reps),
                         events(lambda x=x: fwd_bwd(x), reps),
                         events(lambda x=x: kn.viterbi(x), reps))
        s, q = res["static"], res["periodic P=3"]
        rows.append(f"| {B}, {T}, {K}, {C} | {s[0]:.2f} / {q[0]:.2f} ({q[0] / s[0]:.2f}x) | "
                    f"{s[1]:.2f} / {q[1]:.2f} ({q[1] / s[1]:.2f}x) | "
                    f"{s[2]:.2f} / {q[2]:.2f} ({q[2] / s[2]:.2f}x) |")
        print(rows[-1], flush=True)
    head = ("| B, T, K, C | fwd ms static / periodic | fwd+bwd ms static / periodic (goal "
            "<= 1.3x) | Viterbi ms static / periodic |\n|---|---|---|---|")
    return head, rows


def section_vit(reps):
    rows = []
    for B, T, K, C in [(32, 300, 30, 39), (64, 1000, 100, 24), (8, 20000, 100, 24),
                       (16, 20000, 1000, 16)]:
        p = leaves(B, T, K, C)
        args = (p["scores"], p["transition"], p["duration_bias"])
        kw = {"start": p["start"], "end": p["end"]}
        n = reps if B * T < 100_000 else max(3, reps // 2)
        t_f = wall(lambda: log_partition(*args, **kw), n)
        t_l = wall(lambda: viterbi(*args, **kw).labels, n)
        t_s = wall(lambda: viterbi(*args, **kw).segments, n)
        seg = viterbi(*args, **kw)
        nseg = sum(len(s) for s in seg.segments)
        t_t = (wall(lambda: viterbi(*args, **kw).segment_tensors(), n)
               if hasattr(seg, "segment_tensors") else float("nan"))
        rows.append(f"| {B}, {T}, {K}, {C} | {t_f:.2f} | {t_l:.2f} | {t_t:.2f} | {t_s:.2f} "
                    f"| {t_s / t_f:.2f}x | {nseg} |")
        print(rows[-1], flush=True)
    head = ("| B, T, K, C | forward ms (log_partition) | Viterbi ms, .labels | Viterbi ms, "
            ".segment_tensors() | Viterbi ms, .segments | Viterbi+segments / forward (goal "
            "<= 1.2x) | segments |\n|---|---|---|---|---|---|---|")
    return head, rows


def section_host(reps):
    B, T, K, C = 32, 300, 30, 39
    p = leaves(B, T, K, C)
    x = as_x(p)
    req = {k: v.clone().requires_grad_(True) for k, v in p.items() if k != "scores"}
    sc = p["scores"].clone().requires_grad_(True)

    def api():
        lz = log_partition(sc, req["transition"], req["duration_bias"], start=req["start"],
                           end=req["end"])
        lz.sum().backward()

    def direct():
        fwd_bwd(x)

    rows = []
    for graphed in (False, True):
        graphs.ENABLED = graphed
        how = "CUDA graphs" if graphed else "eager"
        for name, fn in (("log_partition + autograd backward", api),
                         ("kernels.forward + kernels.backward", direct)):
            rows.append(f"| {name}, {how} | {wall(fn, reps * 6):.3f} | "
                        f"{events(fn, reps * 6):.3f} | {host_only(fn, reps * 6):.3f} |")
            print(rows[-1], flush=True)
    graphs.ENABLED = True
    head = ("| (32, 300, 30, 39) fwd+bwd | wall ms (goal <= 1.5) | GPU events ms | host ms per "
            "call, GPU free |\n|---|---|---|---|")
    return head, rows


def section_kcliff(reps):
    rows = []
    prev = None
    for K in (1000, 2000, 4000, 8192):
        B, T, C = 16, 20000, 13
        x = as_x(leaves(B, T, K, C))
        why = kn.supports(x)
        if why is not None:
            rows.append(f"| {B}, {T}, {K}, {C} | not run: {why} | - |")
            print(rows[-1], flush=True)
            prev = None
            continue
        t = events(lambda x=x: fwd_bwd(x), max(1, reps // 2))
        ratio = f"{t / prev:.2f}x" if prev else "-"
        rows.append(f"| {B}, {T}, {K}, {C} | {t:.1f} | {ratio} |")
        print(rows[-1], flush=True)
        prev = t
    head = ("| B, T, K, C (static) | fwd+bwd ms | vs previous K (goal <= 2.2x) |\n"
            "|---|---|---|")
    return head, rows


SECTIONS = {"per": ("periodic P=3 vs static, kernels (CUDA events)", section_per),
            "vit": ("Viterbi with segments vs forward, public API (wall clock)", section_vit),
            "host": ("host time of a small forward+backward (wall clock)", section_host),
            "kcliff": ("static forward+backward against K (CUDA events)", section_kcliff)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default="per,vit,host,kcliff")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--date", default="2026-11-23")
    ap.add_argument("--results", default=None, help="append the tables to this file")
    args = ap.parse_args()
    device = torch.cuda.get_device_name(0)
    import triton

    title = (f"## issue 9 kernels (benchmarks/periodic_kernels.py) - {args.date}, commit "
             f"{args.commit}, {device}, torch {torch.__version__}, triton {triton.__version__}")
    print(title, flush=True)
    out = [title, "",
           f"Command: `PYTHONPATH=. python benchmarks/periodic_kernels.py --sections "
           f"{args.sections} --reps {args.reps}`. Medians.", ""]
    for key in args.sections.split(","):
        label, fn = SECTIONS[key]
        print(f"\n### {label}", flush=True)
        head, rows = fn(args.reps)
        out += [f"### {label}", head, *rows, ""]
        print(head)
        print("\n".join(rows), flush=True)
    if args.results:
        with open(args.results, "a") as fh:
            fh.write("\n" + "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
