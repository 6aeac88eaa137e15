"""Genome I/O benchmark: load 1 Mb of yeast (features + labels) with 4 signal tracks.

    python benchmarks/io.py [--repeats 5] [--no-record]

Makes 4 small tracks over yeast chrI + chrII in a temporary folder (a bigWig, a bedGraph
and two BAM coverage tracks: all reads with MAPQ >= 10, and minus-strand reads), opens
them with the FASTA and the SGD GFF3 labels, and times GenomeData.load over 1,000,000 bp
(chrII whole + the first 186,822 bp of chrI), as 2 regions and as 10 windows of 100 kb,
at 1 bp and 10 bp resolution; then times the writers on the same 1 Mb (the annotation as
a segmentation, noisy posteriors). Median of the repeats after one warm-up run (writers:
at most 3). Appends the table to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from semiseg.genome import (
    Fasta,
    GenomeData,
    OutputWriter,
    TrackSpec,
    load_scheme,
    labels_to_segments,
    make_windows,
    read_annotation,
)
from semiseg.genome.synth import (
    bedgraph_rows,
    write_bam,
    write_bedgraph,
    write_bigwig,
)

YEAST = os.path.join(ROOT, "data", "yeast")
FASTA = [os.path.join(YEAST, "chrI.fa"), os.path.join(YEAST, "chrII.fa")]
GFF = os.path.join(YEAST, "yeast_chrI_chrII.gff3")


def make_tracks(folder: str, sizes: dict[str, int], seed: int = 0) -> list[TrackSpec]:
    rng = np.random.default_rng(seed)
    bw_values, bg_rows, reads = {}, [], []
    for chrom, n in sizes.items():
        v = rng.gamma(2.0, 3.0, n)
        v[rng.random(n) < 0.01] = np.nan
        bw_values[chrom] = v
        steps = np.repeat(rng.poisson(5, n // 50 + 1).astype(float), 50)[:n]
        bg_rows += bedgraph_rows(chrom, steps)
        k = n // 20  # 100-bp reads at 5x coverage
        for s, rev, q, dup in zip(np.sort(rng.integers(0, n - 100, k)), rng.random(k) < .5,
                                  rng.integers(0, 61, k), rng.random(k) < .05):
            reads.append((chrom, int(s), "100M", bool(rev), int(q), bool(dup)))
    bw = write_bigwig(os.path.join(folder, "signal.bw"), sizes, bw_values)
    bg = write_bedgraph(os.path.join(folder, "steps.bedGraph"), bg_rows)
    bam = write_bam(os.path.join(folder, "reads.bam"), sizes, reads)
    return [TrackSpec("signal", bw, transform="arcsinh"), TrackSpec("steps", bg),
            TrackSpec("coverage", bam, mapq=10, transform="log1p"),
            TrackSpec("minus", bam, mapq=10, strand="-", transform="log1p")]


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = ap.parse_args()

    fa = Fasta(FASTA)
    sizes = fa.chrom_sizes
    regions = [("chrII", 0, sizes["chrII"]), ("chrI", 0, 1_000_000 - sizes["chrII"])]
    scheme = load_scheme("gene_structure")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        specs = make_tracks(tmp, sizes)
        t0 = time.perf_counter()
        ann = read_annotation(GFF, scheme, sizes)
        t_gff = time.perf_counter() - t0
        t0 = time.perf_counter()
        data = GenomeData(fa, specs, ann)
        t_open = time.perf_counter() - t0
        t0 = time.perf_counter()
        data.fit_stats(["chrI"])
        t_stats = time.perf_counter() - t0
        rows.append(("read GFF3 labels (both chromosomes)", "-", t_gff))
        rows.append(("open 4 tracks (bedGraph parsed here)", "-", t_open))
        rows.append(("fit track stats on chrI (230 kb)", "-", t_stats))
        windows = make_windows(sizes, 100_000, regions=regions)
        assert sum(w.length for w in windows) == 1_000_000
        for resolution in (1, 10):
            data.resolution = resolution

            def load_regions():
                for c, s, e in regions:
                    x, y = data.load(c, s, e)
                return x, y

            def load_windows():
                for w in windows:
                    x, y = data.load(w.chrom, w.start, w.end)
                return x, y

            load_regions()
            rows.append((f"load 1 Mb as 2 regions, {data.n_features} features",
                         resolution, timed(load_regions, args.repeats)))
            rows.append((f"load 1 Mb as {len(windows)} x 100 kb windows",
                         resolution, timed(load_windows, args.repeats)))
        # writers: the annotation as a decoded segmentation with noisy posteriors
        rng = np.random.default_rng(1)
        for resolution in (1, 10):
            lab = {c: ann.labels(c, s, e, resolution) for c, s, e in regions}
            post = {}
            for c, v in lab.items():
                p = rng.random((len(v), len(scheme)), dtype=np.float32) * 0.2
                p[np.arange(len(v)), v] += 1.0
                post[c] = p / p.sum(1, keepdims=True)
            sizes_out = {c: e for c, _, e in regions}

            def write(formats, resolution=resolution, lab=lab, post=post, sizes_out=sizes_out):
                with OutputWriter(os.path.join(tmp, "out"), scheme, sizes_out,
                                  resolution=resolution, formats=formats, fasta=fa) as w:
                    for c in sizes_out:
                        seg = labels_to_segments(lab[c], 0, resolution, end=sizes_out[c])
                        w.add(c, seg, post[c], post[c][:, 0])

            reps = min(3, args.repeats)
            rows.append(("write BED9 + browser BED + GFF3 (1 Mb)", resolution,
                         timed(lambda: write(("bed", "gff3")), reps)))
            rows.append((f"write {len(scheme) + 1} bigWigs (1 Mb)", resolution,
                         timed(lambda: write(("bigwig",)), reps)))
        data.close()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cpu = f"{cpu_name()} ({os.cpu_count()} cores visible)"
    table = ["| step | bp/step | median s |", "|---|---|---|"]
    table += [f"| {name} | {res} | {t:.3f} |" for name, res, t in rows]
    header = (f"\n## genome I/O (benchmarks/io.py) - {date}, commit {commit}\n"
              f"CPU: {cpu}; median of {args.repeats} runs after a warm-up; "
              f"peak RSS {peak_mb:.0f} MB; tracks: bigWig (arcsinh), bedGraph, "
              "BAM coverage MAPQ>=10 (log1p), BAM minus strand (log1p); labels: SGD GFF3, "
              "gene_structure scheme.\n\n")
    text = header + "\n".join(table) + "\n"
    print(text)
    if not args.no_record:
        with open(os.path.join(ROOT, "benchmarks", "RESULTS.md"), "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
