"""What annotate's writer costs per sequence, alone (no model, no decoding): N contigs
of 200-5,000 bp cut from a FASTA, each with a painted segmentation and smooth posterior
tracks, handed to emit.write_chrom (the gene rules on, all outputs), then the files
closed. Prints ms per contig, the close, and the functions that took the time.

    python benchmarks/writer_cost.py [--contigs 2000] [--profile 15] [--record TITLE]

With --record the line is appended to benchmarks/RESULTS.md with the date, commit and CPU.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import pstats
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contigs", type=int, default=2000)
    ap.add_argument("--source", default=os.path.join(ROOT, "data", "yeast", "chrII.fa"))
    ap.add_argument("--model", default=os.path.join(ROOT, "semiseg", "models",
                                                    "yeast_cds_frames.pt"))
    ap.add_argument("--profile", type=int, default=15)
    ap.add_argument("--record", help="append the result to RESULTS.md under this title")
    a = ap.parse_args()
    from semiseg.checkpoint import checkpoint_scheme, load_checkpoint
    from semiseg.emit import write_chrom
    from semiseg.generules import gene_rules
    from semiseg.genome import Fasta, OutputWriter

    rng = np.random.default_rng(0)
    with Fasta(a.source) as fa:
        src = fa.fetch(next(iter(fa.chrom_sizes)))
    work = tempfile.mkdtemp(prefix="writer_cost_")
    fasta = os.path.join(work, "contigs.fa")
    sizes = {}
    with open(fasta, "w") as fh:
        pos = 0
        for i in range(a.contigs):
            n = int(rng.integers(200, 5000))
            pos = pos % (len(src) - 5000)
            fh.write(f">c{i}\n{src[pos:pos + n]}\n")
            sizes[f"c{i}"] = n
            pos += n
    scheme = checkpoint_scheme(load_checkpoint(a.model))
    names = list(scheme.names)
    rules = gene_rules(scheme, 1, True, None, 100, None)
    counts = {n: {"segments": 0, "bp": 0} for n in names}
    parts = {}
    for c, n in sizes.items():
        lab = np.zeros(n, np.int64)
        lab[n // 3:2 * n // 3] = 1
        post = np.zeros((n, len(names)), np.float32)
        post[np.arange(n), lab] = 1
        post = np.round(post * 0.9 + 0.02, 4)
        parts[c] = [(0, n, lab, post, np.zeros((n, 3), np.float32), np.full(n, 0.9))]
    lock = threading.Lock()
    prof = cProfile.Profile()
    with Fasta(fasta) as fa:
        writer = OutputWriter(os.path.join(work, "out"), scheme, sizes, entropy=True,
                              signal_precision=1e-4)
        t0 = time.perf_counter()
        prof.enable()
        for c, n in sizes.items():
            write_chrom(writer, c, n, parts[c], 1, names, counts, fa, lock, rules)
        t1 = time.perf_counter()
        writer.close()
        prof.disable()
        t2 = time.perf_counter()
    line = (f"{a.contigs} contigs ({sum(sizes.values()):,} bp): write_chrom "
            f"{(t1 - t0) / a.contigs * 1e3:.2f} ms per contig ({t1 - t0:.2f} s), close "
            f"{t2 - t1:.2f} s")
    print(line)
    if a.record:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from gene_metrics import append_results, commit, machine

        day = datetime.date.today().isoformat()
        append_results(f"\n## {a.record} (benchmarks/writer_cost.py) - {day}, commit "
                       f"{commit()}, {machine()}\n\n`python benchmarks/writer_cost.py "
                       f"--contigs {a.contigs}`: {line}\n")
    if a.profile:
        st = pstats.Stats(prof)
        st.sort_stats("tottime").print_stats(a.profile)
        st.sort_stats("cumulative").print_stats(a.profile)


if __name__ == "__main__":
    main()
