"""Where a gene model's genes go wrong, gene by gene, on chrII's held-out blocks (the
validation data), next to the naive ORF finder scored on the same blocks.

    python benchmarks/gene_errors.py RUN_DIR [RUN_DIR ...] [--tag p0.rcoff.atg.o100]
        [--record TITLE]

Each RUN_DIR holds config.yaml and the GFF3 that benchmarks/score_gene_runs.py wrote for
its held-out block (RUN_DIR/valid.TAG.gff3: run score_gene_runs.py with the same
settings first). Each SGD coding gene lying wholly in a run's block is one of:

  exact           a predicted gene on its strand has its start and stop codons
  start wrong     a predicted gene ends at its stop codon but starts elsewhere
                  (intron genes counted apart: a missed first exon starts late)
  stop wrong      the start codon right, the stop elsewhere
  both wrong      predicted genes overlap it on its strand, neither end right
  missed          nothing on its strand overlaps it

and each predicted gene matching no SGD gene's start and stop is a false gene (split by
whether it overlaps an SGD gene on its strand, and whether it has introns). The last
table asks what a one-label-per-base annotation can hold at all: SGD's genes with
overlaps resolved longest first (as the truth tracks are painted), those of >= 100
codons (what the ORF finder can call), and how many of each the predictions get
exactly. Numbers are per block, averaged over the runs given (a run's block is the one
its training held out: score_gene_runs.valid_block); genes cut by the block's edges are
left out on both sides.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chrI_ceiling import non_overlapping  # noqa: E402
from gene_metrics import (  # noqa: E402
    TRUTH,
    YEAST,
    append_results,
    commit,
    machine,
    markdown,
    read_fasta,
    read_gff_genes,
)
from orf_finder import orf_genes  # noqa: E402
from score_gene_runs import valid_block  # noqa: E402

CLASSES = ["exact", "start wrong", "start wrong, intron gene", "stop wrong", "both wrong",
           "missed", "false gene, no SGD gene under it", "false gene over an SGD gene",
           "false gene with introns"]


def classify(truth, pred) -> Counter:
    """Counter of CLASSES for SGD genes `truth` and predicted genes `pred` (one block)."""
    out: Counter = Counter()
    both = {(g.strand, g.five_prime, g.three_prime) for g in pred}
    fives = {(g.strand, g.five_prime) for g in pred}
    threes = {(g.strand, g.three_prime) for g in pred}

    def over(g, others):
        return [o for o in others if o.strand == g.strand and o.start < g.end
                and g.start < o.end]

    for t in truth:
        if (t.strand, t.five_prime, t.three_prime) in both:
            out["exact"] += 1
        elif not over(t, pred):
            out["missed"] += 1
        elif (t.strand, t.three_prime) in threes:
            out["start wrong, intron gene" if len(t.cds) > 1 else "start wrong"] += 1
        elif (t.strand, t.five_prime) in fives:
            out["stop wrong"] += 1
        else:
            out["both wrong"] += 1
    right = {(g.strand, g.five_prime, g.three_prime) for g in truth}
    for p in pred:
        if (p.strand, p.five_prime, p.three_prime) in right:
            continue
        if len(p.cds) > 1:
            out["false gene with introns"] += 1
        elif over(p, truth):
            out["false gene over an SGD gene"] += 1
        else:
            out["false gene, no SGD gene under it"] += 1
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--tag", default="p0.rcoff.atg.o100",
                    help="annotation tag of score_gene_runs.py (default: the demo's settings)")
    ap.add_argument("--record", help="append to RESULTS.md under this title")
    a = ap.parse_args(argv)
    seq = read_fasta(os.path.join(YEAST, "chrII.fa"))
    truth_all = read_gff_genes(TRUTH, ["chrII"])
    orfs_all = orf_genes(seq, 100)[0]
    model, orf, reach = Counter(), Counter(), Counter()
    for run in a.runs:
        gff = os.path.join(run, f"valid.{a.tag}.gff3")
        if not os.path.exists(gff):
            raise SystemExit(f"{gff}: not found; run score_gene_runs.py with these "
                             "settings first")
        with open(os.path.join(run, "config.yaml")) as fh:
            lo, hi = valid_block(yaml.safe_load(fh))

        def inside(g, lo=lo, hi=hi):
            return lo <= g.start and g.end <= hi

        truth = [g for g in truth_all if inside(g)]
        # a predicted gene touching the block's edge is cut by it (annotate decodes the
        # block alone), as are the SGD genes across the edges, left out above
        pred = [g for g in read_gff_genes(gff, ["chrII"])
                if lo < g.start and g.end < hi]
        model += classify(truth, pred)
        orf += classify(truth, [g for g in orfs_all if inside(g)])
        both = {(g.strand, g.five_prime, g.three_prime) for g in pred}
        kept = non_overlapping(truth)
        long = [g for g in kept if g.length >= 303]
        reach["SGD genes in the block"] += len(truth)
        reach["kept by painting (overlaps resolved)"] += len(kept)
        reach["  of these >= 100 codons"] += len(long)
        reach["  < 100 codons"] += len(kept) - len(long)
        reach["predicted exactly, >= 100 codons"] += sum(
            (g.strand, g.five_prime, g.three_prime) in both for g in long)
        reach["predicted exactly, < 100 codons"] += sum(
            (g.strand, g.five_prime, g.three_prime) in both for g in kept
            if g.length < 303)
        reach["predicted genes"] += len(pred)
    n = len(a.runs)
    t1 = markdown(["per block, mean of the runs", "gene model", "ORF finder"],
                  [[k, f"{model[k] / n:.2f}", f"{orf[k] / n:.2f}"] for k in CLASSES])
    t2 = markdown(["per block, mean of the runs", "genes"],
                  [[k, f"{v / n:.2f}"] for k, v in reach.items()])
    text = (f"{n} runs, annotations valid.{a.tag}.gff3 (`python benchmarks/gene_errors.py "
            f"... --tag {a.tag}`)\n\n{t1}\n\n{t2}\n")
    print(text)
    if a.record:
        append_results(f"\n## {a.record} - commit {commit()}, {machine()}\n\n{text}")


if __name__ == "__main__":
    main()
