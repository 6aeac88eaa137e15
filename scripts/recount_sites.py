"""Recount a gene-model checkpoint's site matrices (crf.site_scores) at its run's own
training windows with another order or other windows (crf.site_order, crf.site_windows),
every learned weight kept, and write the checkpoint with them to OUT: an experiment's
tool, the decode-time side of a site model without training again (the site weights were
learned beside the matrices the run counted).

    python scripts/recount_sites.py MODEL.pt OUT.pt [--order 0|1]
        [--window SITE=BEFORE,AFTER ...] [--fasta FA] [--annotation GFF]

--order and each --window default to the run's own (its config's crf.site_order and
crf.site_windows); with all of them its own, the matrices come out as they were (a
check).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from semiseg.checkpoint import Checkpoint, load_checkpoint, save_checkpoint  # noqa: E402
from semiseg.model import Segmenter, model_hash  # noqa: E402
from semiseg.train.loop import _load_data  # noqa: E402
from semiseg.train.tables import count_sites  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--order", type=int, default=None, help="default: the run's own")
    ap.add_argument("--window", action="append", default=[], metavar="SITE=BEFORE,AFTER")
    ap.add_argument("--fasta", nargs="+")
    ap.add_argument("--annotation")
    a = ap.parse_args()
    data = copy.deepcopy(load_checkpoint(a.model).data)
    crf = data["config"]["crf"]
    if not crf.get("site_scores"):
        sys.exit(f"{a.model}: no site scores (crf.site_scores)")
    if a.order is not None:
        crf["site_order"] = a.order
    windows = dict(crf.get("site_windows") or {})  # the run's own, each --window over it
    windows.update({k: [int(v) for v in w.split(",")]
                    for k, w in (s.split("=", 1) for s in a.window)})
    crf["site_windows"] = windows or None
    if a.fasta:
        data["config"]["inputs"]["fasta"] = a.fasta
    if a.annotation:
        data["config"]["labels"]["annotation"] = a.annotation
    ckpt = Checkpoint(a.out, data)
    cfg = ckpt.config
    _, _, scheme, _, train_ds, _ = _load_data(cfg)
    model = Segmenter(data["n_features"], len(data["labels"]["labels"]), cfg,
                      scheme=ckpt.scheme)
    matrices = ("crf.sites.pwm_donor", "crf.sites.pwm_acceptor", "crf.sites.pwm_start",
                "crf.sites.pwm_stop")
    missing, unexpected = model.load_state_dict(
        {k: v for k, v in data["model"].items() if k not in matrices}, strict=False)
    if set(missing) - set(matrices) or unexpected:
        sys.exit(f"{a.model}: the model does not fit ({missing}, {unexpected})")
    count_sites(model, scheme, train_ds)
    data["model"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
    data["model_hash"] = model_hash(data["model"])
    save_checkpoint(data, a.out)
    print(f"{a.model}: site matrices of order {crf.get('site_order', 0)}"
          + (f", windows {crf['site_windows']}" if crf["site_windows"] else "")
          + f" -> {a.out}")


if __name__ == "__main__":
    main()
