"""Intron content at a lower chain order (issue 41's tenth round, docs/gene_model.md):
how well a table counted on the training windows tells introns from outside sequence on
new sequence, and a checkpoint with such a table added at a fixed weight.

    python benchmarks/fly_intron_content.py stats MODEL
    python benchmarks/fly_intron_content.py write MODEL OUT --order 3 --weight 0.5

stats: the mean log-odds per base (log P_intron(base | k bases before) - log
P_outside(same), k = 0..5) at the gold intron bases, the gold outside bases and the
introns read on the other strand, of the training and the validation windows of the
model's own config, the table counted on the training windows. write: MODEL with
`crf.intron_content` on and the order-k table as `crf.content.intron_table` at the fixed
weight (everything else as trained; annotate it and score it with fly_baselines.py).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from semiseg.checkpoint import build_model, load_checkpoint, save_checkpoint  # noqa: E402
from semiseg.genemodel.content import (  # noqa: E402
    ORDER,
    WORDS,
    _cond,
    _strand_words,
    intron_and_outside_codes,
)
from semiseg.model import model_hash  # noqa: E402
from semiseg.train.loop import _load_data  # noqa: E402
from semiseg.train.tables import _gold_layout  # noqa: E402


def counts(ckpt) -> dict:
    """Word counts per split: intron (read on its own strand), anti (an intron read on
    the other strand) and outside (both strands)."""
    _, _, scheme, _, train_ds, valid_ds = _load_data(ckpt.config)
    intron, outside = intron_and_outside_codes(_gold_layout(build_model(ckpt)[0], scheme))
    out = {}
    for name, ds in (("train", train_ds), ("valid", valid_ds)):
        c = {k: np.zeros(WORDS) for k in ("intron", "anti", "outside")}
        for s, ids, y, _ in _strand_words([x[:, :4] for x in ds.x], ds.y):
            ok = ids >= 0
            other = "-" if s == "+" else "+"
            c["outside"] += np.bincount(ids[ok & np.isin(y, outside)], minlength=WORDS)
            c["intron"] += np.bincount(ids[ok & np.isin(y, intron[s])], minlength=WORDS)
            c["anti"] += np.bincount(ids[ok & np.isin(y, intron[other])], minlength=WORDS)
        out[name] = c
    return out


def cond(c: np.ndarray, k: int) -> np.ndarray:
    """log P(base | the k bases before) from (ORDER+1)-mer counts, at every
    (ORDER+1)-mer id: the counts summed over the oldest ORDER - k bases, written back at
    each id, then content._cond (its pseudo-count and normalisation)."""
    ck = c.reshape([4] * (ORDER + 1)).sum(axis=tuple(range(ORDER - k)))
    return _cond(np.broadcast_to(ck, [4] * (ORDER + 1)).reshape(WORDS))


def table(c: dict, k: int) -> np.ndarray:
    return cond(c["train"]["intron"], k) - cond(c["train"]["outside"], k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["stats", "write"])
    ap.add_argument("model")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--order", type=int, default=3)
    ap.add_argument("--weight", type=float, default=1.0)
    a = ap.parse_args()
    ckpt = load_checkpoint(a.model)
    c = counts(ckpt)
    if a.what == "stats":
        print("| order | " + " | ".join(f"{s} {k}" for s in c for k in c[s]) + " |")
        print("|---" * (1 + 2 * len(c["train"])) + "|")
        for k in range(ORDER + 1):
            lo = table(c, k)
            row = [f"{(v * lo).sum() / v.sum():+.4f}" for s in c for v in c[s].values()]
            print(f"| {k} | " + " | ".join(row) + " |")
        return
    if not a.out:
        sys.exit("write: give OUT")
    state = dict(ckpt.data)
    state["config"] = {**state["config"], "crf": {**state["config"]["crf"],
                                                  "intron_content": True}}
    params = dict(state["model"])
    params["crf.content.intron_table"] = torch.as_tensor(table(c, a.order), dtype=torch.float32)
    params["crf.content.intron_weight"] = torch.tensor(a.weight)
    state["model"] = params
    state["model_hash"] = model_hash(params)
    save_checkpoint(state, a.out)
    print(f"{a.out}: order {a.order} intron table at weight {a.weight}")


if __name__ == "__main__":
    main()
