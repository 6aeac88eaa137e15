"""Which start codon did a gene prediction choose? Predicted genes are matched to the
truth by their stop codon (same strand, same 3' end); for single-exon pairs with
different starts it counts whether the prediction lies upstream or downstream of the
true start, and whether either is the first in-frame ATG of its ORF (the upstream-most
ATG after the previous in-frame stop). Used for crf.upstream_start_scores (RESULTS.md).

    python benchmarks/start_codons.py CHROM FASTA TRUTH.gff3 PRED.gff3

Prints counts; the differing pairs go to stderr.
"""

from __future__ import annotations

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gene_metrics import STOPS, Gene, read_fasta, read_gff_genes, revcomp  # noqa: E402


def first_atg(seq: str, g: Gene) -> int:
    """The 5' end (Gene.five_prime coordinates) of the upstream-most in-frame ATG of the
    ORF that holds g's start codon."""
    p = best = g.five_prime
    step = -3 if g.strand == "+" else 3
    while 0 <= p + min(step, 0) and p + max(step, 0) <= len(seq):
        cod = seq[p - 3:p] if g.strand == "+" else revcomp(seq[p:p + 3])
        if cod in STOPS:
            break
        p += step
        if cod == "ATG":
            best = p
    return best


def main(argv=None) -> None:
    chrom, fasta, truth, pred = (argv or sys.argv[1:])[:4]
    seq = read_fasta(fasta)[chrom].upper()
    by_stop = {(g.strand, g.three_prime): g for g in read_gff_genes(truth, [chrom])}
    n = collections.Counter()
    for g in read_gff_genes(pred, [chrom]):
        t = by_stop.get((g.strand, g.three_prime))
        if t is None:
            n["no stop match"] += 1
        elif len(t.cds) > 1 or len(g.cds) > 1:
            same = t.cds == g.cds
            n[f"multi-exon matched stop, {'same' if same else 'differ'}"] += 1
        else:
            first = first_atg(seq, t)
            t_first = t.five_prime == first
            if g.five_prime == t.five_prime:
                n[f"start ok (truth first ATG={t_first})"] += 1
                continue
            up = g.five_prime < t.five_prime if g.strand == "+" else g.five_prime > t.five_prime
            n[f"start wrong: pred {'upstream' if up else 'downstream'}, truth "
              f"firstATG={t_first}, pred firstATG={g.five_prime == first}"] += 1
            print(" ", g, t, "first ATG", first, file=sys.stderr)
    for k, v in sorted(n.items()):
        print(v, k)


if __name__ == "__main__":
    main()
