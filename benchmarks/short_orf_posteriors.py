"""Whether chrI's short genes (< 100 codons) could be called from the gene model's own
posteriors (issue 10): for every open reading frame of 30-99 codons on chrI (first ATG
after a stop, to the stop) that is an SGD gene or touches no SGD gene, the mean CDS
posterior of its strand over it, per model, from annotate's posterior bigWigs:

    python benchmarks/short_orf_posteriors.py 'RUNS/*/chrI.p0.rcoff.b10000.atg.dGTANG.o100'

(each argument a glob of annotation prefixes, one per model, as benchmarks/score_gene_runs.py
writes them). Prints each short gene's posterior per model and, for thresholds 0.1-0.5,
how many short genes and how many other ORFs per model lie above it.
"""

import glob
import os
import sys

import numpy as np
import pyBigWig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gene_metrics as gm
import orf_finder

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "yeast")


def short_orfs(seq: str, genes, lo: int = 30, hi: int = 100):
    """(start, end, strand, SGD id or '') of the ORFs of lo..hi-1 codons from the first
    in-frame ATG after a stop (orf_finder's longest per stop) that are an SGD gene
    shorter than 100 codons or touch no SGD CDS."""
    cov = np.zeros(len(seq), bool)
    for g in genes:
        for a, b in g.cds:
            cov[a:b] = True
    short = {(g.cds[0][0], g.cds[-1][1], g.strand): g.id for g in genes
             if sum(b - a for a, b in g.cds) < 300}
    out = []
    for a, b, strand in orf_finder.find_orfs(seq, lo, longest_per_stop=True):
        if (b - a) // 3 >= hi:
            continue
        if (a, b, strand) in short:
            out.append((a, b, strand, short[(a, b, strand)]))
        elif not cov[a:b].any():
            out.append((a, b, strand, ""))
    return out


def main():
    chrom = "chrI"
    seq = gm.read_fasta(os.path.join(DATA, "chrI.fa"))[chrom].upper()
    genes = gm.read_gff_genes(os.path.join(DATA, "yeast_chrI_chrII.gff3"), [chrom])
    orfs = short_orfs(seq, genes)
    pos = [i for i, o in enumerate(orfs) if o[3]]
    neg = [i for i, o in enumerate(orfs) if not o[3]]
    print(f"{len(orfs)} ORFs of 30-99 codons: {len(pos)} SGD short genes, {len(neg)} touching "
          "no SGD gene")
    prefixes = sorted(p for pat in sys.argv[1:] for p in glob.glob(pat + ".bed"))
    rows = []
    for pre in prefixes:
        pre = pre[:-4]
        post = {}
        for k in ("CDS+", "CDS-"):
            with pyBigWig.open(f"{pre}.posterior.{k}.bw") as bw:
                post[k] = np.nan_to_num(np.array(bw.values(chrom, 0, len(seq))))
        rows.append([post["CDS" + s][a:b].mean() for a, b, s, _ in orfs])
    M = np.array(rows)
    print(f"{len(prefixes)} models")
    for i in pos:
        print(f"| {orfs[i][3]} | {M[:, i].mean():.2f} | " + " ".join(f"{v:.2f}" for v in M[:, i])
              + " |")
    for thr in (0.1, 0.2, 0.3, 0.5):
        tp, fp = (M[:, pos] > thr).sum(1), (M[:, neg] > thr).sum(1)
        print(f"| > {thr} | {tp.mean():.1f} of {len(pos)} | {fp.mean():.1f} of {len(neg)} |")


if __name__ == "__main__":
    main()
