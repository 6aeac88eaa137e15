"""Calibration of boundary posteriors at the exact base: predicted probability vs observed
frequency, as a table and a reliability plot.

    python benchmarks/boundary_calibration.py --bw PREFIX.boundary.bw [--chrom chrI]
        [--truth data/yeast/yeast_chrI_chrII.gff3] [--config configs/demo.yaml]
        [--out results/boundary_calibration] [--record]

A true boundary at base t is a change of the truth's scheme label between t - 1 and t
(a gene's or an exon's edge: the demo scheme's intergenic / CDS+ / CDS- / intron+ /
intron- labels from the SGD GFF3); t = 0 and positions next to unknown truth are left
out. Every other base is a true non-boundary. The bigWig gives the model's boundary
posterior at each base (`semiseg annotate` writes PREFIX.boundary.bw). Bases are binned
by predicted probability (finer bins near 0 and 1, where nearly all bases lie); per bin:
bases, mean predicted probability, observed fraction of true boundaries. Also the
expected calibration error (bins weighted by their bases) and the Brier score.
Writes OUT.tsv and OUT.png; --record appends the table to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import UTC, datetime

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

EDGES = [0, 1e-4, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99,
         0.999, 1.0 + 1e-9]


def truth_boundaries(truth: str, config: str, chrom: str, size: int, sizes: dict):
    """(size,) bool true boundaries and (size,) bool usable positions."""
    from semiseg.config import load_config
    from semiseg.genome import load_scheme, read_annotation

    scheme = load_scheme(load_config(config).labels.scheme)
    lab = read_annotation(truth, scheme, sizes).labels(chrom, 0, size)
    bnd = np.zeros(size, bool)
    bnd[1:] = lab[1:] != lab[:-1]
    use = np.ones(size, bool)
    use[0] = False
    use[1:] &= (lab[1:] >= 0) & (lab[:-1] >= 0)
    return bnd, use


def table(p: np.ndarray, y: np.ndarray) -> list[tuple]:
    rows = []
    idx = np.digitize(p, EDGES) - 1
    for i in range(len(EDGES) - 1):
        m = idx == i
        n = int(m.sum())
        rows.append((EDGES[i], min(EDGES[i + 1], 1.0), n,
                     float(p[m].mean()) if n else float("nan"),
                     float(y[m].mean()) if n else float("nan")))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bw", required=True)
    ap.add_argument("--chrom", default="chrI")
    ap.add_argument("--truth", default=os.path.join(ROOT, "data/yeast/yeast_chrI_chrII.gff3"))
    ap.add_argument("--config", default=os.path.join(ROOT, "configs/demo.yaml"))
    ap.add_argument("--fasta", nargs="+", help="FASTA(s) naming every chromosome of --truth "
                    "(default: the yeast chrI and chrII of data/)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results/boundary_calibration"))
    ap.add_argument("--name", default="", help="what the bigWig is, for the record")
    ap.add_argument("--record", action="store_true")
    a = ap.parse_args(argv)
    import pyBigWig

    bw = pyBigWig.open(a.bw)
    sizes = dict(bw.chroms().items())
    size = sizes[a.chrom]
    p = np.nan_to_num(np.asarray(bw.values(a.chrom, 0, size), np.float64)).clip(0, 1)
    from semiseg.genome import Fasta

    fa = Fasta(a.fasta or [os.path.join(ROOT, f"data/yeast/{c}.fa") for c in ("chrI", "chrII")])
    bnd, use = truth_boundaries(a.truth, a.config, a.chrom, size, dict(fa.chrom_sizes))
    p, y = p[use], bnd[use].astype(np.float64)
    rows = table(p, y)
    n = len(p)
    ece = sum(r[2] / n * abs(r[3] - r[4]) for r in rows if r[2])
    brier = float(np.mean((p - y) ** 2))
    lines = ["| predicted | bases | mean predicted | observed boundaries |", "|---|---|---|---|"]
    lines += [f"| {lo:g}-{hi:g} | {k:,} | {mp:.4f} | {ob:.4f} |" for lo, hi, k, mp, ob in rows if k]
    summary = (f"{a.chrom}: {n:,} bases, {int(y.sum()):,} true boundaries, "
               f"{p.sum():.1f} expected by the model; ECE {ece:.5f}, Brier {brier:.6f}")
    print("\n".join(lines))
    print(summary)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out + ".tsv", "w") as fh:
        fh.write("bin_lo\tbin_hi\tbases\tmean_predicted\tobserved\n")
        for r in rows:
            fh.write("\t".join(f"{v:g}" if isinstance(v, float) else str(v) for v in r) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    ok = [r for r in rows if r[2]]
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect calibration")
    ax.scatter([r[3] for r in ok], [r[4] for r in ok], s=[12 + 8 * np.log10(r[2]) ** 2 for r in ok],
               color="C0", zorder=3, label="bins (area ~ log bases)")
    ax.plot([r[3] for r in ok], [r[4] for r in ok], color="C0", lw=1)
    for r in ok:
        ax.annotate(f"{r[2]:,}", (r[3], r[4]), fontsize=6, xytext=(3, -8),
                    textcoords="offset points")
    ax.set_xlabel("predicted boundary probability")
    ax.set_ylabel("observed fraction of true boundaries")
    ax.set_title(f"boundary calibration, {a.chrom}, exact base\nECE {ece:.4f}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(a.out + ".png", dpi=130)
    if a.record:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        with open(os.path.join(ROOT, "benchmarks/RESULTS.md"), "a") as fh:
            fh.write(f"\n## Boundary posterior calibration - {datetime.now(UTC):%Y-%m-%d}\n\n"
                     f"`python benchmarks/boundary_calibration.py --bw {a.bw}` ({a.name}), "
                     f"commit {commit}. Exact base; true boundary = a change of the demo "
                     f"scheme's truth label.\n\n" + "\n".join(lines) + f"\n\n{summary}\n")


if __name__ == "__main__":
    main()
