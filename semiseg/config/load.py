"""Loading a config: YAML (no aliases) -> a validated Config (schema.py), every key
checked (an unknown key is an error naming the closest valid one), `--set KEY=VALUE`
overrides applied, relative paths resolved against the file's folder; and saving one.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import types
import typing
from pathlib import Path
from typing import Any

import yaml

from ..errors import SemisegError
from ..genome.iupac import check_motif
from ..genome.safeyaml import NoAliasLoader, YAMLAliasError
from .schema import Config

CHOICES = {
    "model.encoder": ("cnn", "cnn_lstm"),
    "crf.duration": ("learned", "geometric", "negative_binomial", "poisson", "uniform"),
    "crf.centering": ("none", "mean"),
    "crf.head": ("semicrf", "argmax"),
    "train.amp": ("auto", "on", "off"),
    "train.select": ("loss", "f1"),
    "annotate.reverse_complement": ("auto", "on", "off"),
    "device": ("auto", "cpu", "cuda"),
}
# options whose values include on and off take YAML's booleans for them: YAML 1.1 (which
# pyyaml reads) turns unquoted on/off/yes/no/true/false into True/False
ON_OFF = {key for key, choices in CHOICES.items() if {"on", "off"} <= set(choices)}
POSITIVE = {
    "inputs.bin_size", "windows.size", "windows.phases", "model.channels", "model.kernel_size",
    "model.stem_kernel", "model.max_dilation", "model.lstm_hidden", "model.resolution",
    "crf.max_duration", "train.epochs", "train.batch_size", "train.world_size",
    "annotate.window", "train.crf_lr_scale",
    "annotate.max_decode_steps", "annotate.batch_steps",
}
NON_NEGATIVE = {
    "windows.overlap", "model.layers", "model.dropout", "train.lr", "train.weight_decay",
    "train.warmup_epochs", "train.average_epochs", "train.grad_clip", "train.patience",
    "annotate.context", "annotate.signal_precision", "annotate.long_orfs",
    "annotate.min_gene_score", "annotate.max_masked_cds",
    "annotate.decode_overlap", "crf.duration_step_sd",
}


# float keys where inf means something (annotate: inf makes the branch point a rule)
MAY_BE_INFINITE = {"annotate.branch_penalty"}
# convolution kernels must be odd (centred: an even one shifts the output by half a step)
ODD = ("model.kernel_size", "model.stem_kernel")


def _suggest(key: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{hint} (valid keys: {', '.join(valid)})"


def _check_type(where: str, value, hint):
    """Check `value` against a dataclass field annotation; return the (coerced) value."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(where, value, arg)
            except SemisegError:
                continue
        wanted = " or ".join(_describe(a) for a in args)
        raise SemisegError(f"{where}: expected {wanted}, got {value!r}")
    if hint is Any:
        return value
    if origin is list:
        if not isinstance(value, list):
            raise SemisegError(f"{where}: expected a list, got {value!r}")
        return [_check_type(f"{where}[{i}]", v, args[0]) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise SemisegError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): _check_type(f"{where}.{k}", v, args[1]) for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise SemisegError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SemisegError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e4 and inf as strings
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise SemisegError(f"{where}: expected a number, got {value!r}")
        if math.isinf(value) and where not in MAY_BE_INFINITE:
            raise SemisegError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if isinstance(value, bool) and where in ON_OFF:
            return "on" if value else "off"
        if isinstance(value, bool):
            raise SemisegError(f"{where}: expected a string, got {value!r} (YAML reads "
                               "unquoted on/off/yes/no as true/false: quote the value)")
        if not isinstance(value, (str, int, float)):
            raise SemisegError(f"{where}: expected a string, got {value!r}")
        return str(value)
    raise AssertionError(f"unhandled type {hint} for {where}")


def _describe(hint) -> str:
    """How an error message names a type."""
    origin = typing.get_origin(hint)
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             list: "a list", dict: "a mapping", type(None): "null"}
    return names.get(origin or hint, str(hint))


def _build(cls, data, where: str):
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SemisegError(f"{where or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in data.items():
        full = f"{where}.{key}" if where else str(key)
        if key not in names:
            raise SemisegError(f"unknown config key {full!r}" + _suggest(str(key), names))
        hint = hints[key]
        if dataclasses.is_dataclass(hint):
            values[key] = _build(hint, value, full)
        else:
            values[key] = _check_type(full, value, hint)
    return cls(**values)


def _validate(cfg: Config) -> None:
    for key, choices in CHOICES.items():
        value = _get(cfg, key)
        if value not in choices:
            raise SemisegError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    mi = cfg.labels.min_intron
    if not (mi is None or mi == "learned" or (isinstance(mi, int) and not isinstance(mi, bool)
                                               and mi >= 1)):
        raise SemisegError(f"labels.min_intron: expected null, a positive integer or "
                           f"'learned', got {mi!r}")
    so = cfg.crf.site_order
    if so not in (0, 1, "learned") or isinstance(so, bool):
        raise SemisegError(f"crf.site_order: expected 0, 1 or 'learned', got {so!r}")
    dt = cfg.crf.duration_transitions
    if not isinstance(dt, bool) and dt < 1:
        raise SemisegError("crf.duration_transitions: expected false, true or a period P >= 1,"
                           f" got {dt!r}")
    if cfg.crf.duration_step_sd and cfg.crf.head == "argmax":
        raise SemisegError("crf.duration_step_sd: the argmax head has no duration scores "
                           "(set the prior to 0)")
    if cfg.crf.duration_step_sd and not cfg.crf.frames and cfg.crf.duration != "learned":
        raise SemisegError("crf.duration_step_sd: a prior on learned duration scores; "
                           f"crf.duration is {cfg.crf.duration!r} (set it to learned, or "
                           "the prior to 0)")
    for key in POSITIVE:
        if _get(cfg, key) <= 0:
            raise SemisegError(f"{key}: must be positive, got {_get(cfg, key)!r}")
    for key in NON_NEGATIVE:
        if _get(cfg, key) < 0:
            raise SemisegError(f"{key}: must not be negative, got {_get(cfg, key)!r}")
    for key in ODD:
        if _get(cfg, key) % 2 == 0:
            raise SemisegError(f"{key}: must be odd (a centred convolution), got "
                               f"{_get(cfg, key)!r}")
    if cfg.model.resolution % cfg.inputs.bin_size:
        raise SemisegError(
            f"model.resolution ({cfg.model.resolution}) must be a multiple of "
            f"inputs.bin_size ({cfg.inputs.bin_size})")
    if not 0 <= cfg.windows.valid_fraction < 1:
        raise SemisegError(f"windows.valid_fraction: must be in [0, 1), got "
                           f"{cfg.windows.valid_fraction}")
    off = cfg.windows.valid_offset
    if off is not None and not 0 <= off <= 1 - cfg.windows.valid_fraction:
        raise SemisegError(f"windows.valid_offset: must be in [0, 1 - valid_fraction] = "
                           f"[0, {1 - cfg.windows.valid_fraction:g}], got {off}")
    if cfg.windows.overlap >= cfg.windows.size:
        raise SemisegError("windows.overlap must be smaller than windows.size")
    if not cfg.model.dropout < 1:
        raise SemisegError(f"model.dropout: must be below 1, got {cfg.model.dropout}")
    if cfg.windows.size % cfg.model.resolution:
        raise SemisegError(f"windows.size ({cfg.windows.size}) must be a multiple of "
                           f"model.resolution ({cfg.model.resolution})")
    if cfg.annotate.window % cfg.model.resolution or cfg.annotate.context % cfg.model.resolution:
        raise SemisegError("annotate.window and annotate.context must be multiples of "
                           f"model.resolution ({cfg.model.resolution})")
    if cfg.annotate.donor_motif:
        check_motif(cfg.annotate.donor_motif, "annotate.donor_motif")
    if not cfg.inputs.sequence and not cfg.inputs.tracks:
        raise SemisegError("inputs: the model needs the sequence, tracks, or both")
    if cfg.inputs.chrom_sizes is not None:
        if cfg.inputs.fasta is not None:
            raise SemisegError("inputs: give fasta or chrom_sizes, not both")
        if cfg.inputs.sequence or cfg.inputs.softmask or cfg.crf.frames:
            raise SemisegError("inputs.chrom_sizes: only for models that read no sequence "
                               "(sequence: false, softmask: false, no crf.frames); give "
                               "inputs.fasta otherwise")


def _get(cfg, key: str):
    obj = cfg
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def _resolve_paths(cfg: Config, base: Path) -> None:
    def fix(p):
        if p is None:
            return None
        p = os.path.expanduser(str(p))
        return p if os.path.isabs(p) else str((base / p).resolve())

    if isinstance(cfg.inputs.fasta, list):
        cfg.inputs.fasta = [fix(p) for p in cfg.inputs.fasta]
    else:
        cfg.inputs.fasta = fix(cfg.inputs.fasta)
    cfg.labels.annotation = fix(cfg.labels.annotation)
    cfg.inputs.chrom_sizes = fix(cfg.inputs.chrom_sizes)
    if cfg.inputs.track_sheet is not None:  # its tracks join inputs.tracks (paths resolved)
        from ..genome.tracks import read_track_sheet

        sheet = read_track_sheet(fix(cfg.inputs.track_sheet))
        both = sorted(set(sheet) & set(cfg.inputs.tracks))
        if both:
            raise SemisegError(f"inputs: track(s) {', '.join(both)} in both inputs.tracks "
                               "and inputs.track_sheet")
        cfg.inputs.tracks = {**cfg.inputs.tracks, **sheet}
        cfg.inputs.track_sheet = None  # the resolved config lists the tracks themselves
    if isinstance(cfg.windows.holdout, str):
        cfg.windows.holdout = fix(cfg.windows.holdout)
    tracks = {}
    for name, spec in cfg.inputs.tracks.items():
        if isinstance(spec, dict):
            spec = dict(spec)
            if "path" not in spec:
                raise SemisegError(f"inputs.tracks.{name}: needs a 'path'")
            spec["path"] = fix(spec["path"])
        else:
            spec = fix(spec)
        tracks[name] = spec
    cfg.inputs.tracks = tracks
    scheme = cfg.labels.scheme
    if isinstance(scheme, str) and scheme.endswith((".yaml", ".yml")):
        cfg.labels.scheme = fix(scheme)


def from_dict(data: dict, base: str | Path = ".") -> Config:
    """A validated Config from plain data; relative paths are taken from `base`."""
    cfg = _build(Config, data, "")
    _resolve_paths(cfg, Path(base))
    _validate(cfg)
    return cfg


def _parse_override(text: str):
    if "=" not in text:
        raise SemisegError(f"--set {text!r}: expected KEY=VALUE, e.g. train.epochs=5")
    key, _, raw = text.partition("=")
    try:
        value = yaml.load(raw, Loader=NoAliasLoader)
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def apply_overrides(data: dict, overrides: list[str] | dict) -> dict:
    """Set dotted keys (`train.epochs=5` strings, or a {key: value} mapping) in `data`."""
    items = overrides.items() if isinstance(overrides, dict) else map(_parse_override, overrides)
    data = _deep_copy(data)
    for key, value in items:
        parts = key.split(".")
        node = data
        for part in parts[:-1]:
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise SemisegError(f"--set {key}: {part!r} is not a section")
        node[parts[-1]] = value
    return data


def _deep_copy(d):
    if isinstance(d, dict):
        return {k: _deep_copy(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_deep_copy(v) for v in d]
    return d


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise SemisegError(f"config file not found: {path}")
    try:
        with open(path) as fh:
            data = yaml.load(fh, Loader=NoAliasLoader)
    except YAMLAliasError as err:
        raise SemisegError(f"{path}: line {err.line}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise SemisegError(f"{path}:{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SemisegError(f"{path}: expected a mapping of sections at the top level")
    return data


def load_config(path: str | Path | None, overrides: list[str] | dict = ()) -> Config:
    """Read a YAML config, apply `--set KEY=VALUE` overrides, validate."""
    if path is None:
        data, base = {}, Path.cwd()
    else:
        data, base = read_yaml(path), Path(path).resolve().parent
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        return from_dict(data, base)
    except SemisegError as err:
        if path is None:
            raise
        raise SemisegError(f"{path}: {err}") from None


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config as YAML (atomically)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        yaml.safe_dump(cfg.to_dict(), fh, sort_keys=False)
    os.replace(tmp, path)


def config_scheme(cfg: Config):
    """The label scheme of a config: labels.scheme with labels.min_intron where that is a
    number. Where it is "learned" (a config before `semiseg train` resolves it), the
    scheme's own, which reads the annotation the number is learned from."""
    from ..genome import load_scheme

    scheme = load_scheme(cfg.labels.scheme)
    mi = cfg.labels.min_intron
    if mi is None or mi == "learned":
        return scheme
    return dataclasses.replace(scheme, min_intron=int(mi))

