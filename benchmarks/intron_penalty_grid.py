"""Choose the gene model's annotate.intron_penalty on chrII (issue 10).

For each penalty (a log-score taken from each intron when annotating) the model's
posteriors are recomputed on chrII (its training part and the held-out last 15%) and
on chrI, decoded as `semiseg annotate` decodes them (posterior decoding), and scored at
tolerance 0 over intergenic / CDS+ / CDS- (introns count as not-CDS): macro F1, exact
segment F1, exact boundary F1, and predicted introns (exactly right / predicted / true).
Only the chrII columns choose; chrI is printed for the record.

    python benchmarks/intron_penalty_grid.py [--model semiseg/models/yeast_cds_frames.pt]
        [--penalties 0,2,4,8,10000] [--branch-penalties 0] [--rc on|off]

--branch-penalties: annotate.branch_penalty values (a log-score taken from each intron
whose acceptor has no branch point within one base of the consensus), each combined with
each intron penalty.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from semiseg.annotate import Annotator, Item  # noqa: E402
from semiseg.checkpoint import checkpoint_scheme, load_checkpoint  # noqa: E402
from semiseg.genome import Fasta, GenomeData  # noqa: E402
from semiseg.intervals import read_truth  # noqa: E402
from semiseg.metrics import add_segment_counts, new_segment_counts, prf  # noqa: E402

YEAST = os.path.join(ROOT, "data", "yeast")
TRUTH = os.path.join(YEAST, "yeast_chrI_chrII.gff3")


def truth_labels(scheme, chrom: str, L: int) -> np.ndarray:
    t = read_truth(TRUTH, scheme, {chrom: L})
    a = np.full(L, scheme.background, np.int64)
    idx = {n: i for i, n in enumerate(scheme.names)}
    for s, e, n in zip(*t.intervals[chrom]):
        a[s:e] = idx[n]
    return a


def score(pred: np.ndarray, tru: np.ndarray, C: int) -> tuple[float, float, float]:
    """Mean over labels 0, 1, 2 (intergenic, CDS+, CDS-) of base F1, exact segment F1
    and exact boundary F1."""
    seg = new_segment_counts(C)
    add_segment_counts(seg, tru, pred, 0)
    conf = np.bincount(tru * C + pred, minlength=C * C).reshape(C, C)
    rows = []
    for c in range(3):
        rows.append((prf(conf[c, c], conf[:, c].sum(), conf[c, :].sum())[2],
                     prf(seg["exact"][c], seg["n_pred"][c], seg["n_true"][c])[2],
                     prf(seg["b_hit"][c], seg["b_pred"][c], seg["b_true"][c])[2]))
    return tuple(np.mean(rows, axis=0))


def introns(a: np.ndarray) -> set:
    m = np.concatenate([[0], (a > 2).astype(int), [0]])
    d = np.diff(m)
    return set(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "semiseg", "models",
                                                    "yeast_cds_frames.pt"))
    ap.add_argument("--penalties", default="0,2,4,8,10000")
    ap.add_argument("--branch-penalties", default="0")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rc", choices=["on", "off"], default="off",
                    help="average the reverse complement's emissions in (annotate's "
                         "--reverse-complement)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.model)
    scheme = checkpoint_scheme(ckpt)
    em, tru = {}, {}
    for chrom in ("chrI", "chrII"):
        fasta = Fasta(os.path.join(YEAST, f"{chrom}.fa"))
        data = GenomeData.from_config(ckpt["genome"], fasta)
        ann = Annotator(ckpt, data, torch.device("cpu"), 100000, 5000, 2_000_000,
                        2_000_000, reverse_complement=args.rc == "on")
        L = dict(fasta.chrom_sizes)[chrom]
        em[chrom] = ann.emissions(Item(chrom, 0, L))[0]
        tru[chrom] = truth_labels(scheme, chrom, L)
    crf = ann.model.crf
    cut = int(len(tru["chrII"]) * 0.85) // 3 * 3  # the validation split, codon-aligned
    regions = [("chrII train", "chrII", 0, cut), ("chrII valid", "chrII", cut, None),
               ("chrI", "chrI", 0, None)]
    print("| penalty | branch penalty | " + " | ".join(f"{n}: macro F1 / exact segment F1 / exact boundary "
                                      f"F1 / introns right/predicted/true" for n, *_ in regions)
          + " |")
    print("|---|---|" + "---|" * len(regions))
    grid = [(float(p), float(b)) for p in args.penalties.split(",")
            for b in args.branch_penalties.split(",")]
    for pen, bpen in grid:
        crf.intron_penalty, crf.branch_penalty = pen, bpen
        cells = []
        for _, chrom, lo, hi in regions:
            hi = hi or len(tru[chrom])
            seg, _, _ = crf.decode_with_marginals(em[chrom][None, lo:hi], None)
            pred, t = seg.labels[0].numpy(), tru[chrom][lo:hi]
            f, se, bf = score(pred, t, len(scheme.names))
            pi, ti = introns(pred), introns(t)
            cells.append(f"{f:.3f} / {se:.3f} / {bf:.3f} / {len(pi & ti)}/{len(pi)}/{len(ti)}")
        print(f"| {pen:g} | {bpen:g} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
