"""How much of a fly region's base-level score is lost to genes the truth does not hold.

The shared fly annotation (data/fly/README.md) is not complete: AUGUSTUS and semiseg
both call multi-exon genes where it has none. Each such base counts against every gene
finder as a false CDS or intron. This script measures it: for each prediction, the
"agreed unannotated" bases are those inside a gene of that prediction AND inside a gene
of AUGUSTUS on the same strand, but outside every truth gene (pieces under 10 bp, the
stop-codon conventions, dropped). The prediction and AUGUSTUS are then scored again by
`semiseg evaluate --tolerance 0` (as fly_baselines.py does) on the region without those
bases. The mask needs two independent gene finders to agree, so it favours neither;
it says how far the truth's gaps, not the models, hold a score down.

    python benchmarks/fly_unannotated.py --region late --pred shipped=ANN.gff3 ...

Prints a Markdown table with the date, machine and commit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fly_baselines as fb
import gene_metrics as gm

from semiseg.evaluate import genelevel
from semiseg.evaluate.genelevel import merge
from semiseg.genome.windows import subtract_regions

MIN_PIECE = 10


def spans(path: str, lo: int, hi: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """strand -> merged (start, end) spans of the gene models of a GFF3/GTF that lie in
    [lo, hi) (clipped)."""
    out: dict[str, list[tuple[int, int]]] = {"+": [], "-": []}
    for g in genelevel.read_gene_models(path, chroms=[fb.CHROM]):
        a, b = max(lo, g.cds[0][0]), min(hi, g.cds[-1][1])
        if a < b:
            out[g.strand].append((a, b))
    return {s: merge(v) for s, v in out.items()}


def subtract(x, y) -> tuple[tuple[int, int], ...]:
    """The parts of intervals x outside intervals y (genome.windows.subtract_regions)."""
    return merge((a, b) for _, a, b in subtract_regions([("", a, b) for a, b in x],
                                                        [("", a, b) for a, b in y]))


def intersect(x, y) -> tuple[tuple[int, int], ...]:
    """The parts of intervals x inside intervals y."""
    return subtract(x, subtract(x, y))


def agreed_unannotated(pred: dict, aug: dict, truth: dict) -> list[tuple[int, int]]:
    """Bases in a gene of both predictions (same strand) and in no truth gene."""
    both = merge(intersect(pred["+"], aug["+"]) + intersect(pred["-"], aug["-"]))
    genic = merge(truth["+"] + truth["-"])
    return [(a, b) for a, b in subtract(both, genic) if b - a >= MIN_PIECE]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--region", choices=sorted(fb.REGIONS), default="late")
    ap.add_argument("--pred", action="append", required=True, metavar="NAME=PATH")
    ap.add_argument("--augustus", default=None,
                    help="AUGUSTUS's GTF (default: its saved test- or valid-region run)")
    args = ap.parse_args(argv)
    lo, hi = fb.REGIONS[args.region]
    aug_path = args.augustus or os.path.join(
        fb.OUTDIR, "augustus_valid.gtf" if lo < 3_000_000 else "augustus_test.gtf")
    seq = gm.read_fasta(fb.FASTA)[fb.CHROM]
    with tempfile.TemporaryDirectory() as tmp:
        region_bed, truth, _ = fb.region_files(args.region, seq, tmp)
        truth_spans, aug_spans = spans(truth, lo, hi), spans(aug_path, lo, hi)
        rows = []
        for item in args.pred:
            name, _, path = item.partition("=")
            mask = agreed_unannotated(spans(path, lo, hi), aug_spans, truth_spans)
            keep = os.path.join(tmp, f"keep_{len(rows)}.bed")
            with open(keep, "w") as fh:
                fh.writelines(f"{fb.CHROM}\t{a}\t{b}\n" for a, b in subtract([(lo, hi)], mask))
            cells = [name, f"{sum(b - a for a, b in mask):,} in {len(mask)}"]
            for p in (path, aug_path):
                before = fb.score(p, truth, region_bed, tmp, args.region, "x")["macro_f1"]
                after = fb.score(p, truth, keep, tmp, args.region, "x")["macro_f1"]
                cells += [f"{before:.3f}", f"{after:.3f}"]
            rows.append(cells)
    cmd = "python benchmarks/fly_unannotated.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    print(f"Fly {args.region} region {fb.CHROM}:{lo:,}-{hi:,}; AUGUSTUS: "
          f"{os.path.relpath(aug_path, fb.ROOT)}. {gm.machine()}, commit {gm.commit()}. "
          f"Command: `{cmd.strip()}`.\n")
    print(gm.markdown(["prediction", "agreed unannotated bp (pieces)", "its macro F1",
                       "masked", "AUGUSTUS macro F1", "masked"], rows))


if __name__ == "__main__":
    main()
