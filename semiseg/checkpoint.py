"""Trained models on disk: checkpoint files, the model they hold, the device it runs on.

`train` writes checkpoints; `annotate`, `evaluate` and `plot` read them. A checkpoint is
a dict of tensors and plain data (format CHECKPOINT_FORMAT), so
`torch.load(path, weights_only=True)` reads it without running any code. Its keys:
format, semiseg_version, epoch, model (state dict), model_hash, optimizer, scheduler,
rng, config (Config.to_dict()), labels (LabelScheme.to_dict()), genome
(GenomeData.config()), n_features, columns, feature_names, best, bad_epochs, history,
content_hash.

Integrity: `model_hash` (model.model_hash: the parameters' names, shapes and values;
for an ensemble, each member's hash in `member_hashes` and their digest) and
`content_hash` (CONTENT_HASH: every stored value, written by `save_checkpoint`; files
written before it have none) are recomputed by `load_checkpoint`, which refuses a file
where either differs: flipped bits in a tensor or an edited config would otherwise load
silently under the old model identity.

Shipped models: the models shipped in semiseg/models/, by name: `semiseg models` lists them and
`--model NAME` (annotate, evaluate, plot: every reader of a checkpoint) accepts a name
as well as a path.

Names: the NAMES dict below, then every other ``*.pt`` file of the folder under the part
of its file name before the first underscore (``fly_cds_frames.pt`` -> ``fly``; the
whole stem where that part is taken). A path that exists always wins over a name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .config.load import from_dict
from .config.schema import Config
from .errors import SemisegError

if TYPE_CHECKING:
    from .genome.scheme import LabelScheme

CHECKPOINT_FORMAT = "semiseg.checkpoint/1"
# how `content_hash` is computed (stored beside it, so that a later change of the rule
# can still read files hashed by this one)
CONTENT_HASH = "sha256/semiseg-values-1"


def _feed(digest, value) -> None:
    """Feed one stored value into `digest` (a canonical, type-tagged walk: dict keys
    sorted, tensors by dtype, shape and raw bytes, everything else by repr)."""
    if isinstance(value, dict):
        digest.update(b"{%d" % len(value))
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _feed(digest, value[key])
        digest.update(b"}")
    elif isinstance(value, (list, tuple)):
        digest.update(b"[%d" % len(value) if isinstance(value, list) else b"(%d" % len(value))
        for v in value:
            _feed(digest, v)
        digest.update(b"]")
    elif isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif type(value).__module__ == "numpy":  # by value, not repr (numpy 2 changed it)
        import numpy as np

        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            digest.update(f"A{a.dtype.str}{a.shape}".encode())
            digest.update(a.tobytes())
        else:
            _feed(digest, value.item())
    else:
        digest.update(f"{type(value).__name__}:{value!r};".encode())


def content_hash(state: dict) -> str:
    """The hex digest (sha256) of every value of a checkpoint except `content_hash`
    itself (rule CONTENT_HASH)."""
    import hashlib

    digest = hashlib.sha256()
    _feed(digest, {k: v for k, v in state.items() if k != "content_hash"})
    return digest.hexdigest()


def verify_checkpoint(ckpt: dict, path) -> None:
    """SemisegError naming `path` when a stored hash does not match the contents."""
    from .model import model_hash

    why = None
    if "members" in ckpt:  # an ensemble: each member, then their digest
        import hashlib

        hashes = [model_hash(m) for m in ckpt["members"]]
        if hashes != list(ckpt.get("member_hashes", [])):
            why = "a member model's parameters do not match its recorded hash"
        elif hashlib.sha256("".join(hashes).encode()).hexdigest()[:12] != ckpt.get(
                "model_hash"):
            why = "the ensemble's model hash does not match its members"
    elif "model" in ckpt:
        got = model_hash(ckpt["model"])
        if got != ckpt.get("model_hash"):
            why = (f"its parameters hash to {got}, not to the model hash "
                   f"{ckpt.get('model_hash')} recorded in it")
    else:
        why = "it holds no model"
    if why is None and "content_hash" in ckpt:
        rule = ckpt.get("content_hash_rule")
        if rule != CONTENT_HASH:
            why = f"its content hash was made by an unknown rule {rule!r}"
        elif content_hash({k: v for k, v in ckpt.items()
                           if k != "content_hash_rule"}) != ckpt["content_hash"]:
            why = "its contents do not match the content hash recorded in it"
    if why:
        raise SemisegError(f"{path}: corrupted or modified checkpoint ({why}); refusing "
                           "to load it: use an intact copy or retrain")


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write `state` to `path` through a temporary name (no partial file on failure),
    with its `content_hash` (recorded in `state` too)."""
    path = Path(path)
    state.pop("content_hash", None)
    state["content_hash_rule"] = CONTENT_HASH
    state["content_hash"] = content_hash({k: v for k, v in state.items()
                                          if k != "content_hash_rule"})
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:  # interrupted or disk full: leave no partial file behind
        tmp.unlink(missing_ok=True)
        raise


@dataclass(eq=False)
class Checkpoint:
    """A checkpoint as load_checkpoint read it: `data` as stored (the model's state dict
    or an ensemble's members, the tables, a training run's optimiser and history), its
    Config and LabelScheme parsed once, on first use, and handed on from there."""

    path: str
    data: dict = field(repr=False)

    @cached_property
    def config(self) -> Config:
        """The validated Config the model was trained with."""
        return from_dict(self.data["config"])

    @cached_property
    def scheme(self) -> LabelScheme:
        from .genome.scheme import LabelScheme

        return LabelScheme.from_dict(self.data["labels"])

    @property
    def model_hash(self) -> str:
        return self.data["model_hash"]

    @property
    def genome(self) -> dict:
        """GenomeData.config() of the training genome: inputs, track statistics."""
        return self.data["genome"]

    @property
    def members(self) -> int:
        """How many models an ensemble holds (0: a single model)."""
        return len(self.data.get("members", ()))


def load_checkpoint(path: str | Path) -> Checkpoint:
    """A checkpoint (a run folder means its best.pt), read with weights_only=True (no
    code runs) and verified; every problem is a one-line SemisegError. A shipped model's
    name (`semiseg models`) stands for its file."""
    path = Path(resolve_model(path))
    if path.is_dir():
        path = path / "best.pt"
    if not path.is_file():
        raise SemisegError(f"model checkpoint not found: {path}")
    import pickle
    import warnings
    import zipfile

    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive
        raise SemisegError(f"{path}: not a semiseg checkpoint (not a PyTorch checkpoint file; "
                           "a model is the best.pt that semiseg train writes)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise SemisegError(f"{path}: not a readable semiseg checkpoint (it holds more than "
                           "tensors and plain data; refusing to load it)") from None
    except Exception as err:  # truncated or not a torch file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise SemisegError(f"{path}: not a readable semiseg checkpoint ({first})") from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise SemisegError(f"{path}: not a semiseg checkpoint (format {CHECKPOINT_FORMAT})")
    verify_checkpoint(ckpt, path)
    return Checkpoint(str(path), ckpt)


def build_model(source: Checkpoint | Config, n_features: int | None = None,
                num_labels: int | None = None):
    """(model, cfg): the Segmenter (or Ensemble) of a Checkpoint with its weights loaded,
    or a new Segmenter from (cfg, n_features, num_labels)."""
    from .config.load import config_scheme
    from .model import Segmenter

    if isinstance(source, Config):
        cfg = source
        scheme = config_scheme(cfg) if cfg.crf.frames else None
        return Segmenter(n_features, num_labels, cfg, scheme=scheme), cfg
    ckpt = source
    if ckpt.members:
        from .genemodel.ensemble import Ensemble

        cals = ckpt.data.get("member_calibration") or [None] * ckpt.members
        return Ensemble([_segmenter(ckpt, state, cal)
                         for state, cal in zip(ckpt.data["members"], cals)]), ckpt.config
    return _segmenter(ckpt, ckpt.data["model"]), ckpt.config


def _segmenter(ckpt: Checkpoint, state: dict, calibration: dict | None = None):
    """A Segmenter of the checkpoint's config and scheme with the weights `state` and
    the encoder scale of `calibration` (default: the checkpoint's own; train.calibrate)."""
    from .model import Segmenter

    cfg = ckpt.config
    model = Segmenter(ckpt.data["n_features"], len(ckpt.data["labels"]["labels"]), cfg,
                      scheme=ckpt.scheme if cfg.crf.frames else None)
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[1].strip() if "\n" in str(e) else str(e)
        raise SemisegError(
            f"the model's parameters do not fit this semiseg "
            f"(checkpoint made by semiseg {ckpt.data.get('semiseg_version', '?')}; "
            f"{first.rstrip('.')}): the model's layout changed since, retrain it "
            "with `semiseg train`") from None
    if calibration is None and not ckpt.members:
        calibration = ckpt.data.get("calibration")
    scale = (calibration or {}).get("encoder_scale")
    if scale is not None and hasattr(model.crf, "encoder_scale"):  # train.calibrate
        model.crf.encoder_scale = float(scale)
    with torch.no_grad():  # train.calibrate "terms": head parameters refitted beside it
        for name, value in ((calibration or {}).get("params") or {}).items():
            model.get_parameter(name).copy_(torch.as_tensor(value))
    return model


def write_ensemble(paths: list[str], out: str) -> str:
    """Read single-model checkpoints, write their ensemble to `out`; returns `out`."""
    from .genemodel.ensemble import make_ensemble

    ckpt = make_ensemble([load_checkpoint(p).data for p in paths], paths)
    if os.path.isdir(out):
        raise SemisegError(f"--out: {out} is a folder; give the checkpoint file to write")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(ckpt, out)
    return out


# the models shipped in semiseg/models/, by name
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
