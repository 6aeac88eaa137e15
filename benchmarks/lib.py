"""Small helpers shared by the maintained benchmarks: the header every result carries
(date, device, commit, versions), median timers, and appending a section to a results
file. Import it from a script in benchmarks/ (its folder is on sys.path when the script
runs).
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LOG = os.path.join(HERE, "RESULTS-log.md")


def commit(tree: str | None = None) -> str:
    """$COMMIT when set (a copy's own git may be stale: the GPU machine), else the
    checkout's short commit (this one, or the checkout at `tree`), marked when the
    working tree differs from it."""
    if os.environ.get("COMMIT") and tree is None:
        return os.environ["COMMIT"]

    def git(*a):
        return subprocess.run(["git", *a], capture_output=True, check=False, text=True,
                              cwd=tree or HERE).stdout.strip()

    out = git("rev-parse", "--short", "HEAD")
    if out and git("status", "--porcelain", "--untracked-files=no"):
        out += " (working tree differs)"
    return out or "unknown"


def device_name(device: str = "cuda") -> str:
    """The GPU's name for a CUDA device, else the CPU's model and core count."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores"


def annotation_rows(path: str, scores: bool = True) -> list[str]:
    """The data rows of an annotate BED or GFF3 (its provenance lines left out: "#" and
    track lines name the command, prefix and date); scores=False blanks the score column
    (BED 5th, GFF3 6th), which float32 rounding may move in the last digit."""
    col = 5 if path.endswith(".gff3") else 4
    out = []
    with open(path) as fh:
        for ln in fh:
            if ln.startswith(("#", "track ")):
                continue
            if not scores:
                f = ln.split("\t")
                if len(f) > col:
                    f[col] = "."
                ln = "\t".join(f)
            out.append(ln)
    return out


def header(script: str, device: str, command: str) -> str:
    """`date UTC, device, commit, torch (triton)` and the command, as one Markdown block."""
    import torch

    versions = f"torch {torch.__version__}"
    try:
        import triton

        versions += f", triton {triton.__version__}"
    except ImportError:
        pass
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{script}: {date}, {device_name(device)}, commit {commit()}, {versions}.\n"
            f"Command: `{command}`")


def cuda_ms(fn, reps: int, warmup: int = 1) -> float:
    """Median milliseconds of fn() by CUDA events, after `warmup` untimed calls."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def wall_ms(fn, reps: int, warmup: int = 1, sync=None) -> float:
    """Median wall-clock milliseconds of fn() (then sync(), if given, inside the timing)."""
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def append(title: str, head: str, tables: list[str], path: str = LOG) -> None:
    """Append `## title`, the header block and the tables to `path` (the dated log by
    default; copy a run into RESULTS.md's current table by hand when it replaces it)."""
    with open(path, "a") as fh:
        fh.write(f"\n## {title}\n\n{head}\n\n" + "\n\n".join(tables) + "\n")
