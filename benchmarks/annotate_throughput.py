"""Annotation throughput (bp/s) of `semiseg annotate` on a synthetic genome.

    PYTHONPATH=. python benchmarks/annotate_throughput.py --size 100e6         # one GPU
    PYTHONPATH=. python benchmarks/annotate_throughput.py --size 2e5 --device cpu
    PYTHONPATH=. python benchmarks/annotate_throughput.py --size 10e6 \
        --model semiseg/models/yeast_cds_frames.pt --source data/yeast/chrII.fa

The genome: `--size` bp of random sequence (or of `--source`'s sequence tiled), as
chromosomes of `--chrom-size` bp (the last one shorter) plus `--contigs` short contigs of
200-5,000 bp (a fragmented assembly's tail). The model: `--model` (a trained checkpoint)
or `--config` randomly initialised (default configs/gene_structure.yaml: the 1-bp
reading-frame gene model). The decoder's work does not depend on training, but the
output's does: a trained model's posteriors are near 0 or 1 over long runs, which the
bigWigs store as one entry per run (annotate.signal_precision), while a random model's
change at every base (the worst case for writing). For each `--batch-steps` value
(compared in one run) the whole genome is annotated `--repeats` times after a warm-up on
the first chromosome, all outputs written (BED, GFF3, bigWigs); the table gives the median
bp/s and the peak memory. Rows are appended to benchmarks/RESULTS.md with the date, commit
and device unless --no-record.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np
import torch


def source_bases(path: str | None) -> np.ndarray | None:
    """The bases of every sequence of a FASTA, upper case, as one uint8 array (None: no
    source, random sequence)."""
    if not path:
        return None
    from semiseg.genome import Fasta

    with Fasta(path) as fa:
        return np.frombuffer("".join(fa.fetch(c) for c in fa.chrom_sizes).upper().encode(),
                             np.uint8)


def synth_genome(path: str, size: int, chrom_size: int, contigs: int, seed: int,
                 source: np.ndarray | None = None) -> dict:
    """A FASTA of random sequence, or of `source` (uint8 bases) tiled from a random offset
    for each sequence; returns {name: length}."""
    rng = np.random.default_rng(seed)
    lengths = {}
    small = [int(n) for n in rng.integers(200, 5001, contigs)]
    left = max(0, size - sum(small))
    i = 0
    while left > 0:
        lengths[f"chr{i + 1}"] = min(chrom_size, left)
        left -= lengths[f"chr{i + 1}"]
        i += 1
    lengths.update({f"contig{j}": n for j, n in enumerate(small)})
    alphabet = np.frombuffer(b"ACGT", np.uint8)
    with open(path, "wb") as fh:
        for name, n in lengths.items():
            fh.write(f">{name}\n".encode())
            off = int(rng.integers(0, len(source))) if source is not None else 0
            chunk = 60 << 18  # ~15.7 Mb at a time, a whole number of 60-bp lines
            for lo in range(0, n, chunk):
                m = min(n, lo + chunk) - lo
                if source is None:
                    seq = alphabet[rng.integers(0, 4, m)]
                else:
                    seq = source[np.arange(off + lo, off + lo + m) % len(source)]
                pad = (-len(seq)) % 60
                lines = np.concatenate([seq, np.full(pad, 0, np.uint8)]).reshape(-1, 60)
                lines = np.concatenate([lines, np.full((len(lines), 1), 10, np.uint8)], 1)
                text = lines.tobytes()
                if pad:
                    text = text[:-(pad + 1)] + b"\n"
                fh.write(text)
    return lengths


def random_checkpoint(config: str, fasta: str, path: str) -> None:
    """A checkpoint of the config's model, randomly initialised, for this FASTA."""
    from semiseg import __version__
    from semiseg.checkpoint import CHECKPOINT_FORMAT, build_model
    from semiseg.config.load import load_config
    from semiseg.genome import Fasta, GenomeData, load_scheme
    from semiseg.model import model_hash
    from semiseg.train.data import feature_columns

    cfg = load_config(config, [f"inputs.fasta={fasta}", "inputs.tracks={}"])
    scheme = load_scheme(cfg.labels.scheme)
    data = GenomeData(Fasta(fasta), tracks=[], annotation=None,
                      resolution=cfg.inputs.bin_size, softmask=cfg.inputs.softmask)
    columns = feature_columns(data.feature_names, cfg.inputs.sequence)
    torch.manual_seed(0)
    model, _ = build_model(cfg, len(columns), len(scheme.names))
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    torch.save({"format": CHECKPOINT_FORMAT, "semiseg_version": __version__, "epoch": 0,
                "model": sd, "model_hash": model_hash(sd), "config": cfg.to_dict(),
                "labels": scheme.to_dict(), "genome": data.config(),
                "n_features": len(columns), "columns": columns,
                "feature_names": [data.feature_names[i] for i in columns]}, path)


def device_name(device: str) -> str:
    if device != "cpu" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({os.cpu_count()} cores visible, {torch.get_num_threads()} torch threads)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=float, default=100e6, help="genome size, bp")
    ap.add_argument("--chrom-size", type=float, default=25e6, help="chromosome size, bp")
    ap.add_argument("--contigs", type=int, default=None,
                    help="short contigs (default: 2,000, or fewer for a small --size)")
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "gene_structure.yaml"))
    ap.add_argument("--model", default=None,
                    help="a trained checkpoint (default: --config's model, random init)")
    ap.add_argument("--source", default=None,
                    help="FASTA whose sequence is tiled into the genome (default: random "
                         "bases); with a trained --model this gives realistic posteriors")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-steps", default="200000,2000000",
                    help="comma-separated annotate.batch_steps values to compare")
    ap.add_argument("--max-decode-steps", type=int, default=None)
    ap.add_argument("--signal-precision", default="0.0001",
                    help="annotate.signal_precision values to compare (comma-separated)")
    ap.add_argument("--writer", default="auto",
                    help="annotate.WRITER values to compare: auto (a thread on CUDA, inline "
                         "on the CPU), inline, thread (comma-separated)")
    ap.add_argument("--profile", type=int, default=0,
                    help="after the table, annotate once more under cProfile and print "
                         "this many functions by own time and by cumulative time")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--no-record", action="store_true", help="print only")
    args = ap.parse_args()

    import semiseg.annotate.run as annotate_module
    from semiseg import ui
    from semiseg.annotate.run import annotate

    ui.set_quiet(True)
    torch.set_num_threads(args.threads)
    size = int(args.size)
    contigs = args.contigs if args.contigs is not None else min(2000, size // 20_000)
    work = tempfile.mkdtemp(prefix="semiseg_tp_")
    fasta = os.path.join(work, "genome.fa")
    t = time.perf_counter()
    lengths = synth_genome(fasta, size, int(args.chrom_size), contigs, seed=0,
                           source=source_bases(args.source))
    total = sum(lengths.values())
    print(f"genome: {total:,} bp, {len(lengths):,} sequences ({contigs} short contigs), "
          f"written in {time.perf_counter() - t:.1f} s", flush=True)
    ckpt = args.model or os.path.join(work, "model.pt")
    if not args.model:
        random_checkpoint(args.config, fasta, ckpt)
    first = next(iter(lengths))
    rows = []
    variants = [(int(float(b)), float(p), w) for b in args.batch_steps.split(",")
                for p in args.signal_precision.split(",") for w in args.writer.split(",")]
    for bs, prec, wb in variants:
        annotate_module.WRITER = None if wb == "auto" else wb
        kw = {"device": args.device, "batch_steps": bs,
              "max_decode_steps": args.max_decode_steps, "signal_precision": prec}
        annotate(ckpt, fasta, os.path.join(work, "warm"), chroms=[first], **kw)  # warm-up
        if torch.cuda.is_available() and args.device != "cpu":
            torch.cuda.reset_peak_memory_stats()
        times = []
        for r in range(args.repeats):
            t = time.perf_counter()
            annotate(ckpt, fasta, os.path.join(work, f"run{r}"), **kw)
            times.append(time.perf_counter() - t)
            print(f"batch_steps {bs:,}, precision {prec:g}, writer {wb}: run {r + 1}: "
                  f"{times[-1]:.1f} s "
                  f"({total / times[-1]:,.0f} bp/s)", flush=True)
        gpu_mb = (torch.cuda.max_memory_allocated() / 2**20
                  if torch.cuda.is_available() and args.device != "cpu" else float("nan"))
        med = statistics.median(times)
        rows.append((bs, prec, wb, med, total / med, times, gpu_mb))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip() or "?"
    dev = device_name(args.device)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"## annotate throughput (benchmarks/annotate_throughput.py) - {now}, commit "
            f"{commit}\n{dev}; model "
            f"{args.model or os.path.relpath(args.config, ROOT) + ' (random init)'}; genome "
            f"{total:,} bp ({'tiled from ' + args.source if args.source else 'random'}): "
            f"{len(lengths) - contigs} chromosome(s) of up to "
            f"{int(args.chrom_size):,} bp + {contigs} contigs of 200-5,000 bp; median of "
            f"{args.repeats} runs after a warm-up, all outputs written; peak RSS "
            f"{rss:,.0f} MB; command: `PYTHONPATH=. python benchmarks/annotate_throughput.py "
            f"{' '.join(sys.argv[1:])}`\n")
    table = [("| batch_steps | signal precision | writer | median s | bp/s | runs s | "
              "peak GPU MB |"), "|---|---|---|---|---|---|---|"]
    for bs, prec, wb, med, bps, times, gpu_mb in rows:
        table.append(f"| {bs:,} | {prec:g} | {wb} | {med:.2f} | {bps:,.0f} | "
                     f"{', '.join(f'{x:.2f}' for x in times)} | "
                     f"{'-' if np.isnan(gpu_mb) else f'{gpu_mb:,.0f}'} |")
    text = head + "\n" + "\n".join(table) + "\n"
    print("\n" + text)
    if not args.no_record:
        with open(os.path.join(ROOT, "benchmarks", "RESULTS.md"), "a") as fh:
            fh.write("\n" + text)
    if args.profile:
        import cProfile
        import pstats

        bs, prec, wb = variants[-1]
        annotate_module.WRITER = None if wb == "auto" else wb
        prof = cProfile.Profile()
        prof.enable()
        annotate(ckpt, fasta, os.path.join(work, "prof"), device=args.device,
                 batch_steps=bs, max_decode_steps=args.max_decode_steps,
                 signal_precision=prec)
        prof.disable()
        for key in ("tottime", "cumulative"):
            pstats.Stats(prof).sort_stats(key).print_stats(args.profile)


if __name__ == "__main__":
    main()
