"""The gold-path check's time before the first training epoch (issue 41, "real annotations
train"): the fly config's windows read as `semiseg train` reads them (`_load_data`), the
check's own statistics printed as a table (wall and CPU seconds, windows, bases through
the max-sum, gene pieces and those answered by an identical one, windows not allowed),
and a digest of every window's labels afterwards, so two checkouts can be compared.

    python benchmarks/gold_check.py [--runs 2] [--set KEY=VALUE ...]

`--tree DIR` imports semiseg from another checkout (its own folder), for a side-by-side
run against older code; the columns that checkout's check does not report are "-".
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FLY = ["inputs.fasta=../data/fly/chr2R_2M_6M.fa", "labels.annotation=../data/fly/chr2R_2M_6M.gff3",
       "windows.chroms=null", "windows.holdout=[chr2R_2M_6M:3000000-4000000]",
       "windows.valid_offset=0.6375", "windows.valid_fraction=0.1125"]


def one_run(config: str, sets: list[str]) -> dict:
    """The check's statistics of one `_load_data`, and the labels' digest."""
    import numpy as np

    import semiseg.genemodel.annotation_check as ac
    from semiseg.config.load import load_config
    from semiseg.train.loop import _load_data

    stats: dict = {}
    real = ac.report

    def report(s, cleanup):
        stats.update(s)
        real(s, cleanup)
    ac.report = report
    try:
        _, _, _, _, tr, va = _load_data(load_config(config, FLY + sets))
    finally:
        ac.report = real
    h = hashlib.sha1()
    for ds in [tr, va, *tr.phase_sets]:
        for y in ds.y:
            h.update(np.ascontiguousarray(y).tobytes())
    stats["labels"] = h.hexdigest()[:12]
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--tree", default=None, help="another checkout's folder")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    root = os.path.abspath(args.tree) if args.tree else os.path.dirname(HERE)
    sys.path.insert(0, root)
    sys.path.insert(1, HERE)
    os.chdir(root)
    from lib import header

    from semiseg import ui

    ui.set_quiet(True)
    runs = [one_run(os.path.join(root, "configs", "gene_structure.yaml"), args.sets)
            for _ in range(args.runs)]
    print(header("benchmarks/gold_check.py", "cpu", "python " + " ".join(sys.argv)))
    print(f"semiseg from {root}\n")
    print("| runs s (wall) | median s | CPU s | windows | bases through the pass | pieces | "
          "reused | not allowed | labels |\n|---|---|---|---|---|---|---|---|---|")
    r = runs[-1]
    wall = [x["seconds"] for x in runs]
    cpu = ", ".join(f"{x['cpu_seconds']:.1f}" for x in runs)
    print(f"| {', '.join(f'{w:.1f}' for w in wall)} | {statistics.median(wall):.1f} | "
          f"{cpu} | {r['windows']} | "
          f"{r['bases']:,} | {r.get('pieces', '-')} | {r.get('reused', '-')} | "
          f"{r['failed']} | {r['labels']} |")


if __name__ == "__main__":
    main()
