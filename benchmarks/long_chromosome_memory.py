"""Peak device memory and time of the gene model's default decode on long chromosomes.

Issue 42 asks for a 50 Mb chromosome on one GPU within 16 GB. The certified gene decode
keeps some whole-sequence tensors on the device (emissions, the head's terms, the
posterior decode's max-sum); this script measures, for chromosomes of the sizes given
(the --source FASTA tiled, default the shipped fly data), the peak device memory at the
end of each stage of `semiseg annotate`'s decode and the wall time of each, so that
memory per base and its parts can be read off two or more sizes.

    PYTHONPATH=. python benchmarks/long_chromosome_memory.py --sizes 1e6,2e6,4e6

Stages (each wrapped in place; peak memory since the start of the chromosome's run):
emissions (the encoder, Annotator.emissions), terms (posterior_seams._whole_terms),
posteriors (posterior_seams.stitched_posteriors, windows and seams), max-sum (the
posterior decode's Viterbi: posterior_seams._device_viterbi, or the certified windows side by side),
and the whole run (annotate, outputs written). A stage that runs out of memory ends the
size's row with its error. Prints a Markdown table with the date, device and commit.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

STAGES = ("emissions", "terms", "posteriors", "max-sum")


def _wrap(obj, name: str, stage: str, log: dict):
    """Replace obj.name by a wrapper that records the stage's wall time (summed) and the
    device's peak memory when it returns; returns a function that restores it."""
    orig = getattr(obj, name, None)
    if orig is None:  # another version of the code: not there
        return lambda: None

    def wrapper(*a, **k):
        t = time.perf_counter()
        out = orig(*a, **k)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            log.setdefault(stage + " GB", []).append(torch.cuda.max_memory_allocated() / 2**30)
        log[stage + " s"] = log.get(stage + " s", 0.0) + time.perf_counter() - t
        return out

    setattr(obj, name, wrapper)
    return lambda: setattr(obj, name, orig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1e6,2e6,4e6", help="chromosome sizes, bp")
    ap.add_argument("--model", default="fly")
    ap.add_argument("--source", default=os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--keep", default=None,
                    help="keep each size's BED and GFF3 as KEEP/SIZE.bed, .gff3 (to compare "
                         "two versions' outputs)")
    args = ap.parse_args()

    from annotate_throughput import source_bases, synth_genome

    import semiseg.annotate.annotator as annotator
    import semiseg.annotate.posterior_seams as ps
    from semiseg import ui
    from semiseg.annotate.run import annotate
    from semiseg.errors import SemisegError

    ui.set_quiet(True)
    src = source_bases(args.source)
    work = tempfile.mkdtemp(prefix="semiseg_long_")
    warm = os.path.join(work, "warm.fa")
    synth_genome(warm, 300_000, 300_000, 0, seed=1, source=src)
    annotate(args.model, warm, os.path.join(work, "warm"), device=args.device)
    rows = []
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        fasta = os.path.join(work, f"g{size}.fa")
        synth_genome(fasta, size, size, 0, seed=0, source=src)
        log: dict = {}
        undo = [_wrap(annotator.Annotator, "emissions", "emissions", log),
                _wrap(ps, "_whole_terms", "terms", log),
                _wrap(ps, "stitched_posteriors", "posteriors", log),
                _wrap(ps, "_device_viterbi", "max-sum", log),
                _wrap(ps, "certified_viterbi", "max-sum", log),
                _wrap(ps, "parallel_certified_viterbi", "max-sum", log)]
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        err = ""
        try:
            annotate(args.model, fasta, os.path.join(work, f"out{size}"), device=args.device)
        except (RuntimeError, SemisegError) as e:  # torch.OutOfMemoryError is a RuntimeError
            err = str(e).splitlines()[0][:120]
        wall = time.perf_counter() - t
        for u in undo:
            u()
        peak = (torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available()
                else float("nan"))
        rows.append((size, log, wall, peak, err))
        os.remove(fasta)
        if args.keep and not err:
            os.makedirs(args.keep, exist_ok=True)
            for ext in ("bed", "gff3"):
                shutil.copy(os.path.join(work, f"out{size}.{ext}"),
                            os.path.join(args.keep, f"{size}.{ext}"))
        shutil.rmtree(os.path.join(work, f"out{size}"), ignore_errors=True)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"{size:,} bp: {wall:.1f} s, peak {peak:.2f} GB, peak RSS so far {rss:.1f} GB "
              f"{err}", flush=True)
    commit = os.environ.get("COMMIT") or subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        check=False).stdout.strip() or "?"
    dev = (torch.cuda.get_device_name(0) if torch.cuda.is_available() and args.device != "cpu"
           else "CPU")
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"\nlong_chromosome_memory: {now}, {dev}, commit {commit}, model {args.model}, "
          f"{os.path.relpath(args.source, ROOT)} tiled\n")
    head = ["chromosome bp", *(f"{s} peak GB / s" for s in STAGES), "run s", "bp/s",
            "run peak GB", "error"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for size, log, wall, peak, err in rows:
        cells = [f"{size:,}"]
        for s in STAGES:
            gb = log.get(s + " GB")
            cells.append("-" if gb is None else f"{max(gb):.2f} / {log[s + ' s']:.1f}")
        cells += [f"{wall:.1f}", f"{size / wall:,.0f}", f"{peak:.2f}", err or "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
