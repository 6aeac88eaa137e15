"""How well the gene model's counted site matrices tell true splice sites from the other
GT / AG of held-out sequence (issue 41's splice-site model), for site-matrix orders and
windows side by side (crf.site_order, crf.site_windows).

    python benchmarks/site_discrimination.py [--config configs/gene_structure.yaml]
        [--set KEY=VALUE ...] [--orders 0,1] [--window SITE=BEFORE,AFTER ...]

The config's training windows count the matrices (sites.count_site_pwms, as `semiseg
train` does); its validation windows are scored (sites.pwm_scores, as the CRF head
does): the true donors and acceptors (the gold's anchors, both strands) against every
other position where the grammar lets such a label stand (seqmask.splice_sites: GT at a
donor, AG at an acceptor, read on the strand). Prints per site, order and window: the
true sites and candidates, the AUC, and the decoys scoring at or above the score that
keeps 90% of the true sites.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from lib import header  # noqa: E402


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    allv = np.concatenate([pos, neg])
    ranks = allv.argsort(kind="stable").argsort() + 1
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2)
                 / (len(pos) * len(neg)))


def main() -> None:
    from semiseg.config.load import load_config
    from semiseg.genemodel.frames import FrameLayout
    from semiseg.genemodel.seqmask import splice_sites
    from semiseg.genemodel.sites import anchors, count_site_pwms, pwm_scores, site_windows
    from semiseg.train.loop import _load_data

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=os.path.join(ROOT, "configs", "gene_structure.yaml"))
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--orders", default="0,1")
    ap.add_argument("--window", action="append", default=[], metavar="SITE=BEFORE,AFTER",
                    help="a window to try beside the built-in ones (repeatable)")
    a = ap.parse_args()
    cfg = load_config(a.config, a.sets)
    _, _, scheme, _, train_ds, valid_ds = _load_data(cfg)
    layout = FrameLayout.from_scheme(scheme)
    kinds = [layout.kind_names[k] for k in layout.kind]
    tries = [None] + [{k: tuple(int(v) for v in w.split(","))}
                      for k, w in (s.split("=", 1) for s in a.window)]
    onehots = [x[:, :4] for x in train_ds.x]
    print(header("site_discrimination.py", "cpu", " ".join(sys.argv[1:])))
    print("| site | window | order | training sites | held-out true / candidates | AUC "
          "| decoys >= the 90%-recall score |\n|---|---|---|---|---|---|---|")
    for sizes in tries:
        win = site_windows(sizes)
        sites = tuple(sizes) if sizes else ("donor", "acceptor")
        for order in (int(o) for o in a.orders.split(",")):
            mats, n = count_site_pwms(onehots, train_ds.y, layout, sites=sites, order=order,
                                      sizes=sizes)
            for site in sites:
                pos, neg = [], []
                for x, y in zip(valid_ds.x, valid_ds.y):
                    x = np.asarray(x[:, :4], np.float32)
                    xt = torch.from_numpy(x.T.copy())[None]
                    codes = torch.from_numpy(np.where(x.max(1) > 0.5, x.argmax(1), 4))
                    for st in "+-":
                        cand = np.flatnonzero(splice_sites(codes, st, site).numpy())
                        sc = pwm_scores(xt, torch.from_numpy(mats[site]), win[site][0],
                                        st == "-")[0].numpy()
                        true = set(anchors(np.asarray(y), [i for i, k in enumerate(kinds)
                                                           if k == f"{site}{st}"],
                                           st == "-").tolist())
                        for p in cand:
                            (pos if p in true else neg).append(sc[p])
                pos, neg = np.array(pos), np.array(neg)
                thr = np.quantile(pos, 0.10)
                print(f"| {site} | -{win[site][0]}..+{win[site][1] - 1} | {order} | {n[site]} "
                      f"| {len(pos)} / {len(pos) + len(neg)} | {auc(pos, neg):.4f} "
                      f"| {(neg >= thr).sum()} ({(neg >= thr).mean():.2%}) |", flush=True)


if __name__ == "__main__":
    main()
