"""The models shipped in semiseg/models/, by name: `semiseg models` lists them and
`--model NAME` (annotate, evaluate, plot: every reader of a checkpoint) accepts a name
as well as a path.

Names: the NAMES dict below, then every other ``*.pt`` file of the folder under the part
of its file name before the first underscore (``fly_cds_frames.pt`` -> ``fly``; the
whole stem where that part is taken). A path that exists always wins over a name.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import SemisegError

MODELS_DIR = Path(__file__).resolve().parent / "models"
NAMES = {"yeast": "yeast_cds_frames.pt"}


def registry(folder: str | os.PathLike | None = None) -> dict[str, Path]:
    """{name: path} of the shipped models present (module doc), names in order."""
    folder = Path(folder) if folder is not None else MODELS_DIR
    out: dict[str, Path] = {}
    if not folder.is_dir():
        return out
    files = sorted(p for p in folder.glob("*.pt") if p.is_file())
    for name, file in NAMES.items():
        if (folder / file).is_file():
            out[name] = folder / file
    for p in files:
        if p in out.values():
            continue
        short = p.stem.split("_", 1)[0]
        out[short if short and short not in out else p.stem] = p
    return out


def resolve_model(model: str | os.PathLike, folder: str | os.PathLike | None = None) -> str:
    """The checkpoint path of `--model`: an existing path as it is, else a shipped
    model's name. A word that is neither (no path separator, no .pt) is an error that
    lists the names; anything else is returned for the reader to report as not found."""
    text = os.fspath(model)
    if os.path.exists(text):
        return text
    reg = registry(folder)
    if text in reg:
        return str(reg[text])
    if os.sep not in text and "/" not in text and not text.endswith((".pt", ".pth")):
        raise SemisegError(f"--model {text}: no such file and no shipped model of that name "
                           f"(shipped: {', '.join(reg) or 'none'}; `semiseg models` lists "
                           "them)")
    return text


def describe(name: str, path: Path, ckpt: dict) -> dict:
    """What `semiseg models` shows of one model: name, file, size, scheme and its labels,
    resolution, and the training provenance the checkpoint records (epochs, best epoch
    and its validation F1, seed, training FASTA and annotation file names, the
    chromosomes its windows came from, version,
    model hash), from `ckpt`, the checkpoint at `path` as checkpoint.load_checkpoint
    read it."""
    cfg = ckpt.get("config") or {}
    genome = ckpt.get("genome") or {}
    labels = ckpt.get("labels") or {}
    train = cfg.get("train") or {}
    best = ckpt.get("best") or {}
    fasta = genome.get("fasta") or cfg.get("inputs", {}).get("fasta") or []
    fasta = [fasta] if isinstance(fasta, str) else list(fasta)
    ann = (cfg.get("labels") or {}).get("annotation")
    out = {
        "name": name, "file": str(path), "bytes": path.stat().st_size,
        "scheme": labels.get("name"), "labels": [lab.get("name") for lab in
                                                 labels.get("labels", [])],
        "resolution": genome.get("resolution", (cfg.get("model") or {}).get("resolution")),
        "semiseg_version": ckpt.get("semiseg_version"), "model_hash": ckpt.get("model_hash"),
        "members": len(ckpt["members"]) if "members" in ckpt else None,
        "training": {
            "fasta": [os.path.basename(str(f)) for f in fasta],
            "annotation": os.path.basename(str(ann)) if ann else None,
            "chroms": (cfg.get("windows") or {}).get("chroms"),
            "epochs_run": ckpt.get("epoch"), "epochs": train.get("epochs"),
            "seed": train.get("seed"), "best_epoch": best.get("epoch"),
            "val_f1": best.get("val_f1"),
        },
    }
    for key in ("provenance", "training"):  # recorded by newer `semiseg train`, if any
        if isinstance(ckpt.get(key), dict):
            out["training"].update({k: v for k, v in ckpt[key].items()
                                    if isinstance(v, (str, int, float, bool))})
    return out
