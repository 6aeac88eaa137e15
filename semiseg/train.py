"""`semiseg train`: fit a Segmenter on labelled windows of a genome.

Outputs in the run folder DIR:
    config.yaml   the resolved config (absolute paths)
    last.pt       the state after the last complete epoch (resume point)
    best.pt       the state after the epoch with the best validation F1
    metrics.tsv   one row per epoch: loss, learning rate, validation metrics, seconds
Checkpoints are written to a temporary name and renamed, and hold only tensors and plain
data, so `torch.load(path, weights_only=True)` reads them without running any code.

Reproducibility: the seed fixes initialisation, dropout and window order. The window
order of epoch e comes from a generator seeded with (seed, e), and the global RNG state is
saved with every checkpoint, so on CPU a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import __version__, ui
from .config import Config, from_dict, save_config
from .errors import SemisegError

CHECKPOINT_FORMAT = "semiseg.checkpoint/1"
SEQUENCE_FEATURES = ("A", "C", "G", "T")


# ----------------------------------------------------------------------------- device
def pick_device(name: str) -> torch.device:
    """"auto" -> CUDA when available, else CPU; "cuda" without a GPU is an error."""
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise SemisegError("device: cuda was asked for, but no CUDA device is available "
                               "(use --device cpu or device: auto)")
        return torch.device("cuda")
    return torch.device("cpu")


# ----------------------------------------------------------------------------- data
def load_scheme(spec):
    """The LabelScheme of `labels.scheme`: a built-in name, a YAML path or a mapping."""
    from .genome import LabelScheme
    from .genome import load_scheme as _load

    if isinstance(spec, dict):
        return LabelScheme.from_dict(spec)
    return _load(spec)


def track_specs(tracks: dict) -> list:
    """TrackSpecs from `inputs.tracks` ({name: path} or {name: {path, transform, ...}})."""
    from .genome import TrackSpec

    specs = []
    for name, spec in tracks.items():
        if isinstance(spec, dict):
            d = dict(spec)
            path = d.pop("path")
            unknown = set(d) - {"transform", "mapq", "strand", "kind"}
            if unknown:
                raise SemisegError(f"inputs.tracks.{name}: unknown key(s) "
                                   f"{', '.join(sorted(unknown))} (valid: path, transform, "
                                   "mapq, strand, kind)")
            specs.append(TrackSpec(name, path, **d))
        else:
            specs.append(TrackSpec(name, spec))
    for s in specs:
        if not os.path.isfile(s.path):
            raise SemisegError(f"track {s.name}: file not found: {s.path}")
    return specs


def feature_columns(feature_names: list[str], use_sequence: bool) -> list[int]:
    """Indices of the GenomeData feature columns the model reads."""
    return [i for i, n in enumerate(feature_names) if use_sequence or n not in SEQUENCE_FEATURES]


@dataclass
class Window:
    chrom: str
    start: int
    end: int


class Dataset:
    """Training/validation windows with features (bin_size resolution) and labels (CRF
    resolution), loaded once and kept in memory as numpy arrays."""

    def __init__(self, data, annotation, windows: list[Window], columns: list[int],
                 resolution: int, rc_columns: list[int] | None = None,
                 rc_labels: np.ndarray | None = None, pool: int = 1, on_load=None):
        self.windows = windows
        self.rc_columns, self.rc_labels, self.pool = rc_columns, rc_labels, pool
        self.x, self.y = [], []
        for w in windows:
            feats, _ = data.load(w.chrom, w.start, w.end)
            self.x.append(np.ascontiguousarray(feats[:, columns], dtype=np.float32))
            self.y.append(annotation.labels(w.chrom, w.start, w.end, resolution=resolution))
            if on_load is not None:
                on_load()

    def __len__(self) -> int:
        return len(self.windows)

    def batch(self, idx, flip=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Padded features (B, T, F), lengths (B,), labels (B, S) with -1 padding.

        flip: per item, whether to reverse-complement it (training augmentation): the
        window is reversed, A<->T and C<->G swap, and each stranded label becomes its
        other-strand twin. Only windows of whole CRF steps are flipped (so bins align).
        """
        xs = [self.x[i] for i in idx]
        ys = [self.y[i] for i in idx]
        if flip is not None and self.rc_columns is not None:
            for b, f in enumerate(flip):
                if f and len(xs[b]) % self.pool == 0:
                    xs[b] = xs[b][::-1, self.rc_columns]
                    if callable(self.rc_labels):  # gold frame codes (genome/frames.py)
                        ys[b] = self.rc_labels(ys[b])
                        continue
                    y = ys[b][::-1]
                    ys[b] = np.where(y >= 0, self.rc_labels[np.maximum(y, 0)], -1)
        T, S = max(len(x) for x in xs), max(len(y) for y in ys)
        F = xs[0].shape[1]
        x = np.zeros((len(xs), T, F), np.float32)
        y = np.full((len(ys), S), -1, np.int64)
        for b, (xi, yi) in enumerate(zip(xs, ys)):
            x[b, :len(xi)] = xi
            y[b, :len(yi)] = yi
        lengths = torch.tensor([len(xi) for xi in xs], dtype=torch.int64)
        return torch.from_numpy(x), lengths, torch.from_numpy(y)


def strand_swap(scheme) -> np.ndarray:
    """For each label, its twin on the other strand (itself for unstranded labels): by
    role (gene_structure schemes), else by the name with its +/- suffix swapped."""
    out = []
    for i, (name, strand, role) in enumerate(zip(scheme.names, scheme.strands, scheme.roles)):
        if strand not in ("+", "-"):
            out.append(i)
            continue
        other = "-" if strand == "+" else "+"
        twins = [j for j, (n2, s2, r2) in enumerate(zip(scheme.names, scheme.strands,
                                                        scheme.roles))
                 if s2 == other and ((role is not None and r2 == role)
                                     or (role is None and name.endswith(strand)
                                         and n2 == name[:-1] + other))]
        if len(twins) != 1:
            raise SemisegError(f"train.reverse_complement: label {name!r} ({strand}) has no "
                               "unique twin on the other strand in the label scheme")
        out.append(twins[0])
    return np.asarray(out, np.int64)


def rc_columns(feature_names: list[str]) -> list[int]:
    """Column permutation that complements the sequence channels (A<->T, C<->G)."""
    pos = {n: i for i, n in enumerate(feature_names)}
    swap = {"A": "T", "T": "A", "C": "G", "G": "C"}
    return [pos[swap[n]] if n in swap else i for i, n in enumerate(feature_names)]


def split_regions(cfg: Config, sizes: dict[str, int]) -> tuple[list, list]:
    """(train, valid) lists of (chrom, start, end) following the `windows` section."""
    chroms = cfg.windows.chroms or list(sizes)
    for c in list(chroms) + list(cfg.windows.valid_chroms):
        if c not in sizes:
            raise SemisegError(f"windows: chromosome {c!r} is not in the FASTA "
                               f"({', '.join(list(sizes)[:8])})")
    res = cfg.model.resolution
    if cfg.windows.valid_chroms:
        train = [(c, 0, sizes[c]) for c in chroms if c not in cfg.windows.valid_chroms]
        valid = [(c, 0, sizes[c]) for c in cfg.windows.valid_chroms]
    else:
        train, valid = [], []
        for c in chroms:
            cut = int(sizes[c] * (1 - cfg.windows.valid_fraction)) // res * res
            if cut > 0:
                train.append((c, 0, cut))
            if cut < sizes[c] and cfg.windows.valid_fraction > 0:
                valid.append((c, cut, sizes[c]))
    if not train:
        raise SemisegError("windows: no training chromosomes left after the validation split")
    return train, valid


def tile(regions: list, size: int, overlap: int, min_length: int) -> list[Window]:
    """Windows of `size` bp (stride size - overlap) over regions; the last one may be
    shorter; windows shorter than `min_length` are dropped."""
    out = []
    step = size - overlap
    for chrom, start, end in regions:
        s = start
        while s < end:
            e = min(s + size, end)
            if e - s >= min_length:
                out.append(Window(chrom, s, e))
            if e == end:
                break
            s += step
    return out


def prepare(cfg: Config):
    """Open the inputs of a config: (GenomeData, Annotation, LabelScheme, columns)."""
    from .genome import Fasta, GenomeData, read_annotation

    if cfg.inputs.fasta is None:
        raise SemisegError("inputs.fasta: a FASTA is needed (it defines the chromosomes)")
    paths = cfg.inputs.fasta if isinstance(cfg.inputs.fasta, list) else [cfg.inputs.fasta]
    for p in paths:
        if not os.path.isfile(p):
            raise SemisegError(f"inputs.fasta: file not found: {p}")
    if cfg.labels.annotation is None:
        raise SemisegError("labels.annotation: training needs an annotation (GFF3/GTF/BED)")
    if not os.path.isfile(cfg.labels.annotation):
        raise SemisegError(f"labels.annotation: file not found: {cfg.labels.annotation}")
    scheme = load_scheme(cfg.labels.scheme)
    fasta = Fasta(cfg.inputs.fasta)
    from .evaluate import sizes_with_extras

    sizes, extras = sizes_with_extras(cfg.labels.annotation, fasta.chrom_sizes)
    if extras and not cfg.inputs.alias:
        ui.log(f"annotation chromosome(s) not in the FASTA, ignored: {', '.join(extras[:8])}"
               + (f" ... ({len(extras)})" if len(extras) > 8 else ""))
    elif cfg.inputs.alias:
        sizes = fasta.chrom_sizes  # with an alias map every name must resolve
    annotation = read_annotation(cfg.labels.annotation, scheme, sizes, alias=cfg.inputs.alias)
    # labels are read from `annotation` directly (at the CRF resolution), so GenomeData
    # gets none: it only builds features
    data = GenomeData(fasta, tracks=track_specs(cfg.inputs.tracks), annotation=None,
                      resolution=cfg.inputs.bin_size, softmask=cfg.inputs.softmask,
                      alias=cfg.inputs.alias)
    columns = feature_columns(data.feature_names, cfg.inputs.sequence)
    return data, annotation, scheme, columns


# ----------------------------------------------------------------------------- schedule
def frame_gold_for(cfg: Config, scheme, annotation, data):
    """Gold frame codes (genome/frames.py) for training the reading-frame gene model."""
    from .genome.frames import FrameGold, FrameLayout
    from .genome.labels import gff_transcripts, read_gff_rows

    path = cfg.labels.annotation
    if not path.lower().removesuffix(".gz").endswith((".gff", ".gff3", ".gtf")):
        raise SemisegError(f"crf.frames: the annotation must be GFF3 or GTF (transcripts "
                           f"with CDS rows), got {path}")
    rows, gtf = read_gff_rows(path, annotation.chrom_sizes, cfg.inputs.alias)
    transcripts = gff_transcripts(rows, gtf, scheme, path)
    gold = FrameGold(FrameLayout.from_scheme(scheme), annotation, transcripts, data.fasta,
                     min_intron=scheme.min_intron)
    ui.log(gold.report.line())
    return gold


def learning_rate(step: int, total: int, warmup: int, base: float) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to 0 at `total` steps."""
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


# ----------------------------------------------------------------------------- checkpoints
def save_checkpoint(state: dict, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except BaseException:  # interrupted or disk full: leave no partial file behind
        tmp.unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint, read with weights_only=True (no code runs); errors are one line."""
    path = Path(path)
    if path.is_dir():
        path = path / "best.pt"
    if not path.is_file():
        raise SemisegError(f"model checkpoint not found: {path}")
    import pickle
    import warnings

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
    return ckpt


def build_model(ckpt_or_cfg, n_features: int | None = None, num_labels: int | None = None):
    """A Segmenter from a checkpoint (weights loaded) or from (cfg, n_features, labels)."""
    from .genome import LabelScheme
    from .model import Segmenter

    if isinstance(ckpt_or_cfg, dict):
        ckpt = ckpt_or_cfg
        cfg = from_dict(ckpt["config"])
        scheme = LabelScheme.from_dict(ckpt["labels"]) if cfg.crf.frames else None
        model = Segmenter(ckpt["n_features"], len(ckpt["labels"]["labels"]), cfg,
                          scheme=scheme)
        model.load_state_dict(ckpt["model"])
        return model, cfg
    cfg = ckpt_or_cfg
    scheme = load_scheme(cfg.labels.scheme) if cfg.crf.frames else None
    return Segmenter(n_features, num_labels, cfg, scheme=scheme), cfg


def _rng_state() -> dict:
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _config_diff(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += _config_diff(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}")
    return out


# ----------------------------------------------------------------------------- metrics
def confusion(pred: torch.Tensor, true: torch.Tensor, C: int) -> np.ndarray:
    ok = true >= 0
    idx = (true[ok] * C + pred[ok]).cpu().numpy()
    return np.bincount(idx, minlength=C * C).reshape(C, C)


def f1_scores(conf: np.ndarray) -> np.ndarray:
    """Per-label F1 from a [truth, pred] confusion matrix (nan for absent labels)."""
    tp = np.diag(conf).astype(float)
    denom = conf.sum(0) + conf.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / denom, np.nan)


# ----------------------------------------------------------------------------- training
def _better(row: dict, best: dict, select: str) -> bool:
    """Whether this epoch beats the best so far: lower validation loss ("loss") or higher
    validation F1 ("f1", ties to the lower loss); without validation data, lower
    training loss."""
    if math.isnan(row["val_loss"]):
        return row["train_loss"] < best.get("train_loss", float("inf"))
    if select == "f1":
        return row["val_f1"] > best["val_f1"] or (row["val_f1"] == best["val_f1"]
                                                  and row["val_loss"] < best["val_loss"])
    return row["val_loss"] < best["val_loss"]


def _amp_enabled(cfg: Config, device: torch.device) -> bool:
    return device.type == "cuda" and cfg.train.amp in ("auto", "on")


def _forward(model, x, lengths, device, amp: bool):
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
        emissions, hidden, steps = model(x.to(device), lengths.to(device))
    return emissions.float(), (None if hidden is None else hidden.float()), steps


def validate(model, ds: Dataset, cfg: Config, device, amp: bool, C: int) -> dict:
    """Mean NLL per CRF step and per-label F1 of the Viterbi labels, at model resolution."""
    from .evaluate import add_segment_counts, new_segment_counts, segment_f1

    model.eval()
    conf = np.zeros((C, C), np.int64)
    seg_counts = new_segment_counts(C)
    nll_sum, steps_sum = 0.0, 0
    bs = cfg.train.batch_size
    with torch.no_grad():
        for i in range(0, len(ds), bs):
            x, lengths, y = ds.batch(range(i, min(i + bs, len(ds))))
            em, hid, steps = _forward(model, x, lengths, device, amp)
            y = y[:, :em.shape[1]].to(device)
            nll = model.crf.nll(em, y, steps, hidden=hid)
            if getattr(model, "frames", False):  # gold frame codes -> scheme labels
                y = torch.as_tensor(model.crf.layout.collapse(y.cpu().numpy()), device=device)
            nll_sum += float(nll.sum())
            steps_sum += int(steps.sum())
            seg = model.crf.decode(em, steps, hidden=hid)
            conf += confusion(seg.labels.to(device), y, C)
            pred_np, true_np = seg.labels.cpu().numpy(), y.cpu().numpy()
            for b, n in enumerate(steps.tolist()):
                add_segment_counts(seg_counts, true_np[b, :n], pred_np[b, :n], tolerance=1)
    f1 = f1_scores(conf)
    present = (conf.sum(0) + conf.sum(1)) > 0
    seg_f1, bnd_f1 = segment_f1(seg_counts)

    def macro(v):
        v = v[~np.isnan(v)]
        return float(v.mean()) if len(v) else float("nan")

    return {"val_loss": nll_sum / max(1, steps_sum),
            "val_f1": float(np.nanmean(f1[present])) if present.any() else float("nan"),
            "val_accuracy": float(np.trace(conf) / max(1, conf.sum())),
            "val_segment_f1": macro(seg_f1), "val_boundary_f1": macro(bnd_f1),
            "val_f1_per_label": [float(v) for v in f1]}


def _write_metrics(history: list[dict], names: list[str], path: Path) -> None:
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
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def train(cfg: Config, out: str | Path, resume: bool = False, stop_after: int | None = None,
          threads: int | None = None) -> dict:
    """Train; returns the final checkpoint's summary (best epoch, best F1, paths).

    Args:
        cfg: the resolved config.
        out: the run folder (created).
        resume: continue from out/last.pt (the config must be the same).
        stop_after: stop after this many epochs of this call (tests use it to simulate an
            interrupted run; the schedule still follows cfg.train.epochs).
        threads: CPU threads for torch (None: torch's default).
    """
    out = Path(out)
    device = pick_device(cfg.device)
    amp = _amp_enabled(cfg, device)
    if threads:
        torch.set_num_threads(threads)
    last_path, best_path = out / "last.pt", out / "best.pt"
    ckpt = None
    if resume:
        if not last_path.is_file():
            raise SemisegError(f"--resume: no checkpoint to resume from ({last_path} is missing)")
        ckpt = load_checkpoint(last_path)
        # the device and the annotation settings may change; everything else must match
        diff = [k for k in _config_diff(ckpt["config"], cfg.to_dict())
                if k != "device" and not k.startswith("annotate.")]
        if diff:
            raise SemisegError(f"--resume: the config differs from the run in {out} "
                               f"({', '.join(diff[:6])})")
    elif last_path.exists() or best_path.exists():
        raise SemisegError(f"{out} already holds a training run; use --resume to continue it "
                           "or choose another --out")

    data, annotation, scheme, columns = prepare(cfg)
    names = list(scheme.names)
    C = len(names)
    train_regions, valid_regions = split_regions(cfg, data.chrom_sizes)
    if cfg.inputs.tracks:  # deterministic, so a resumed run gets the same statistics
        data.fit_stats(sorted({c for c, _, _ in train_regions}))
    res = cfg.model.resolution
    ui.log(f"device {device.type}{' (bfloat16 encoder)' if amp else ''}; labels "
           f"{', '.join(names)}; resolution {res} bp; K = {cfg.crf.max_duration} steps "
           f"({cfg.crf.max_duration * res:,} bp)")
    min_len = min(cfg.windows.size // 4, 10 * res)
    tr = tile(train_regions, cfg.windows.size, cfg.windows.overlap, min_len)
    va = tile(valid_regions, cfg.windows.size, 0, res)
    if not tr:
        raise SemisegError("windows: no training windows (windows.size larger than the data?)")
    with ui.progress() as bar:
        t_load = bar.add_task("loading windows", total=len(tr) + len(va), unit="windows",
                              info="")
        rc = {}
        gold = annotation
        if cfg.crf.frames:
            gold = frame_gold_for(cfg, scheme, annotation, data)
        if cfg.train.reverse_complement:
            rc = {"rc_columns": rc_columns([data.feature_names[i] for i in columns]),
                  "rc_labels": gold.layout.flip if cfg.crf.frames else strand_swap(scheme),
                  "pool": res // cfg.inputs.bin_size}
        def tick():
            bar.advance(t_load, 1)

        train_ds = Dataset(data, gold, tr, columns, res, on_load=tick, **rc)
        valid_ds = Dataset(data, gold, va, columns, res, on_load=tick)
    ui.log(f"{len(tr)} training windows, {len(va)} validation windows of "
           f"{cfg.windows.size:,} bp")

    torch.manual_seed(cfg.train.seed)
    model, _ = build_model(cfg, len(columns), C)
    model.to(device)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and name.startswith(("encoder", "emit")) else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.train.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.train.lr)
    bs = cfg.train.batch_size
    per_epoch = math.ceil(len(train_ds) / bs)
    total = per_epoch * cfg.train.epochs
    warmup = round(cfg.train.warmup_epochs * per_epoch)
    step, epoch0, history = 0, 0, []
    best = {"epoch": 0, "val_f1": -1.0, "val_loss": float("inf")}
    bad_epochs = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        step = ckpt["scheduler"]["step"]
        epoch0 = ckpt["epoch"]
        history = ckpt["history"]
        best = ckpt["best"]
        bad_epochs = ckpt["bad_epochs"]
        _set_rng_state(ckpt["rng"])
        ui.log(f"resuming {out} after epoch {epoch0}")
    else:
        out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / "config.yaml")

    def state(epoch: int) -> dict:
        from .model import model_hash

        sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        return {
            "format": CHECKPOINT_FORMAT, "semiseg_version": __version__, "epoch": epoch,
            "model": sd, "model_hash": model_hash(sd), "optimizer": opt.state_dict(),
            "scheduler": {"step": step, "total": total, "warmup": warmup,
                          "base_lr": cfg.train.lr},
            "rng": _rng_state(), "config": cfg.to_dict(), "labels": scheme.to_dict(),
            "genome": data.config(), "n_features": len(columns), "columns": columns,
            "feature_names": [data.feature_names[i] for i in columns],
            "best": dict(best), "bad_epochs": bad_epochs, "history": history,
        }

    done_here = 0
    stopped_early = False
    try:
        with ui.progress() as bar:
            task = bar.add_task("training", total=total, completed=step, unit="batches",
                                info="")
            for epoch in range(epoch0 + 1, cfg.train.epochs + 1):
                if stop_after is not None and done_here >= stop_after:
                    break
                if cfg.train.patience and bad_epochs >= cfg.train.patience:
                    stopped_early = True
                    break
                t0 = time.perf_counter()
                model.train()
                gen = torch.Generator().manual_seed(cfg.train.seed * 100003 + epoch)
                order = torch.randperm(len(train_ds), generator=gen).tolist()
                flips = (torch.rand(len(train_ds), generator=gen) < 0.5).tolist()
                loss_sum, n_steps = 0.0, 0
                lr = cfg.train.lr
                for i in range(0, len(order), bs):
                    lr = learning_rate(step, total, warmup, cfg.train.lr)
                    for g in opt.param_groups:
                        g["lr"] = lr
                    x, lengths, y = train_ds.batch(order[i:i + bs],
                                                   flip=[flips[j] for j in order[i:i + bs]])
                    em, hid, steps = _forward(model, x, lengths, device, amp)
                    y = y[:, :em.shape[1]].to(device)
                    nll = model.crf.nll(em, y, steps, hidden=hid)
                    loss = (nll / steps.to(nll.dtype)).mean()
                    if not torch.isfinite(loss):
                        raise SemisegError(f"training diverged at epoch {epoch} "
                                           f"(loss {loss.item()}); "
                                           "lower train.lr")
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    if cfg.train.grad_clip > 0:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.grad_clip)
                    opt.step()
                    step += 1
                    loss_sum += float(nll.detach().sum())
                    n_steps += int(steps.sum())
                    bar.update(task, advance=1,
                               info=f"epoch {epoch}/{cfg.train.epochs} loss {loss.item():.4f}")
                row = {"epoch": epoch, "lr": lr, "train_loss": loss_sum / max(1, n_steps)}
                if len(valid_ds):
                    row.update(validate(model, valid_ds, cfg, device, amp, C))
                else:
                    row.update({"val_loss": float("nan"), "val_f1": float("nan"),
                                "val_accuracy": float("nan"), "val_segment_f1": float("nan"),
                                "val_boundary_f1": float("nan"), "val_f1_per_label": []})
                row["seconds"] = time.perf_counter() - t0
                improved = _better(row, best, cfg.train.select)
                if improved:
                    best = {"epoch": epoch, "val_f1": row["val_f1"], "val_loss": row["val_loss"],
                            "train_loss": row["train_loss"]}
                    bad_epochs = 0
                else:
                    bad_epochs += 1
                row["best"] = int(improved)
                history.append(row)
                ckpt_state = state(epoch)
                if improved:
                    save_checkpoint(ckpt_state, best_path)
                save_checkpoint(ckpt_state, last_path)
                _write_metrics(history, names, out / "metrics.tsv")
                done_here += 1
                ui.log(f"epoch {epoch}: train loss {row['train_loss']:.4f}, val loss "
                       f"{row['val_loss']:.4f}, val F1 {row['val_f1']:.4f}, segment F1 "
                       f"{row['val_segment_f1']:.4f}"
                       f"{' (best)' if improved else ''}, {row['seconds']:.1f} s")
    except KeyboardInterrupt:
        raise SemisegError(f"interrupted; {last_path} holds the last complete epoch: continue "
                           "with --resume") from None
    if stopped_early:
        ui.log(f"early stopping: no better validation {cfg.train.select} for "
               f"{cfg.train.patience} epochs")
    ui.log(f"best epoch {best['epoch']} (val loss {best['val_loss']:.4f}, val F1 "
           f"{best['val_f1']:.4f}); model {best_path}")
    return {"best_epoch": best["epoch"], "best_val_f1": best["val_f1"],
            "best": str(best_path), "last": str(last_path), "epochs_run": len(history)}

