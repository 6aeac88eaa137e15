"""Timing of the duration-dependent (K, C, C) Triton kernels against the torch backend.

    PYTHONPATH=. python benchmarks/dd_kernels.py [--commit SHA] [--configs "B,T,K,C;..."]

For each (B, T, K, C): kernels.forward, forward+backward (kernels.backward with
grad_log_z = 1) and kernels.viterbi, medians of --reps runs (CUDA events, after one
warm-up that also compiles), and the torch backend (semiseg.crf.reference,
forward+backward, 1 run) unless a 200-position probe predicts more than 60 s.
Inputs as in tests/test_gpu_kernels.py: float32 scores ~ N(0, 3^2), transition (K, C, C),
duration bias (K, C), start and end ~ N(0, 1), full lengths, no allowed mask or
projections. Prints a markdown table with the device, date and commit.

On CPU (no CUDA) it runs under triton's interpreter (set TRITON_INTERPRET=1) with
wall-clock timers: a check that the script works, not a timing.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time

import torch
from kernels import _events  # benchmarks/kernels.py, beside this script

from semiseg.crf import kernels as kn
from semiseg.crf import reference
from semiseg.crf.inputs import check_inputs

CONFIGS = [(8, 2000, 32, 8), (4, 5000, 100, 6), (32, 300, 30, 12)]
CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"


def _sync():
    if CUDA:
        torch.cuda.synchronize()


def timed(fn, reps):
    """Median seconds of fn over reps runs (CUDA events on a GPU, else wall clock)."""
    if CUDA:
        return _events(fn, reps, warmup=False)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make(B, T, K, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float32).to(DEV)
    x = check_inputs(3 * r(B, T, C), r(K, C, C), r(K, C), None, start=r(C), end=r(C))
    assert x.duration_dependent
    return x


def torch_fwd_bwd(x):
    lz, saved = reference.forward(x)
    return reference.backward(x, saved, torch.ones_like(lz))


def torch_time(x, limit=60.0, probe_T=200):
    """(seconds or None, predicted seconds) of the torch backend's forward+backward."""
    pt = min(x.T, probe_T)
    xp = x.replace(scores=x.scores[:, :pt].contiguous(), lengths=torch.full_like(x.lengths, pt))
    torch_fwd_bwd(xp)  # warm-up of the probe itself
    _sync()
    t0 = time.perf_counter()
    torch_fwd_bwd(xp)
    _sync()
    predicted = (time.perf_counter() - t0) * x.T / pt
    if predicted > limit:
        return None, predicted
    return timed(lambda: torch_fwd_bwd(x), 1), predicted


def bench(B, T, K, C, reps):
    x = make(B, T, K, C)

    def fwd_bwd():
        lz, saved = kn.forward(x)
        return kn.backward(x, saved, torch.ones_like(lz))

    row = {}
    for name, fn in (("fwd", lambda: kn.forward(x)), ("fwdbwd", fwd_bwd),
                     ("vit", lambda: kn.viterbi(x))):
        fn()  # warm-up (and compile)
        _sync()
        row[name] = timed(fn, reps)
    # sanity: the kernels' log Z against the torch backend's on the first sequence
    x1 = x.replace(scores=x.scores[:1], lengths=x.lengths[:1])
    lz_k = kn.forward(x1)[0].double().item()
    lz_t = reference.forward(x1.replace(**{k: getattr(x1, k).double() for k in
                                           ("scores", "transition", "duration_bias",
                                            "start", "end")}))[0].item()
    row["dlz"] = abs(lz_k - lz_t) / max(1.0, abs(lz_t))
    row["torch"], row["torch_pred"] = torch_time(x)
    return row


HEADER = ("| B, T, K, C | fwd ms | fwd+bwd ms | Viterbi ms | us/step fwd | positions/s "
          "(fwd+bwd) | torch fwd+bwd | torch / kernel (fwd+bwd) | rel. log Z diff (b=0, "
          "vs float64 torch) |")


def fmt(cfg, r):
    B, T, K, C = cfg
    if r["torch"] is not None:
        tt = f"{r['torch'] * 1e3:.0f} ms"
        ratio = f"{r['torch'] / r['fwdbwd']:.3g}x"
    else:
        tt, ratio = f"not run (~{r['torch_pred']:.0f} s predicted)", "-"
    return (f"| {B}, {T}, {K}, {C} | {r['fwd'] * 1e3:.2f} | {r['fwdbwd'] * 1e3:.2f} | "
            f"{r['vit'] * 1e3:.2f} | {r['fwd'] / T * 1e6:.2f} | {B * T / r['fwdbwd']:.3g} | "
            f"{tt} | {ratio} | {r['dlz']:.1e} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default=None, help='"B,T,K,C;B,T,K,C" (default: the three)')
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--commit", default="unknown", help="git rev-parse --short HEAD")
    args = ap.parse_args()
    configs = CONFIGS if args.configs is None else [
        tuple(int(v) for v in c.split(",")) for c in args.configs.split(";") if c.strip()]
    device = torch.cuda.get_device_name() if CUDA else "CPU (TRITON_INTERPRET=1, wall clock)"
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# duration-dependent kernels: {device}, {date}, commit {args.commit}, "
          f"torch {torch.__version__}, {args.reps} reps", flush=True)
    lines = []
    for cfg in configs:
        lines.append(fmt(cfg, bench(*cfg, reps=args.reps)))
        print(lines[-1], flush=True)
    print()
    print(f"device: {device}; date: {date}; commit: {args.commit}")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" |"))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
