"""Summarise trained gene-model runs scored on chrI: one row per run, then mean (spread).

    python benchmarks/gene_runs_table.py GROUP=RUN_DIR[,RUN_DIR...] ...

Each RUN_DIR holds eval_tol0.tsv and eval_tol20.tsv (`semiseg evaluate --tolerance 0 /
20` of its chrI.bed against the SGD GFF3, demo scheme) and chrI.gff3 (`semiseg annotate`).
Columns: macro F1 over the 5 demo labels and over intergenic / CDS+ / CDS- (the mean of
those rows under the 5-label scoring), exact segment and exact boundary F1 (3 labels),
boundary F1 at +-20 bp (3 labels), and gene-level start+stop exact / intron GT..AG
(gene_metrics.py) with the number of predicted introns, and the predicted multi-exon
genes with an in-frame stop codon across a splice junction (the model does not exclude
them). Spread = max - min over runs.
"""

from __future__ import annotations

import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gene_metrics import gene_metrics, read_fasta, read_gff_genes  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRUTH = os.path.join(ROOT, "data/yeast/yeast_chrI_chrII.gff3")
THREE = ("intergenic", "CDS+", "CDS-")


def _rows(path):
    with open(path) as fh:
        return {r["label"]: r for r in csv.DictReader(fh, delimiter="\t")}


def run_row(d: str, seq: dict, truth) -> dict:
    t0, t20 = _rows(f"{d}/eval_tol0.tsv"), _rows(f"{d}/eval_tol20.tsv")

    def mean(rows, col, labels):
        return float(np.mean([float(rows[k][col]) for k in labels]))

    pred = read_gff_genes(f"{d}/chrI.gff3", ["chrI"])
    gm = gene_metrics(truth, pred, seq)
    introns = [(g.strand, a[1], b[0]) for g in pred for a, b in zip(g.cds[:-1], g.cds[1:])]
    s = seq["chrI"]
    canon = sum((s[a:a + 2] == "GT" and s[b - 2:b] == "AG") if st == "+" else
                (s[a:a + 2] == "CT" and s[b - 2:b] == "AC") for st, a, b in introns)
    junction_stops = 0
    for g in pred:
        if len(g.cds) > 1:
            cds = g.coding_sequence(s)
            junction_stops += any(cds[i:i + 3] in ("TAA", "TAG", "TGA")
                                  for i in range(0, len(cds) - 3, 3))
    return {"macro F1 (5)": float(t0["macro"]["f1"]),
            "macro F1 (3)": mean(t0, "f1", THREE),
            "exact segment F1 (3)": mean(t0, "segment_f1_exact", THREE),
            "exact boundary F1 (3)": mean(t0, "boundary_f1", THREE),
            "boundary F1 +-20 (3)": mean(t20, "boundary_f1", THREE),
            "gene start+stop exact": gm["both_exact"],
            "predicted introns": len(introns),
            "introns GT..AG": canon,
            "genes with a junction stop": junction_stops}


def main(argv: list[str]) -> None:
    seq = read_fasta(os.path.join(ROOT, "data/yeast/chrI.fa"))
    truth = read_gff_genes(TRUTH, ["chrI"])
    cols = None
    lines = []
    for arg in argv:
        group, dirs = arg.split("=", 1)
        rows = [run_row(d, seq, truth) for d in dirs.split(",")]
        cols = cols or list(rows[0])
        for d, r in zip(dirs.split(","), rows):
            lines.append(f"| {group} {os.path.basename(d.rstrip('/'))} | "
                         + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c])
                                      for c in cols) + " |")
        if len(rows) > 1:
            cells = []
            for c in cols:
                v = np.array([r[c] for r in rows], float)
                cells.append(f"{v.mean():.3f} ({v.max() - v.min():.3f})")
            lines.append(f"| **{group} mean (spread)** | " + " | ".join(cells) + " |")
    print("| run | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
