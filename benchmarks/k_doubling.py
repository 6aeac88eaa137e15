"""Issue 9's K-doubling row, static forward+backward at (16, 20000, K, 13), with knob
variants and a fingerprint of every output, to compare code versions in one run:

    PYTHONPATH=. python benchmarks/k_doubling.py [--ks 1000,2000,4000,8192] [--reps 5]
        [--variants "now;pps1:PROGRAMS_PER_SM=1;bt4k:BWD_TILE_ELEMS=4096"] [--profile]
        [--genome] [--label new] [--record]

Each variant sets module attributes of semiseg.crf.kernels (NAME=int, comma-separated)
for its runs and restores them after; the pseudo-knob END=1 passes the static transition
as a (1, C, C) one instead, which the periodic family runs (end-indexed forward chain:
the backward's crossing sums are O(K C), not O(K^2 C)). Times: CUDA events, median of --reps after a
warm-up call. fingerprint: sha1 of log Z and every gradient's bytes (two code versions
that sum the same terms in the same order print the same one). --profile: CUDA time
per kernel of one call of the first variant (torch.profiler; the two chains run side by
side, so their times add up beyond the wall clock). --genome: also issue 9's B = 1,
T = 1e6, K = 1000, C = 24 row, fwd+bwd once per variant after a call at T = 20,000 that
compiles its kernels, with its peak memory and log Z. --record appends the table to
benchmarks/RESULTS.md.
"""

import argparse
import hashlib
import os
import sys
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from periodic_kernels import as_x, events, fwd_bwd, leaves
from split_chains import genome_call

from semiseg.crf import kernels as kn


def variants(spec):
    out = []
    for item in spec.split(";"):
        name, _, sets = item.partition(":")
        knobs = {}
        for kv in filter(None, sets.split(",")):
            k, v = kv.split("=")
            knobs[k] = int(v)
        out.append((name, knobs))
    return out


def with_knobs(knobs, fn):
    knobs = {k: v for k, v in knobs.items() if k != "END"}
    old = {k: getattr(kn, k) for k in knobs}
    try:
        for k, v in knobs.items():
            setattr(kn, k, v)
        return fn()
    finally:
        for k, v in old.items():
            setattr(kn, k, v)


def fingerprint(x):
    lz, saved = kn.forward(x, keep=True)
    g = kn.backward(x, saved, torch.ones_like(lz))
    h = hashlib.sha1(lz.cpu().numpy().tobytes())
    for k in sorted(g):
        if g[k] is not None:
            h.update(g[k].contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:12]


def profile_once(x):
    from torch.profiler import ProfilerActivity, profile

    fwd_bwd(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd(x)
        torch.cuda.synchronize()
    seen = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            s = seen.setdefault(ev.name[:40], [0, 0.0])
            s[0] += 1
            s[1] += ev.device_time / 1e3
    top = sorted(seen.items(), key=lambda kv: -kv[1][1])[:8]
    return ", ".join(f"{n} x{c} {ms:.1f} ms" for n, (c, ms) in top)


def run_args(ap):
    """The options k_doubling.py and periodic_profile.py share: --reps, --variants (knob
    settings, `variants`), --profile, --label (the code's name in the table), --record."""
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", default="now")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--label", default="")
    ap.add_argument("--record", action="store_true")
    return ap


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ks", default="1000,2000,4000,8192")
    ap.add_argument("--genome", action="store_true")
    a = run_args(ap).parse_args()
    vs = variants(a.variants)
    ks = [int(k) for k in a.ks.split(",")]
    dev = torch.cuda.get_device_name(0)
    print(dev, a.label, flush=True)
    rows = [("| code | variant | B, T, K, C | fwd+bwd ms | x per doubling | fingerprint | "
            "log Z[0] |"), "|---|---|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    prof = []
    prev = {}
    for K in ks:
        B, T, C = 16, 20000, 13
        p = leaves(B, T, K, C)
        static, end = as_x(p), as_x(dict(p, transition=p["transition"][None]))
        for i, (name, knobs) in enumerate(vs):
            x = end if knobs.get("END") else static
            ms = with_knobs(knobs, lambda x=x: events(lambda: fwd_bwd(x), a.reps))
            fp = with_knobs(knobs, lambda x=x: fingerprint(x))
            lz = with_knobs(knobs, lambda x=x: kn.forward(x)[0][0].double().item())
            ratio = f"{ms / prev[name]:.2f}" if name in prev else ""
            prev[name] = ms
            rows.append(f"| {a.label} | {name} | {B}, {T}, {K}, {C} | {ms:.1f} | {ratio} | "
                        f"{fp} | {lz:.4f} |")
            print(rows[-1], flush=True)
            if a.profile and i == 0:
                prof.append(f"K = {K}: " + with_knobs(knobs, lambda x=x: profile_once(x)))
                print(prof[-1], flush=True)
        del x, static, end
        torch.cuda.empty_cache()
    if a.genome:
        rows += ["", "| code | variant | B, T, K, C | fwd+bwd s | peak GiB | log Z |",
                 "|---|---|---|---|---|---|"]
        pg, ps = leaves(1, 1_000_000, 1000, 24), leaves(1, 20000, 1000, 24)
        for name, knobs in vs:
            tr = (lambda t: t[None]) if knobs.get("END") else (lambda t: t)
            x = as_x(dict(pg, transition=tr(pg["transition"])))
            small = as_x(dict(ps, transition=tr(ps["transition"])))
            t, peak, lz = with_knobs(knobs, lambda x=x, s=small: genome_call(x, s))
            rows.append(f"| {a.label} | {name} | 1, 1000000, 1000, 24 | {t / 1e3:.2f} | "
                        f"{peak:.2f} | {lz:.6f} |")
            print(rows[-1], flush=True)
    if a.record:
        from results import append

        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        append(f"K doubling, static fwd+bwd (benchmarks/k_doubling.py) - {stamp}, {dev}",
               "`PYTHONPATH=. python " + " ".join(sys.argv) + "`", rows + [""] + prof)


if __name__ == "__main__":
    main()
