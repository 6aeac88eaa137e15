"""YAML configuration -> validated dataclasses.

A config file has the sections below; every key is optional (the defaults are the
demo's settings) and every unknown key is an error that names the closest valid key.
Relative paths are relative to the config file's folder; the resolved config (absolute
paths) is written next to every training run, so a run can be repeated from it alone.

    inputs:   genome and tracks            labels:   annotation and label scheme
    windows:  training windows and split   model:    encoder and resolution
    crf:      the semi-CRF head            train:    optimiser and schedule
    annotate: windowing at annotation      device:   auto | cpu | cuda
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import SemisegError
from .genome.iupac import check_motif
from .genome.safeyaml import NoAliasLoader, YAMLAliasError


@dataclass
class InputsConfig:
    """What the encoder sees.

    fasta:     genome FASTA(s) used for training (plain or bgzip; a path or a list of
               paths whose chromosomes together make the genome)
    sequence:  feed the one-hot sequence (A, C, G, T) to the encoder
    softmask:  add a channel that is 1.0 on lowercase (soft-masked) bases
    tracks:    {name: path} or {name: {path, transform, mapq, strand}}; bigWig, bedGraph or
               BAM by extension; annotate asks for the same names
    bin_size:  bp per input position (1 = base level; tracks are averaged per bin)
    alias:     {name_in_file: name_in_fasta} for chromosome names that differ
    chrom_sizes: a two-column chrom-sizes file (name, length) or a FASTA index (.fai)
               that defines the chromosomes instead of a FASTA (only with
               sequence: false; docs/chromatin.md)
    track_sheet: a TSV of tracks, one per line: name, path[, transform, kind, mapq,
               strand] (a header line naming the columns is optional; paths relative
               to the sheet); read into `tracks` when the config is loaded
    """

    fasta: str | list[str] | None = None
    chrom_sizes: str | None = None
    track_sheet: str | None = None
    sequence: bool = True
    softmask: bool = False
    tracks: dict[str, Any] = field(default_factory=dict)
    bin_size: int = 1
    alias: dict[str, str] | None = None


@dataclass
class LabelsConfig:
    """The truth used for training.

    annotation: GFF3/GTF or BED file with the labelled intervals
    scheme:     a built-in scheme name ("gene_structure"), a scheme YAML path, or an
                inline scheme mapping (see semiseg.genome.labels)
    """

    annotation: str | None = None
    scheme: Any = "gene_structure"


@dataclass
class WindowsConfig:
    """Training windows and the train/validation split.

    size:         window length in bp
    overlap:      bp shared by neighbouring windows
    chroms:       chromosomes to train on (None = all in the FASTA)
    valid_chroms: chromosomes held out for validation; if empty, the last
                  `valid_fraction` of each training chromosome is held out instead
    valid_fraction: see valid_chroms
    valid_offset: where in each chromosome (a fraction of its length) the held-out
                  block of `valid_fraction` starts; None: at the end (1 - valid_fraction).
                  Different offsets give the folds of a cross-validation
    holdout:      regions kept out of training and validation (and of the track
                  statistics): a BED file, or a list of "chrom:start-end" (0-based,
                  end exclusive) or "chrom" (the whole chromosome)
    """

    size: int = 20000
    overlap: int = 0
    chroms: list[str] | None = None
    valid_chroms: list[str] = field(default_factory=list)
    valid_fraction: float = 0.15
    valid_offset: float | None = None
    holdout: str | list[str] | None = None


@dataclass
class ModelConfig:
    """The encoder.

    encoder:     "cnn" (dilated residual CNN) or "cnn_lstm" (the CNN, then a BiLSTM)
    channels:    hidden width
    layers:      number of dilated residual blocks (dilation 1, 2, 4, ... cycling)
    kernel_size: kernel of the residual blocks
    stem_kernel: kernel of the first convolutions at input resolution
    max_dilation: dilations cycle 1, 2, 4, ... up to this value
    dropout:     dropout inside the residual blocks
    lstm_hidden: BiLSTM width per direction (encoder = "cnn_lstm")
    resolution:  bp per CRF step; a multiple of inputs.bin_size (strided pooling)
    trunk_pool, fine_channels, fine_layers: the gene model's encoder (crf.frames): its
                 trunk (channels, layers, kernel_size, max_dilation) runs at 1/trunk_pool
                 resolution; fine_layers residual blocks of fine_channels at 1 bp
    orf_features: the gene model's encoder also reads 18 open-reading-frame channels
                 made from the sequence (semiseg/genemodel/orf.py: distances to in-frame stop and
                 start codons, kilobases away)
    splice_features: the gene model's encoder also reads 4 splice-site channels: donor
                 and acceptor log-odds per strand from position weight matrices counted
                 at the training genes' introns (semiseg/genemodel/splice.py)
    """

    encoder: str = "cnn"
    channels: int = 64
    layers: int = 6
    kernel_size: int = 5
    stem_kernel: int = 9
    max_dilation: int = 16
    dropout: float = 0.1
    lstm_hidden: int = 64
    resolution: int = 1
    trunk_pool: int = 8
    fine_channels: int = 32
    fine_layers: int = 3
    orf_features: bool = False
    splice_features: bool = False


@dataclass
class CRFConfig:
    """The semi-CRF head (docs/contract.md).

    max_duration: K, the longest segment in CRF steps (longer runs of a label are
                  several segments in a row; the output merges them)
    duration:     learned | geometric | negative_binomial | poisson | uniform
    duration_transitions: false: static (C, C) transitions; true: one (C, C) per duration
                  1..K of the next segment; an integer P >= 1: periodic, (P, C, C),
                  transition[(d - 1) mod P] (3 follows a reading frame)
    boundaries:   boundary scores projected from the encoder's hidden states
    start_end:    learned scores for the first and last segment's label
    centering:    none | mean (see docs/contract.md; "mean" decodes in training-size windows)
    frames:       the frame-aware gene model (gene_structure schemes, 1 bp): start, CDS,
                  stop and intron labels in three reading frames per strand, stop codons
                  forbidden inside CDS, the frame carried through introns (docs/gene_model.md)
    head:         semicrf (the gene model) | argmax (with frames: the same encoder
                  classifying each base on its own, no CRF; a baseline)
    site_scores:  the gene model's head adds position-weight-matrix scores of splice
                  donors and acceptors, start and stop codons (counted at the training
                  genes, semiseg/genemodel/sites.py), times a learned weight per site, to those
                  labels' emissions
    content_scores: the gene model's head adds to coding labels the log-odds of a
                  three-periodic 5th-order Markov chain of coding sequence against one of
                  sequence outside genes, counted at the training genes (semiseg/genemodel/content.py)
    orf_length_scores: the gene model's head adds learned scores of ORF length to start
                  codons (the ORF each opens) and stop codons (the longest ORF each can
                  close), semiseg/genemodel/orflength.py
    upstream_start_scores: the gene model's head adds to each start codon a learned
                  score of how many in-frame start codons lie upstream of it in its ORF
                  (0, 1, 2, 3+: a ribosome mostly starts at the first), semiseg/genemodel/orflength.py
    tie_noncoding: the gene model's intron labels take the background label's emission
                  plus a learned constant per strand, so the encoder cannot tell an
                  intron's inside from intergenic sequence by local content: where an
                  intron begins and ends is left to the splice sites, the exons and the
                  gene grammar (the way a classical gene finder's intron and intergenic
                  states share a content model), not to a guess from kilobases away
    """

    max_duration: int = 64
    duration: str = "learned"
    duration_transitions: bool | int = False
    boundaries: bool = True
    start_end: bool = True
    centering: str = "none"
    frames: bool = False
    head: str = "semicrf"
    site_scores: bool = False
    orf_length_scores: bool = False
    upstream_start_scores: bool = False
    content_scores: bool = False
    tie_noncoding: bool = False


@dataclass
class TrainConfig:
    """Optimisation.

    epochs, batch_size: windows per batch
    lr, weight_decay:  AdamW
    crf_lr_scale:      the CRF head's own parameters (transitions, durations, start/end
                       scores, the gene model's site weights and ORF-length curves) learn
                       at this multiple of lr: Adam moves a parameter by about lr per step
                       at most, so over a few hundred steps a table entry moves about one
                       unit, where a duration or transition score may need tens
    warmup_epochs:     linear warm-up (in epochs, fractions allowed), then cosine decay
    grad_clip:         maximum gradient norm (0 = off)
    patience:          early stopping after this many epochs without a better
                       validation score (0 = off)
    select:            the validation score that picks best.pt and drives early
                       stopping: "loss" (negative log-likelihood per CRF step; smooth) or
                       "f1" (macro F1 of the Viterbi labels; noisier)
    seed:              seeds everything (window order, initialisation, dropout)
    reverse_complement: augment by reverse-complementing half the windows each epoch
                       (stranded labels swap with their other-strand twins; tracks are
                       reversed, so use it with unstranded tracks only)
    amp:               auto | on | off; mixed precision (bfloat16) for the encoder on
                       CUDA; the CRF always runs in float32
    world_size:        a record, not a setting: the number of processes that trained the
                       run (torchrun's WORLD_SIZE; 1 without torchrun), written by
                       `semiseg train` into the run's config.yaml
    """

    epochs: int = 20
    batch_size: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.01
    crf_lr_scale: float = 1.0
    warmup_epochs: float = 1.0
    grad_clip: float = 1.0
    patience: int = 5
    select: str = "loss"
    seed: int = 0
    reverse_complement: bool = False
    amp: str = "auto"
    world_size: int = 1


@dataclass
class AnnotateConfig:
    """Annotation (stored in the checkpoint; `semiseg annotate` flags override).

    window:  bp per encoder window (emissions keep each window's centre)
    context: bp of context on each side of a window's centre
    max_decode_steps: decode a chromosome as one sequence up to this many CRF steps,
             otherwise in overlapping windows of this many steps, stitched at centres
    decode_overlap: CRF steps by which neighbouring decoding windows overlap (each keeps
             its centre, so a window's kept part has about half of this as context on
             each side); 0 = 8 x crf.max_duration, at most a quarter of
             max_decode_steps
    batch_steps: CRF steps per batch when many short contigs are decoded together
    reverse_complement: auto | on | off; average the emissions of each sequence and of
             its reverse complement (stranded labels swapped); auto = on when the model
             was trained with train.reverse_complement
    intron_rate: the gene model (crf.frames) only: add this log-score to every base inside
             an intron when annotating (a per-bp prior for long introns; >= 0)
    intron_penalty: the gene model (crf.frames) only: subtract this log-score from each
             intron when annotating (0: as trained; larger: fewer introns). A prior for
             genomes where the model's introns are less reliable than its genes
    branch_penalty: the gene model with crf.site_scores only: subtract this log-score from
             each intron whose acceptor has no branch point within one base of the
             branch matrix's consensus (yeast TACTAAC) 10-80 bp upstream (0: off; .inf:
             a rule, no intron ends at such an acceptor). A prior for genomes whose
             introns nearly all carry one
    donor_motif: the gene model only: an intron must begin with this IUPAC motif on its
             strand (e.g. GTANG; "" or GT: any GT); a prior for genomes with a strict 5'
             splice site (yeast: GTATGT)
    first_atg: the gene model at 1 bp only: move each gene's start codon to the first
             ATG of its open reading frame (the upstream-most in-frame ATG after the
             previous stop), over intergenic bases only (semiseg/genemodel/firstatg.py)
    long_orfs: the gene model at 1 bp only: after first_atg, call every open reading frame
             of at least this many codons (stop included; first ATG to stop) that lies
             wholly in intergenic sequence a gene, the longest first (semiseg/genemodel/orffill.py;
             0: off). SGD's convention for yeast is 100
    learn_rules: the gene model at 1 bp only: `semiseg train` sets donor_motif,
             branch_penalty, first_atg and long_orfs from the training annotation,
             each turned on only where the training genes obey it (semiseg/genemodel/learnedrules.py;
             the values learned replace the four above in the run's config)
    signal_precision: bigWig/bedGraph values (posteriors, boundary, entropy) are rounded
             to a multiple of this and equal neighbours written as one entry, which keeps
             1-bp tracks small and fast to write; 0: every step's exact float32 value
    """

    window: int = 100000
    context: int = 5000
    max_decode_steps: int = 2_000_000
    batch_steps: int = 200_000
    decode_overlap: int = 0
    reverse_complement: str = "auto"
    intron_penalty: float = 0.0
    intron_rate: float = 0.0
    branch_penalty: float = 0.0
    donor_motif: str = ""
    first_atg: bool = False
    long_orfs: int = 0
    learn_rules: bool = False
    signal_precision: float = 1e-4


@dataclass
class Config:
    inputs: InputsConfig = field(default_factory=InputsConfig)
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    windows: WindowsConfig = field(default_factory=WindowsConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    crf: CRFConfig = field(default_factory=CRFConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    annotate: AnnotateConfig = field(default_factory=AnnotateConfig)
    device: str = "auto"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


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
    "inputs.bin_size", "windows.size", "model.channels", "model.kernel_size",
    "model.stem_kernel", "model.max_dilation", "model.lstm_hidden", "model.resolution",
    "crf.max_duration", "train.epochs", "train.batch_size", "train.world_size",
    "annotate.window", "train.crf_lr_scale",
    "annotate.max_decode_steps", "annotate.batch_steps",
}
NON_NEGATIVE = {
    "windows.overlap", "model.layers", "model.dropout", "train.lr", "train.weight_decay",
    "train.warmup_epochs", "train.grad_clip", "train.patience", "annotate.context",
    "annotate.signal_precision", "annotate.long_orfs", "annotate.decode_overlap",
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
    dt = cfg.crf.duration_transitions
    if not isinstance(dt, bool) and dt < 1:
        raise SemisegError("crf.duration_transitions: expected false, true or a period P >= 1,"
                           f" got {dt!r}")
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
        from .genome.tracks import read_track_sheet

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
