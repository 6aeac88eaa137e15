"""Where gene-level F1 is lost: each truth locus of a fly region sorted into one kind of
miss, for any number of predictions (issue 41).

    python benchmarks/fly_gene_errors.py [--region tune|test|late] NAME=PATH [NAME=PATH ...]
                                         [--detail NAME]

Truth: the CDS chains of data/fly/chr2R_2M_6M.gff3 lying wholly inside the region,
stop codons normalised from the sequence on both sides (as `semiseg evaluate --fasta`
does). Truth transcripts whose CDS overlap on one strand form a locus. A prediction is
semiseg's PREFIX.gff3 or any GFF3/GTF with CDS rows (AUGUSTUS's output reads too).

Kinds, in this order (the first that applies):
- exact: a predicted chain equals one of the locus's transcripts;
- missed: no predicted CDS on the locus's strand overlaps the locus's CDS
  ("other strand" when a prediction of the other strand does);
- split: two or more predicted genes overlap the locus;
- merged: the one predicted gene overlaps the CDS of another locus too;
- for the one predicted gene against the locus's transcript it shares most exons with:
  same introns but start (and/or stop) wrong; same number of introns, a splice site off;
  fewer introns; more introns.
Predicted genes whose CDS overlaps no truth CDS of their strand are counted apart.
A second table counts the exact ones among the nested loci (wholly inside an intron of
another locus) and the loci holding them.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from fly_baselines import CHROM, REGIONS  # noqa: E402  (one definition of the regions)

from semiseg.evaluate.genelevel import inside, normalise_stops, read_gene_models  # noqa: E402
from semiseg.genome import Fasta  # noqa: E402
from semiseg.metrics import loci  # noqa: E402


def cds_overlap(a, b) -> bool:
    return any(s < e2 and s2 < e for s, e in a.cds for s2, e2 in b.cds)


def introns(g):
    return [(a[1], b[0]) for a, b in zip(g.cds, g.cds[1:])]


def loci_of(truth):
    """The truth models grouped as `semiseg evaluate` counts loci (metrics.loci)."""
    groups: dict[int, list] = {}
    for g, n in zip(truth, loci([g.key for g in truth])):
        groups.setdefault(n, []).append(g)
    return list(groups.values())


def classify(locus, pred, loci) -> tuple[str, object]:
    keys = {g.cds for g in locus}
    strand = locus[0].strand
    hits = [q for q in pred if q.strand == strand and any(cds_overlap(q, g) for g in locus)]
    if any(q.cds in keys for q in hits):
        return "exact", None
    if not hits:
        other = any(cds_overlap(q, g) for q in pred for g in locus)
        return ("missed (a gene on the other strand)" if other else "missed"), None
    if len(hits) > 1:
        return "split", hits
    q = hits[0]
    if sum(1 for m in loci if m[0].strand == strand and any(cds_overlap(q, g) for g in m)) > 1:
        return "merged with another locus", q
    g = max(locus, key=lambda g: len(set(g.cds) & set(q.cds)))
    ti, qi = introns(g), introns(q)
    if ti == qi:
        five = (q.start != g.start) if strand == "+" else (q.end != g.end)
        return ("introns right, start wrong" if five else "introns right, stop wrong"), q
    if len(ti) == len(qi):
        return "as many introns, a splice site off", q
    return ("fewer introns" if len(qi) < len(ti) else "more introns"), q


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pred", nargs="+", metavar="NAME=PATH")
    ap.add_argument("--region", choices=sorted(REGIONS), default="tune")
    ap.add_argument("--span", metavar="LO-HI", help="the region as coordinates instead "
                    "(e.g. 0-1500000: the folds' first three blocks)")
    ap.add_argument("--detail", metavar="NAME", help="list the missed loci of NAME")
    args = ap.parse_args(argv)
    root = os.path.dirname(HERE)
    fa = Fasta(os.path.join(root, "data/fly/chr2R_2M_6M.fa"))
    lo, hi = (REGIONS[args.region] if args.span is None
              else map(int, args.span.replace(",", "").split("-")))

    def load(path):
        models, _ = normalise_stops(read_gene_models(path), fa.fetch, fa.chrom_sizes)
        return inside(models, {CHROM: [(lo, hi)]})

    loci = loci_of(load(os.path.join(root, "data/fly/chr2R_2M_6M.gff3")))
    truth = [g for m in loci for g in m]
    table, kinds, exact = {}, [], {}
    for item in args.pred:
        name, path = item.split("=", 1)
        pred = load(path)
        counts = collections.Counter()
        exact[name] = set()
        for i, locus in enumerate(loci):
            kind, _ = classify(locus, pred, loci)
            counts[kind] += 1
            if kind == "exact":
                exact[name].add(i)
            if kind not in kinds:
                kinds.append(kind)
            if name == args.detail and kind.startswith("missed"):
                g = locus[0]
                print(f"{name} missed {g.id} {g.strand} {g.start:,}-{g.end:,} "
                      f"exons {[e - s for s, e in g.cds]}")
        counts["predicted genes on no truth locus"] = sum(
            1 for q in pred if not any(cds_overlap(q, g) for g in truth if g.strand == q.strand))
        table[name] = counts
    kinds.append("predicted genes on no truth locus")
    print(f"{CHROM}:{lo:,}-{hi:,}, {len(loci)} truth loci ({len(truth)} transcripts)\n")
    print("| kind | " + " | ".join(table) + " |")
    print("|---|" + "---|" * len(table))
    for k in kinds:
        print(f"| {k} | " + " | ".join(str(table[n][k]) for n in table) + " |")
    inner, outer = nested(loci)
    print(f"\n{len(inner)} loci lie inside an intron of another locus (nested) and {len(outer)}"
          " hold one (outer): one label per base can get at most one of each pair right.\n")
    print("| " + " | ".join(["loci"] + list(table)) + " |")
    print("|---|" + "---|" * len(table))
    for name, group in (("nested", inner), ("outer", outer)):
        cells = [f"{len(exact[n] & group)} / {len(group)}" for n in table]
        print(f"| {name}: exact / all | " + " | ".join(cells) + " |")
    return 0


def nested(loci) -> tuple[set, set]:
    """Indices of the truth loci that lie wholly inside an intron of another locus's
    transcript, and of the loci holding them."""
    inner, outer = set(), set()
    for i, locus in enumerate(loci):
        s, e = min(g.start for g in locus), max(g.end for g in locus)
        for j, other in enumerate(loci):
            if j != i and any(a <= s and e <= b for h in other for a, b in introns(h)):
                inner.add(i)
                outer.add(j)
    return inner, outer


if __name__ == "__main__":
    sys.exit(main())
