"""Genes the model is unsure of, not called (`annotate.min_gene_score`).

A decoded gene's score is the mean, over its bases from its first exon's first base to
its last exon's last base, of the posterior of the label it was given there: the score
PREFIX.gff3 writes on its gene and mRNA rows (genome/write.py). A gene scoring below the
threshold is written as the background label (intergenic) in every output.

Measured on fly (3 seeds, docs/gene_model.md, "Twelfth round"): on the validation block
every gene dropped up to 0.9 was wrong (gene precision 0.49 -> 0.54 at 0.9), but on the
test region the threshold chosen there (0.85) left gene F1 as it was: it also dropped
genes with long introns the model half believes. Off by default.
"""

from __future__ import annotations

import numpy as np

from ..genome._util import runs
from ..genome.write import gene_runs

EXONIC = ("CDS", "UTR", "ncRNA")


def gene_spans(lab: np.ndarray, roles: list, strands: list) -> list[tuple[int, int]]:
    """[lo, hi) of each decoded gene of a chromosome's labels (-1: no label), from its
    first exonic step to its last, grouped as the GFF3 writer groups rows into genes
    (genome/write.gene_runs)."""
    starts, ends, values = runs(lab)
    run_lab = values.tolist()
    run_role = [roles[lb] if lb >= 0 else None for lb in run_lab]
    spans = []
    k = 0
    while k < len(run_lab):
        if run_role[k] not in EXONIC:
            k += 1
            continue
        _, last = gene_runs(run_lab, run_role, strands, k)
        spans.append((int(starts[k]), int(ends[last])))
        k = last + 1
    return spans


def gene_score(lab: np.ndarray, post: np.ndarray, lo: int, hi: int) -> float:
    """The mean posterior of the given labels over steps [lo, hi)."""
    idx = np.arange(lo, hi)
    return float(post[idx, lab[lo:hi]].astype(np.float64).mean())


def drop_weak_genes(lab: np.ndarray, post: np.ndarray, roles: list, strands: list,
                    background: int, min_score: float) -> list[tuple[int, int, float]]:
    """Set every gene scoring below `min_score` to `background` (in place); returns the
    (lo, hi, score) of those dropped."""
    dropped = []
    for lo, hi in gene_spans(lab, roles, strands):
        s = gene_score(lab, post, lo, hi)
        if s < min_score:
            lab[lo:hi] = background
            dropped.append((lo, hi, s))
    return dropped
