"""Where `semiseg annotate`'s wall time goes, stage by stage: the encoder (Annotator.
_encode), the semi-CRF decode (Annotator.decode: posteriors, posterior decoding and the
copies of its results to the host) and the rest (reading, host-side assembly, waits on
the writer), on the synthetic genome of annotate_throughput.py.

    PYTHONPATH=. python benchmarks/annotate_stages.py --size 10e6 --chrom-size 2.5e6 \
        --contigs 500 --max-decode-steps 20000 --batch-steps 2000000 --device cuda \
        --model semiseg/models/yeast_cds_frames.pt --source data/yeast/chrII.fa

Each timed stage synchronises the device before and after itself, so the sum is the
time of the stages run one after another (what an overlap of them could save). Prints a
table; nothing is recorded. --profile N adds a cProfile of the main thread (the writer
thread's work shows only as waits).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from annotate_throughput import source_bases, synth_genome


def genome_args(ap: argparse.ArgumentParser, size: float, batch_steps: int) -> None:
    """The synthetic genome's and annotate's arguments (annotate_throughput.synth_genome)."""
    ap.add_argument("--size", type=float, default=size)
    ap.add_argument("--chrom-size", type=float, default=2.5e6)
    ap.add_argument("--contigs", type=int, default=500)
    ap.add_argument("--model", default=os.path.join(ROOT, "semiseg", "models",
                                                    "yeast_cds_frames.pt"))
    ap.add_argument("--source", default=os.path.join(ROOT, "data", "yeast", "chrII.fa"))
    ap.add_argument("--batch-steps", type=int, default=batch_steps)
    ap.add_argument("--max-decode-steps", type=int, default=20_000)


def warmed_genome(args, prefix: str) -> tuple[str, str, dict, dict]:
    """(work directory, FASTA, {name: length}, annotate's keywords) of the synthetic
    genome, after two warm-up annotations (the first chromosome, then the whole genome:
    the contigs' shapes compile too)."""
    import semiseg.annotate as A
    from semiseg import ui

    ui.set_quiet(True)
    work = tempfile.mkdtemp(prefix=prefix)
    fasta = os.path.join(work, "genome.fa")
    lengths = synth_genome(fasta, int(args.size), int(args.chrom_size), args.contigs, 0,
                           source=source_bases(args.source))
    kw = {"device": args.device, "batch_steps": args.batch_steps,
          "max_decode_steps": args.max_decode_steps}
    A.annotate(args.model, fasta, os.path.join(work, "warm"), chroms=[next(iter(lengths))],
               **kw)
    A.annotate(args.model, fasta, os.path.join(work, "warm2"), **kw)
    return work, fasta, lengths, kw


def main() -> None:
    ap = argparse.ArgumentParser()
    genome_args(ap, 10e6, 2_000_000)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--writer", default=None, choices=["inline", "thread"],
                    help="annotate.WRITER (default: a thread on a GPU, inline on the CPU)")
    ap.add_argument("--profile", type=int, default=0,
                    help="also cProfile the main thread of one more run: its top N functions "
                         "by own time and by cumulative time")
    args = ap.parse_args()

    import semiseg.annotate as A

    A.WRITER = args.writer
    work, fasta, lengths, kw = warmed_genome(args, "stages_")
    total = sum(lengths.values())
    from semiseg.emit import LocalWriter

    spent = {"_encode": 0.0, "decode": 0.0, "submit": 0.0, "finish": 0.0}
    owner = {"_encode": A.Annotator, "decode": A.Annotator, "submit": LocalWriter,
             "finish": LocalWriter}
    sync = torch.cuda.synchronize if args.device != "cpu" else (lambda: None)

    def timed(name, fn):
        def run(*a, **k):
            sync()
            t = time.perf_counter()
            out = fn(*a, **k)
            sync()
            spent[name] += time.perf_counter() - t
            return out
        return run

    plain = {n: getattr(owner[n], n) for n in spent}
    t = time.perf_counter()
    A.annotate(args.model, fasta, os.path.join(work, "plain"), **kw)
    wall_plain = time.perf_counter() - t
    for n, fn in plain.items():
        setattr(owner[n], n, timed(n, fn))
    try:
        t = time.perf_counter()
        A.annotate(args.model, fasta, os.path.join(work, "timed"), **kw)
        wall = time.perf_counter() - t
    finally:
        for n, fn in plain.items():
            setattr(owner[n], n, fn)
    rest = wall - sum(spent.values())
    dev = torch.cuda.get_device_name() if args.device != "cpu" else "cpu"
    print(f"{dev}; genome {total:,} bp; wall without timers {wall_plain:.2f} s "
          f"({total / wall_plain:,.0f} bp/s), with timers {wall:.2f} s")
    print("| stage | s | share |")
    print("|---|---|---|")
    for n, s in [("encoder (_encode)", spent["_encode"]),
                 ("semi-CRF decode (decode)", spent["decode"]),
                 (f"handing results to the writer ({A.WRITER or 'auto'}: submit)",
                  spent["submit"]),
                 ("the writer's backlog after the last decode (finish)", spent["finish"]),
                 ("rest", rest)]:
        print(f"| {n} | {s:.2f} | {s / wall:.0%} |")
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        A.annotate(args.model, fasta, os.path.join(work, "prof"), **kw)
        sync()
        prof.disable()
        st = pstats.Stats(prof)
        st.sort_stats("tottime").print_stats(args.profile)
        st.sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
