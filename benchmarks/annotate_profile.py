"""Where `semiseg annotate`'s wall time goes: one run under cProfile, after a warm-up.

Issue 42 asks for 1 M bp/s on one GPU with the fly gene model; before changing anything,
this script says which functions the time is spent in. It annotates a warm-up region
first (the Triton kernels compile there), then the region asked for under cProfile, and
prints the functions with the most cumulative and own time. On a CUDA device the host
waits for the device wherever a result is read, so a kernel's time shows in the function
that reads it (synchronize, .cpu(), .item()).

    PYTHONPATH=. python benchmarks/annotate_profile.py --region 0-4000000 --device cuda

`--warm none` profiles the process's first call instead (a user's run: CUDA's start,
the kernels read from Triton's cache or compiled, inside the profile).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _regions(path: str, chrom: str, span: str) -> tuple[str, int]:
    """A one-line BED of chrom:span at path: (path, its bp)."""
    a, b = (int(v.replace(",", "")) for v in span.split("-"))
    with open(path, "w") as f:
        f.write(f"{chrom}\t{a}\t{b}\n")
    return path, b - a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="fly")
    ap.add_argument("--fasta", default=os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa"))
    ap.add_argument("--chrom", default="chr2R_2M_6M")
    ap.add_argument("--region", default="0-4000000")
    ap.add_argument("--warm", default="3000000-3300000",
                    help="warm-up region; none: profile a cold first call (CUDA's start, "
                         "the kernels loaded or compiled, all in the profile)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--top", type=int, default=45)
    ap.add_argument("--save", default=None, help="write the raw profile here")
    ap.add_argument("--kernels", action="store_true",
                    help="also run the region once under torch.profiler: device time by "
                         "kernel and the device's busy share of the wall")
    args = ap.parse_args()

    t = time.perf_counter()
    from semiseg import ui
    from semiseg.annotate.run import annotate

    print(f"imports (semiseg's annotate, torch): {time.perf_counter() - t:.1f} s")
    ui.set_quiet(True)
    work = tempfile.mkdtemp(prefix="semiseg_prof_")
    if args.warm != "none":
        warm, _ = _regions(os.path.join(work, "warm_region.bed"), args.chrom, args.warm)
        t = time.perf_counter()
        annotate(args.model, args.fasta, os.path.join(work, "warm"), device=args.device,
                 regions=warm)
        print(f"warm-up {args.warm}: {time.perf_counter() - t:.1f} s", flush=True)
    reg, bp = _regions(os.path.join(work, "run_region.bed"), args.chrom, args.region)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    annotate(args.model, args.fasta, os.path.join(work, "run"), device=args.device,
             regions=reg)
    prof.disable()
    wall = time.perf_counter() - t
    if args.save:
        prof.dump_stats(args.save)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    import torch
    dev = (torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\nannotate_profile: {now}, {dev}, commit {commit or '?'}, model {args.model}, "
          f"{args.chrom}:{args.region}: {wall:.1f} s under cProfile, "
          f"{bp / wall:,.0f} bp/s\n")
    for key in ("cumulative", "tottime"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        lines = s.getvalue().splitlines()
        at = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
        print(f"-- by {key} --")
        print("\n".join(ln[:160] for ln in lines[at:]))
    if args.kernels:
        _kernel_table(args, annotate, reg, work)


def _kernel_table(args, annotate, reg: str, work: str) -> None:
    """The same call under torch.profiler: each kernel's summed device time, and their
    total against the wall (how much of the run the device is busy)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU]
    if args.device.startswith("cuda"):
        acts.append(ProfilerActivity.CUDA)
    t = time.perf_counter()
    with profile(activities=acts) as prof:
        annotate(args.model, args.fasta, os.path.join(work, "run2"), device=args.device,
                 regions=reg)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
    wall = time.perf_counter() - t
    rows = [e for e in prof.key_averages() if getattr(e, "device_time_total", 0) > 0]
    rows.sort(key=lambda e: -e.device_time_total)
    busy = sum(e.self_device_time_total for e in rows) / 1e6
    print(f"\n-- device time by kernel (torch.profiler; wall {wall:.1f} s with the "
          f"profiler on, device busy {busy:.1f} s = {100 * busy / wall:.0f}%) --")
    print(f"{'self device s':>13} {'calls':>8}  name")
    for e in sorted(rows, key=lambda e: -e.self_device_time_total)[:args.top]:
        if e.self_device_time_total <= 0:
            continue
        print(f"{e.self_device_time_total / 1e6:13.3f} {e.count:8d}  {e.key[:110]}")


if __name__ == "__main__":
    main()
