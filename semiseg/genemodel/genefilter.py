"""Genes not called: those the model is unsure of (`annotate.min_gene_score`), and those
whose coding bases lie in soft-masked repeats (`annotate.max_masked_cds`).

A decoded gene's score is the mean, over its bases from its first exon's first base to
its last exon's last base, of the posterior of the label it was given there: the score
PREFIX.gff3 writes on its gene and mRNA rows (genome/write.py). A gene scoring below the
threshold is written as the background label (intergenic) in every output.

Measured on fly (3 seeds, docs/gene_model.md, "Twelfth round"): on the validation block
every gene dropped up to 0.9 was wrong (gene precision 0.49 -> 0.54 at 0.9), but on the
test region the threshold chosen there (0.85) left gene F1 as it was: it also dropped
genes with long introns the model half believes. Off by default.

A decoded gene's masked share is the share of its CDS bases written in lowercase in the
FASTA (soft-masked: repeats, transposons). `annotate.learn_rules` sets
`annotate.max_masked_cds` to the largest share among the training genes (learnedrules.py);
a gene above it is written as intergenic. Measured on fly's three folds
(docs/gene_model.md, "Genes in soft-masked repeats").
"""

from __future__ import annotations

import numpy as np

from ..genome._util import runs
from ..genome.sequence import softmasked
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


def drop_genes(lab: np.ndarray, roles: list, strands: list, background: int,
               score, drop) -> list[tuple[int, int, float]]:
    """Set every gene (gene_spans) whose `score(lo, hi)` satisfies `drop(score)` to
    `background` (in place); returns the (lo, hi, score) of those dropped."""
    dropped = []
    for lo, hi in gene_spans(lab, roles, strands):
        s = score(lo, hi)
        if drop(s):
            lab[lo:hi] = background
            dropped.append((lo, hi, s))
    return dropped


def drop_weak_genes(lab: np.ndarray, post: np.ndarray, roles: list, strands: list,
                    background: int, min_score: float) -> list[tuple[int, int, float]]:
    """Set every gene scoring below `min_score` to `background` (in place); returns the
    (lo, hi, score) of those dropped."""
    return drop_genes(lab, roles, strands, background,
                      lambda lo, hi: gene_score(lab, post, lo, hi), lambda s: s < min_score)


def masked_share(lab: np.ndarray, low: np.ndarray, cds: list[int], lo: int, hi: int) -> float:
    """The share of the CDS steps (labels `cds`) of [lo, hi) where `low` is true; 0 where
    there is no CDS step."""
    c = np.isin(lab[lo:hi], cds)
    n = int(c.sum())
    return float(low[lo:hi][c].sum()) / n if n else 0.0


def drop_masked_genes(lab: np.ndarray, seq: str, cds: list[int], roles: list,
                      strands: list, background: int,
                      max_share: float) -> list[tuple[int, int, float]]:
    """Set every gene whose CDS steps are more than `max_share` soft-masked (lowercase in
    `seq`, the chromosome at 1 bp) to `background` (in place); returns the
    (lo, hi, share) of those dropped."""
    low = softmasked(seq)
    if not low.any():
        return []
    return drop_genes(lab, roles, strands, background,
                      lambda lo, hi: masked_share(lab, low, cds, lo, hi),
                      lambda s: s > max_share)
