"""Genes the model is unsure of, not called (`annotate.min_gene_score`).

A decoded gene's score is the mean, over its bases from its first exon's first base to
its last exon's last base, of the posterior of the label it was given there: the score
PREFIX.gff3 writes on its gene and mRNA rows (genome/write.py). A gene scoring below the
threshold is written as the background label (intergenic) in every output.

Why: most of the fly model's wrong genes are ones it doubts. On the fly validation
block (3 seeds, docs/gene_model.md, "Twelfth round") dropping genes under 0.9 kept every
exactly right gene and took out wrong ones only (gene precision 0.49 -> 0.56).
"""

from __future__ import annotations

import numpy as np

EXONIC = ("CDS", "UTR", "ncRNA")


def gene_spans(lab: np.ndarray, roles: list, strands: list) -> list[tuple[int, int]]:
    """[lo, hi) of each decoded gene of a chromosome's labels (-1: no label): from an
    exonic step (role CDS, UTR or ncRNA) over steps of its strand's exonic or intron
    labels, to the last exonic step before anything else (as the GFF3 writer groups
    rows into genes; an ncRNA gene holds ncRNA exons only)."""
    S = len(lab)
    if not S:
        return []
    # runs of equal labels
    cut = np.flatnonzero(np.diff(lab)) + 1
    starts = np.concatenate([[0], cut])
    ends = np.concatenate([cut, [S]])
    run_lab = lab[starts].tolist()
    spans = []
    k, n = 0, len(run_lab)
    while k < n:
        lb = run_lab[k]
        role = roles[lb] if lb >= 0 else None
        if role not in EXONIC:
            k += 1
            continue
        exonic = ("ncRNA",) if role == "ncRNA" else ("CDS", "UTR")
        strand = strands[lb]
        j = last = k
        while j + 1 < n:
            l2 = run_lab[j + 1]
            r2 = roles[l2] if l2 >= 0 else None
            if l2 < 0 or strands[l2] != strand or r2 not in exonic + ("intron",):
                break
            j += 1
            if r2 != "intron":
                last = j
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
