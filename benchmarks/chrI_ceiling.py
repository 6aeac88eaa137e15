"""What chrI allows: the scores of SGD's own genes, painted and scored exactly as the gene
finders are (benchmarks/gene_baselines.py), to see how far issue 10's goals (macro F1
0.975, exact segment F1 0.80, exact boundary F1 0.88 on chrI) are reachable at all.

    python benchmarks/chrI_ceiling.py [--outdir results/chrI_ceiling] [--no-record]

Rows (each a BED with the demo scheme's labels: CDS of the genes, the gaps of 60 bp or
more between a gene's CDS rows as intron+/intron-, the rest intergenic; scored by
`semiseg evaluate` at tolerance 0, macro over intergenic / CDS+ / CDS-, and the gene
numbers of gene_metrics.py):
1. every SGD coding gene of chrI, overlaps resolved longest first (one label per base:
   the best any segmentation can do, since the truth's overlapping genes cannot all be
   painted);
2. row 1 with each gene whose annotated start is not the first ATG of its open reading
   frame (an in-frame ATG upstream, before any in-frame stop) extended to that ATG: a
   method that reads the sequence alone takes the longest ORF there, as the ORF finder
   does;
3. row 2 without the genes shorter than 100 codons (SGD's own threshold for calling an
   ORF from sequence: the shorter ones are kept on other evidence), predicted as
   intergenic.
Rows 2 and 3 are what a sequence-only method could reach if it were right on everything
else; they are upper bounds of a kind, not predictions.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gene_metrics as gm  # noqa: E402
import orf_finder  # noqa: E402

STOPS = ("TAA", "TAG", "TGA")
MIN_INTRON = 60


def non_overlapping(genes):
    """The genes kept by the ORF finder's rule (orf_finder.select_orfs: longest span first,
    no overlap on either strand), sorted by position."""
    by_span = {(g.start, g.end, g.strand): g for g in genes}
    return [by_span[o] for o in orf_finder.select_orfs(list(by_span))]


def orf_start(g, seq: str):
    """The genomic coordinate of the first ATG of g's open reading frame, read on the
    gene's strand upstream of its start codon (in frame, up to the previous stop): g's
    own 5' end when no ATG lies upstream."""
    s = seq.upper() if g.strand == "+" else gm.revcomp(seq.upper())
    p = g.start if g.strand == "+" else len(seq) - g.end  # the start codon, strand coords
    first = p
    p -= 3
    while p >= 0 and s[p:p + 3] not in STOPS:
        if s[p:p + 3] == "ATG":
            first = p
        p -= 3
    return first if g.strand == "+" else len(seq) - first


def longest_orf(g, seq: str):
    """g with its first CDS row extended to its ORF's first ATG (on -, its last row)."""
    five = orf_start(g, seq)
    if g.strand == "+":
        cds = ((five, g.cds[0][1]),) + g.cds[1:]
    else:
        cds = g.cds[:-1] + ((g.cds[-1][0], five),)
    return gm.Gene(g.id, g.chrom, g.strand, cds)


def write_bed(path: str, genes, chrom: str, size: int) -> None:
    """The genes as a label BED: CDS+/CDS- (codes 1, 2), the gaps of MIN_INTRON bp or more
    between a gene's CDS rows intron+/intron- (3, 4), intergenic elsewhere."""
    a = np.zeros(size, np.int8)
    for g in genes:
        code = 1 if g.strand == "+" else 2
        for s, e in g.cds:
            a[s:e] = code
        for (_, e1), (s2, _) in zip(g.cds, g.cds[1:]):
            if s2 - e1 >= MIN_INTRON:
                a[e1:s2] = code + 2
    gm.write_label_bed(path, {chrom: a}, "chrI_ceiling")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outdir", default=os.path.join(gm.RESULTS_DIR, "chrI_ceiling"))
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
    seqs = gm.read_fasta(gm.CHRI)
    chrom, seq = next(iter(seqs.items()))
    truth = gm.read_gff_genes(gm.TRUTH, seqs)
    every = non_overlapping(truth)
    late = [g for g in every if orf_start(g, seq) != g.five_prime]
    orfs = [longest_orf(g, seq) if g in late else g for g in every]
    short = [g for g in orfs if g.length < 303]  # 100 codons and the stop codon
    rows_in = [
        (f"SGD genes, overlaps resolved longest first ({len(every)} of {len(truth)})", every),
        (f"the {len(late)} genes whose start is not their ORF's first ATG extended to it",
         orfs),
        (f"and without the {len(short)} shorter than 100 codons",
         [g for g in orfs if g not in short]),
    ]
    rows = []
    for name, genes in rows_in:
        bed = os.path.join(args.outdir, gm.slug(name)[:40] + ".bed")
        write_bed(bed, genes, chrom, len(seq))
        rows.append(gm.score_method(name, bed, genes, seqs, args.outdir))
    table = gm.combined_table(rows)
    print(table)
    print("late starts:", ", ".join(g.id for g in late), "; short:",
          ", ".join(g.id for g in short))
    if not args.no_record:
        gm.append_results(
            f"\n## What chrI allows (benchmarks/chrI_ceiling.py) - "
            f"{time.strftime('%Y-%m-%d')}, commit {gm.commit()}\n\n"
            "SGD's own chrI genes painted and scored exactly as the gene finders of "
            "benchmarks/gene_baselines.py (demo scheme, introns = CDS gaps >= 60 bp, "
            "tolerance 0, macro over intergenic / CDS+ / CDS-). The runtime column is "
            "empty: these are not methods. Extended in row 2: "
            f"{', '.join(g.id for g in late)}; left out of row 3: "
            f"{', '.join(g.id for g in short)}."
            "\n\n" + table + "\n")


if __name__ == "__main__":
    main()
