"""The run folder of `semiseg train`: opening it (a new run, --resume, --overwrite), its
lock while a run writes it, and the state a checkpoint written to it holds (and a resumed
run reads back: the random-number generators). train/loop.py writes the checkpoints.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import torch

from .. import __version__
from ..checkpoint import CHECKPOINT_FORMAT, load_checkpoint
from ..config.schema import Config
from ..errors import SemisegError
from ..runtime import Lock

# settings "learned" resolves to a number from the training data (train/data.py)
LEARNED = ("labels.min_intron", "crf.site_order")


def _get(cfg: Config, key: str):
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)

RUN_FILES = ("last.pt", "best.pt", "metrics.tsv", "config.yaml")  # what a run folder holds


def open_run(cfg: Config, out: Path, resume: bool, overwrite: bool = False) -> dict | None:
    """The checkpoint to resume from (None for a new run), after checking that `out`
    holds no other run and that a resumed run has the same config. Whatever state the
    folder is in, the message says what to do: continue (--resume), start again
    (--overwrite) or choose another folder. Temporary files of a killed run (NAME.tmp)
    are partial, never a state: they are removed."""
    last_path, best_path = out / "last.pt", out / "best.pt"
    if resume and overwrite:
        raise SemisegError("--resume and --overwrite: choose one (continue the run in "
                           f"{out}, or start it again)")
    if out.exists() and not out.is_dir():
        raise SemisegError(f"--out {out}: exists and is not a folder")
    for name in RUN_FILES:
        (out / f"{name}.tmp").unlink(missing_ok=True)
        if overwrite:
            (out / name).unlink(missing_ok=True)
    if not resume:
        held = [p.name for p in (last_path, best_path) if p.exists()]
        if held:
            raise SemisegError(f"{out} already holds a training run ({', '.join(held)}); "
                               "use --resume to continue it, --overwrite to start it again "
                               "(its checkpoints are deleted) or choose another --out")
        return None
    if not last_path.is_file():
        if best_path.is_file():
            raise SemisegError(f"--resume: {out} holds best.pt but no last.pt (the run "
                               "stopped while writing its checkpoints), so it cannot be "
                               "continued; start it again with --overwrite (best.pt is "
                               "deleted) or choose another --out")
        raise SemisegError(f"--resume: no checkpoint to resume from ({last_path} is "
                           "missing); run without --resume to start a new run")
    try:
        ckpt = load_checkpoint(last_path).data
    except SemisegError as err:
        raise SemisegError(f"--resume: {err}; start the run again with --overwrite or "
                           "choose another --out") from None
    # the device and the annotation settings may change; everything else must match
    # (and the number of processes: the global batch, hence the run, is the same).
    # a setting "learned" (LEARNED) was resolved to a number from the same data (and is
    # again, by _load_data): the run's number stands for it
    learned = tuple(k for k in LEARNED if _get(cfg, k) == "learned")
    diff = [k for k in config_diff(ckpt["config"], cfg.to_dict())
            if k not in ("device", "train.world_size", *learned)
            and not k.startswith("annotate.")]
    if diff:
        raise SemisegError(f"--resume: the config differs from the run in {out} "
                           f"({', '.join(diff[:6])}); resume with {out / 'config.yaml'}, or "
                           "start again with --overwrite")
    return ckpt


def check_learned_on_resume(ckpt: dict | None, cfg: Config, out: Path) -> None:
    """A resumed run whose labels.min_intron or crf.site_order "learned" (resolved in cfg
    by data.learn_min_intron, learn_site_order) now gives another number than the run
    recorded: its data changed, and its model with them (open_run let "learned" stand for
    the number)."""
    if ckpt is None:
        return
    for key in LEARNED:
        section, name = key.split(".")
        # a run from before the setting existed ran with its default
        ran = ckpt.get("config", {}).get(section, {}).get(name, _get(Config(), key))
        now = _get(cfg, key)
        if ran != now:
            unit = " bp" if key == "labels.min_intron" else ""
            raise SemisegError(f"--resume: {key}: learned gives {now}{unit} from the data "
                               f"now, the run in {out} has {ran} (its training annotation "
                               "or regions changed); start again with --overwrite")


@contextmanager
def folder_lock(out: Path, main: bool):
    """OUT/train.lock while this run writes OUT (the main process only): a second train
    on the same folder is refused (runtime.Lock). A folder made here for a run that
    stops before writing anything is removed again."""
    if not main:
        yield
        return
    if out.exists() and not out.is_dir():
        raise SemisegError(f"--out {out}: exists and is not a folder")
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SemisegError(f"--out {out}: cannot create the folder ({err.strerror})") from None
    try:
        with Lock(out / "train.lock", str(out), "training in this folder"):
            yield
    finally:
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


def config_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}")
    return out


def rng_state() -> dict:
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_state(model, opt, state, schedule, cfg: Config, scheme, data,
                     columns: list[int], average=None) -> dict:
    """Everything a checkpoint holds (see checkpoint.py), as tensors and plain data;
    "model" is the weight average where the run keeps one (train/averaging.py)."""
    from ..model import model_hash
    from .averaging import checkpoint_weights

    weights = checkpoint_weights(model, average)
    return {
        "format": CHECKPOINT_FORMAT, "semiseg_version": __version__, "epoch": state.epoch,
        **weights, "model_hash": model_hash(weights["model"]), "optimizer": opt.state_dict(),
        "scheduler": {"step": state.step, "total": schedule.total, "warmup": schedule.warmup,
                      "base_lr": schedule.base_lr},
        "rng": rng_state(), "config": cfg.to_dict(), "labels": scheme.to_dict(),
        "genome": data.config(), "n_features": len(columns), "columns": columns,
        "feature_names": [data.feature_names[i] for i in columns],
        "best": dict(state.best), "bad_epochs": state.bad_epochs, "history": state.history,
    }


def write_metrics(history: list[dict], names: list[str], path: Path) -> None:
    cols = ["epoch", "lr", "train_loss", "val_loss", "val_f1", "val_accuracy",
            "val_segment_f1", "val_boundary_f1"]
    cols += [f"val_f1_{n}" for n in names] + ["seconds", "best"]
    lines = ["\t".join(cols)]
    for row in history:
        vals = dict(row)
        for n, v in zip(names, row.get("val_f1_per_label", [])):
            vals[f"val_f1_{n}"] = v
        lines.append("\t".join(
            (f"{vals[c]:.6g}" if isinstance(vals.get(c), float) else str(vals.get(c, "")))
            for c in cols))
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:  # disk full or interrupted: no partial file
        tmp.unlink(missing_ok=True)
        raise
