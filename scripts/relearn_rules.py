"""Learn a gene-model checkpoint's gene rules (`annotate.learn_rules`: donor motif,
branch rule, first ATG, long ORFs, soft-masked genes) again from its run's own training
windows with today's code, every learned weight kept, and write the checkpoint with them
to OUT: for a model trained before a rule existed (the soft-masked genes rule,
`annotate.max_masked_cds`, came after the shipped fly model was trained). The rules are
applied at annotation only, so the model's parameters and hash stay as they were.

    python scripts/relearn_rules.py MODEL.pt OUT.pt [--rules max_masked_cds,...]
        [--fasta FA] [--annotation GFF]

--rules: the rules to replace (default: all five); the others keep the checkpoint's
values. Each rule's value before and after is printed.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from semiseg.checkpoint import Checkpoint, load_checkpoint, save_checkpoint  # noqa: E402
from semiseg.train.loop import _load_data  # noqa: E402
from semiseg.train.tables import with_learned_rules  # noqa: E402

RULES = ("donor_motif", "branch_penalty", "first_atg", "long_orfs", "max_masked_cds")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--rules", default=",".join(RULES))
    ap.add_argument("--fasta", nargs="+")
    ap.add_argument("--annotation")
    a = ap.parse_args()
    rules = [r for r in a.rules.split(",") if r]
    if not rules or set(rules) - set(RULES):
        sys.exit(f"--rules: expected some of {', '.join(RULES)}, got {a.rules}")
    data = copy.deepcopy(load_checkpoint(a.model).data)
    paths = (data["config"]["inputs"]["fasta"], data["config"]["labels"]["annotation"])
    if a.fasta:
        data["config"]["inputs"]["fasta"] = a.fasta
    if a.annotation:
        data["config"]["labels"]["annotation"] = a.annotation
    cfg = Checkpoint(a.out, data).config
    cfg = dataclasses.replace(cfg, annotate=dataclasses.replace(cfg.annotate,
                                                                learn_rules=True))
    cfg, gdata, scheme, _, train_ds, _ = _load_data(cfg)
    learned = with_learned_rules(cfg, scheme, train_ds, gdata.fasta).annotate
    ann = data["config"]["annotate"]
    for r in rules:
        print(f"{r}: {ann.get(r)!r} -> {getattr(learned, r)!r}")
        ann[r] = getattr(learned, r)
    # the paths as the run had them
    data["config"]["inputs"]["fasta"], data["config"]["labels"]["annotation"] = paths
    save_checkpoint(data, a.out)
    print(f"{a.model} -> {a.out}")


if __name__ == "__main__":
    main()
