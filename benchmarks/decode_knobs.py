"""Two decoding knobs of the gene model tried on the yeast data (issue 10; RESULTS.md,
"1-bp annotation on one H100", the last part): nothing here is shipped.

    python benchmarks/decode_knobs.py gamma [--gammas 0.8,1,1.25,1.5,2,3]
    python benchmarks/decode_knobs.py ensemble MODEL [MODEL ...]

gamma: the shipped model's internal posteriors (penalty 8) with the posteriors of every
genic label (all but the background) multiplied by gamma before the posterior decode
(gamma-centroid decoding); scored on chrII's training part, its held-out last 15% and
chrI. chrII chooses; chrI is for the record.
ensemble: the internal posteriors of several models averaged before the posterior
decode, on chrI. Scores as intron_penalty_grid.py: macro F1 / exact segment F1 / exact
boundary F1 over intergenic, CDS+ and CDS- at tolerance 0.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from intron_penalty_grid import YEAST, score, truth_labels  # noqa: E402

from semiseg.annotate import Annotator, Item  # noqa: E402
from semiseg.checkpoint import checkpoint_scheme, load_checkpoint  # noqa: E402
from semiseg.genome import Fasta, GenomeData  # noqa: E402

SHIPPED = os.path.join(ROOT, "semiseg", "models", "yeast_cds_frames.pt")


def posteriors(model: str, regions, penalty: float = 8.0):
    """{region name: (CRF terms, internal posteriors, truth labels)} and the head."""
    ckpt = load_checkpoint(model)
    scheme = checkpoint_scheme(ckpt)
    out, crf = {}, None
    for name, chrom, lo, frac in regions:
        fasta = Fasta(os.path.join(YEAST, f"{chrom}.fa"))
        ann = Annotator(ckpt, GenomeData.from_config(ckpt["genome"], fasta),
                        torch.device("cpu"), 100000, 5000, 2_000_000, 2_000_000,
                        reverse_complement=True)
        crf = ann.model.crf
        crf.intron_penalty = penalty
        L = fasta.chrom_sizes[chrom]
        em = ann.emissions(Item(chrom, 0, L))[0]
        tru = truth_labels(scheme, chrom, L)
        a, b = int(L * lo) // 3 * 3, int(L * frac) // 3 * 3 if frac < 1 else L
        with torch.no_grad():
            t = crf._terms(em[None, a:b], None)
            out[name] = (t, crf._posteriors(t, "auto"), tru[a:b])
    return out, crf, len(scheme.names)


def decoded(crf, t, g, tru, C) -> str:
    lab = crf._decode_posteriors(t, g, "auto").labels
    pred = torch.where(lab >= 0, crf.collapse_idx[lab.clamp(min=0)], lab)[0].numpy()
    return " / ".join(f"{x:.3f}" for x in score(pred, tru, C))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gamma")
    g.add_argument("--gammas", default="0.8,1,1.25,1.5,2,3")
    e = sub.add_parser("ensemble")
    e.add_argument("models", nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(2)
    if args.what == "gamma":
        regions = [("chrII train", "chrII", 0, 0.85), ("chrII valid", "chrII", 0.85, 1),
                   ("chrI", "chrI", 0, 1)]
        post, crf, C = posteriors(SHIPPED, regions)
        lay = crf.layout
        genic = torch.tensor([float(lay.scheme_label[c] != checkpoint_scheme(
            load_checkpoint(SHIPPED)).background) for c in range(len(lay))])
        print("| gamma | " + " | ".join(n for n, *_ in regions) + " |")
        print("|---|" + "---|" * len(regions))
        for gam in [float(x) for x in args.gammas.split(",")]:
            w = 1 + (gam - 1) * genic
            print(f"| {gam:g} | " + " | ".join(decoded(crf, t, gp * w, tru, C)
                                               for t, gp, tru in post.values()) + " |",
                  flush=True)
    else:
        gs = []
        for m in args.models:
            post, crf, C = posteriors(m, [("chrI", "chrI", 0, 1)])
            t, gp, tru = post["chrI"]
            gs.append(gp)
            print(f"{m}: {decoded(crf, t, gp, tru, C)}", flush=True)
        print(f"mean of {len(gs)} models' posteriors: "
              f"{decoded(crf, t, torch.stack(gs).mean(0), tru, C)}")


if __name__ == "__main__":
    main()
