"""A gene model's intron length tails made strand-symmetric (issue 41, an experiment).

The per-base score of a long intron against intergenic sequence (the tail piece's score
per base plus the tied-intron bias, `fly_long_introns.py balance`) is learned once per
strand, though the two strands hold the same biology and training reads both (reverse
complement). The fly seeds' values differ by strand and seed (-0.0001 to -0.0008 nats a
base) and predict which long introns each seed loses. This script writes a copy of a
checkpoint whose two strands share the mean of their learned values: the intron tail
pieces' score (duration at the tail's length plus the tail-to-tail transition) and the
tied-intron bias, each set to the mean of the two strands'; nothing else changes.

    python benchmarks/fly_symmetric_tails.py IN.pt OUT.pt
"""

from __future__ import annotations

import argparse
import sys

import torch

from semiseg.checkpoint import load_checkpoint, save_checkpoint
from semiseg.genemodel.frames import FrameLayout
from semiseg.model import model_hash


def symmetrise(path_in: str, path_out: str) -> list[str]:
    """Write the strand-symmetric copy; return what changed, one line each."""
    raw = torch.load(path_in, map_location="cpu", weights_only=False)
    ck = load_checkpoint(path_in)
    c = ck.config.crf
    lay = FrameLayout.from_scheme(ck.scheme, tails=c.run_tails, exon_types=c.exon_types,
                                  long_introns=c.long_introns)
    names, _ = lay.param_kinds()
    sd = raw["model"]
    dur, tr = sd["crf.duration"], sd["crf.transition"]
    out = []
    plus, minus = names.index("intron~+"), names.index("intron~-")
    c_plus = next(c for c in range(len(lay)) if lay.kind[c] == lay.kind_of("intron~+"))
    td = lay.tail_duration(c_plus, c.max_duration)
    piece = [float(dur[td - 1, k] + tr[k, k]) for k in (plus, minus)]
    mean = sum(piece) / 2
    for k, p in zip((plus, minus), piece):
        dur[td - 1, k] += mean - p
    out.append(f"intron tail piece ({td} bp): {piece[0]:.4f} (+), {piece[1]:.4f} (-) "
               f"-> {mean:.4f} both")
    if "crf.noncoding_bias" in sd:
        b = sd["crf.noncoding_bias"]
        old = b.tolist()
        b[:] = b.mean()
        out.append(f"tied-intron bias: {old} -> {b.tolist()}")
    raw["model_hash"] = model_hash(sd)
    save_checkpoint(raw, path_out)  # a changed model: a new content hash
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_in")
    ap.add_argument("model_out")
    args = ap.parse_args(argv)
    for line in symmetrise(args.model_in, args.model_out):
        print(line)


if __name__ == "__main__":
    sys.exit(main())
