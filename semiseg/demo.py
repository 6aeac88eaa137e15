"""`semiseg demo OUTDIR`: annotate yeast chrI with the reading-frame gene model at 1 bp,
evaluate against SGD at the exact base.

The model is the one shipped in semiseg/models/yeast_cds_frames.pt (trained on chrII by
`semiseg train --config configs/demo.yaml` on one GPU; docs/gene_model.md); with
`--train` it is trained first. Writes OUTDIR/model/ (with --train: the training run),
OUTDIR/annotation.* (as `semiseg annotate` with
PREFIX OUTDIR/annotation), OUTDIR/evaluation.{tsv,json} and OUTDIR/example.png (a region
of chrI: truth, prediction, posteriors). Re-running continues an interrupted run.

The settings are those of configs/demo.yaml (a test keeps the two equal); they are kept
here too so the demo needs no file but its data. The data (data/yeast in the repository)
travel inside the wheel as semiseg/data/yeast (setup.py), so `pip install semiseg &&
semiseg demo out` runs anywhere.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from . import ui
from .config.load import from_dict
from .config.schema import Config
from .errors import SemisegError

DATA_FILES = ("chrI.fa", "chrII.fa", "yeast_chrI_chrII.gff3")

SCHEME = {
    "name": "cds",
    "kind": "gene_structure",
    "background": "intergenic",
    "labels": [
        {"name": "intergenic", "strand": ".", "color": [200, 200, 200]},
        {"name": "CDS+", "role": "CDS", "strand": "+", "color": [0, 90, 200]},
        {"name": "CDS-", "role": "CDS", "strand": "-", "color": [200, 40, 40]},
        {"name": "intron+", "role": "intron", "strand": "+", "color": [130, 180, 240]},
        {"name": "intron-", "role": "intron", "strand": "-", "color": [240, 150, 150]},
    ],
    "min_intron": 60,
}

SETTINGS = {
    "inputs": {"sequence": True, "bin_size": 1},
    "labels": {"scheme": SCHEME},
    "windows": {"chroms": ["chrII"], "size": 6000, "overlap": 0, "valid_fraction": 0.15},
    "model": {"encoder": "cnn", "channels": 64, "layers": 8, "kernel_size": 5,
              "stem_kernel": 9, "max_dilation": 32, "dropout": 0.05, "resolution": 1,
              "trunk_pool": 8, "fine_channels": 32, "fine_layers": 3,
              "orf_features": True},
    "crf": {"max_duration": 256, "duration": "learned", "boundaries": False,
            "start_end": True, "centering": "none", "frames": True, "site_scores": True,
            "orf_length_scores": True, "upstream_start_scores": False},
    "train": {"epochs": 30, "batch_size": 8, "lr": 0.002, "crf_lr_scale": 20,
              "weight_decay": 0.01,
              "warmup_epochs": 1, "grad_clip": 1.0, "patience": 0, "seed": 0,
              "reverse_complement": True},
    "annotate": {"window": 100000, "context": 5000, "max_decode_steps": 2000000,
                 "reverse_complement": "off", "intron_penalty": 0.0, "first_atg": True,
                 "long_orfs": 100, "donor_motif": "GTANG", "branch_penalty": math.inf},
    "device": "auto",
}


PACKAGE_DATA = Path(__file__).resolve().parent / "data" / "yeast"  # in a built wheel
REPO_DATA = Path(__file__).resolve().parent.parent / "data" / "yeast"  # in a checkout


def find_data(data: str | os.PathLike | None = None) -> Path:
    """The folder holding the demo files: --data, $SEMISEG_DATA, the copy inside the
    installed package (a wheel: setup.py puts data/yeast there), the repository's
    data/yeast next to the package (a checkout or an editable install), ./data/yeast."""
    if data is not None:
        candidates = [Path(data), Path(data) / "yeast"]
    else:
        candidates = []
        if os.environ.get("SEMISEG_DATA"):
            candidates += [Path(os.environ["SEMISEG_DATA"])]
        candidates += [PACKAGE_DATA, REPO_DATA, Path.cwd() / "data" / "yeast"]
    for folder in candidates:
        if all((folder / f).is_file() for f in DATA_FILES):
            return folder.resolve()
    raise SemisegError(
        f"demo data not found (looked for {', '.join(DATA_FILES)} in "
        f"{', '.join(str(c) for c in candidates)}); pass --data FOLDER (a copy of the "
        "repository's data/yeast), or reinstall semiseg: its wheel carries them")


def demo_config(data_dir: Path, overrides: dict | None = None) -> Config:
    """The demo's Config with the data files of `data_dir`."""
    import copy

    d = copy.deepcopy(SETTINGS)
    d["inputs"]["fasta"] = [str(data_dir / "chrI.fa"), str(data_dir / "chrII.fa")]
    d["labels"]["annotation"] = str(data_dir / "yeast_chrI_chrII.gff3")
    for key, value in (overrides or {}).items():
        section, _, name = key.partition(".")
        if name:
            d[section][name] = value
        else:
            d[section] = value
    return from_dict(d, data_dir)


SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "yeast_cds_frames.pt"


def run(outdir: str | os.PathLike, data=None, device: str | None = None,
        epochs: int | None = None, train_model: bool = False) -> dict:
    """The whole demo; returns the evaluation result."""
    from .annotate.run import AnnotateOptions, annotate
    from .evaluate.plot import plot_region
    from .evaluate.run import evaluate, render_table, write_report
    from .genome import LabelScheme
    from .train.loop import train

    data_dir = find_data(data)
    over = {}
    if device:
        over["device"] = device
    if epochs:
        over["train.epochs"] = epochs
    cfg = demo_config(data_dir, over)
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model_dir = out / "model"
    if train_model:
        resume = (model_dir / "last.pt").is_file()
        ui.log(f"demo: data {data_dir}; output {out}")
        ui.log("step 1/3: train on chrII" + (" (resuming)" if resume else ""))
        train(cfg, model_dir, resume=resume)
        model_path = model_dir / "best.pt"
    else:
        if not SHIPPED_MODEL.is_file():
            raise SemisegError(f"the shipped demo model is missing ({SHIPPED_MODEL}); "
                               "run `semiseg demo --train` to train one")
        ui.log(f"demo: data {data_dir}; output {out}; model {SHIPPED_MODEL.name} (shipped; "
               "--train retrains it)")
        ui.log("step 1/3: (the shipped model; no training)")
        model_path = SHIPPED_MODEL
    t1 = time.perf_counter()
    ui.log("step 2/3: annotate chrI at 1 bp")
    prefix = str(out / "annotation")
    a = cfg.annotate
    annotate(str(model_path), str(data_dir / "chrI.fa"), prefix, AnnotateOptions(
        device=cfg.device, intron_penalty=a.intron_penalty, branch_penalty=a.branch_penalty,
        reverse_complement=a.reverse_complement, first_atg=a.first_atg,
        long_orfs=a.long_orfs, donor_motif=a.donor_motif))
    t2 = time.perf_counter()
    ui.log("step 3/3: evaluate against the SGD annotation of chrI")
    scheme = LabelScheme.from_dict(SCHEME)
    result = evaluate(f"{prefix}.bed", str(data_dir / "yeast_chrI_chrII.gff3"), scheme=scheme,
                      tolerance=0)
    result["seconds"] = {"train": t1 - t0, "annotate": t2 - t1,
                         "total": time.perf_counter() - t0}
    write_report(result, str(out / "evaluation"))
    plot_region(f"{prefix}.bed", "chrI:130000-160000", str(out / "example.png"),
                truth=str(data_dir / "yeast_chrI_chrII.gff3"), scheme=scheme,
                posteriors=prefix)
    ui.result_console().print(render_table(result, title="semiseg demo: chrI vs SGD"))
    ui.log(f"demo done in {time.perf_counter() - t0:.0f} s: {out}/evaluation.tsv, "
           f"{prefix}.bed, {out}/example.png")
    return result
