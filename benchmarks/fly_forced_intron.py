"""How far a split gene is from its long-intron isoform, in the model's own scores (issue 41).

The shipped fly model splits the test region's largest gene (3.4996-3.5704 Mb of
chr2R_2M_6M, one isoform with a 52 kb intron) and calls 45 kb of the intron intergenic.
This script runs the model's Viterbi over a region twice on the CPU: free, and with the
head's `allowed` mask restricted to one strand's intron labels (the inside and its run
tails, all frames) over a span; it prints both scores, their difference, and each path's
long runs and codons, so one can read whether the forced path is the annotated isoform.

    python benchmarks/fly_forced_intron.py --region 3480000-3590000 --force 3506000-3544000
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="fly")
    ap.add_argument("--region", default="3480000-3590000")
    ap.add_argument("--force", default="3506000-3544000")
    ap.add_argument("--strand", default="-", choices=["+", "-"])
    args = ap.parse_args()
    import torch
    from lib import header

    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.crf import viterbi
    from semiseg.genome import Fasta, GenomeData

    lo, hi = (int(v) for v in args.region.split("-"))
    f0, f1 = (int(v) for v in args.force.split("-"))
    ck = load_checkpoint(resolve_model(args.model))
    fasta = os.path.join(os.path.dirname(HERE), "data", "fly", "chr2R_2M_6M.fa")
    with Fasta(fasta) as fa:
        ann = Annotator(ck, GenomeData.from_config(ck.genome, fa), torch.device("cpu"),
                        100000, 5000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", lo, hi))
    head = ann.model.crf
    names = head.layout.names
    terms = head._terms(em[None], torch.tensor([em.shape[0]]))

    def best(allowed):
        t = dict(terms, allowed=allowed)
        seg = viterbi(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"), **t)
        return float(seg.score[0]), seg.segments[0]

    intron = torch.tensor([n.startswith(f"intron{args.strand}") for n in names])
    forced = terms["allowed"].clone()
    forced[0, f0 - lo:f1 - lo] &= intron
    print(header("benchmarks/fly_forced_intron.py", "cpu", "python " + " ".join(sys.argv)))
    print(f"model {args.model}, chr2R_2M_6M:{lo}-{hi}, forced intron{args.strand} over "
          f"{f0}-{f1}\n")
    scores = {}
    for name, allowed in (("free", terms["allowed"]), ("forced", forced)):
        score, segs = best(allowed)
        scores[name] = score
        runs = []  # a label's runs joined across frames and tails
        for s, d, c in segs:
            kind = names[c].rstrip("~").split("_")[0]
            if runs and runs[-1][2] == kind:
                runs[-1][1] += d
            else:
                runs.append([lo + s, d, kind])
        shown = [f"{k} {s:,}+{d:,}" for s, d, k in runs
                 if d >= 2000 or k.startswith(("start", "stop"))]
        print(f"- {name}: score {score:.2f}; {'; '.join(shown)}")
    print(f"\nfree - forced: {scores['free'] - scores['forced']:.2f} nats over "
          f"{f1 - f0:,} bp forced")


if __name__ == "__main__":
    main()
