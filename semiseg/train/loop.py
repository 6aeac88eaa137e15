"""`semiseg train`: fit a Segmenter on labelled windows of a genome.

Outputs in the run folder DIR:
    config.yaml   the resolved config (absolute paths)
    annotation_masked.tsv  GFF/GTF training labels: the transcripts the clean-up set
                  aside and why (docs/annotations.md)
    last.pt       the state after the last complete epoch (resume point)
    best.pt       the state after the best epoch (train.select: validation loss or F1)
    metrics.tsv   one row per epoch: loss, learning rate, validation metrics, seconds
Checkpoints are written to a temporary name and renamed, and hold only tensors and plain
data, so `torch.load(path, weights_only=True)` reads them without running any code
(checkpoint.py).

The loop: `train` opens the data (train/data.py), builds the model and optimiser, then
per epoch runs `train_epoch`, `validate` (metrics.py), `RunState.record` (best epoch and
early-stopping count) and writes the checkpoints.

Reproducibility: the seed fixes initialisation, dropout and window order. The window
order of epoch e comes from a generator seeded with (seed, e), and the dropout masks of
epoch e from the global RNG reseeded with (seed, e, rank), so on CPU a resumed run
equals an uninterrupted one.

Several processes (torchrun; train/distributed.py): every process loads the same windows and
draws the same order; each takes its share of each global batch of `train.batch_size`
windows, DistributedDataParallel averages the gradients, and validation is sharded and
its counts summed across processes (each process then holds the same metrics and makes
the same best-epoch and early-stopping decisions; no process idles while another
validates). Rank 0 writes config.yaml (with train.world_size), the checkpoints and
metrics.tsv. With dropout 0 the run equals a single-process one up to the order of
floating-point reductions; with dropout each process draws its own masks.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .. import ui
from ..checkpoint import load_checkpoint, save_checkpoint
from ..config.load import save_config
from ..config.schema import Config
from ..errors import SemisegError
from ..genemodel import intronwindows
from ..metrics import (
    add_segment_counts,
    confusion,
    f1_scores,
    nanmean,
    new_segment_counts,
    segment_f1,
)
from ..runtime import Interrupted, amp_enabled, deferred
from . import averaging
from .data import (
    Dataset,
    check_fasta,
    check_signal,
    holdout_regions,
    learn_min_intron,
    learn_site_order,
    make_datasets,
    make_windows,
    phase_windows,
    prepare,
    windows_line,
)
from .distributed import Context, all_sum, per_rank_batch, shard, start, stop, world_size, wrap
from .priors import duration_prior_weight
from .runfolder import (
    check_learned_on_resume,
    checkpoint_state,
    folder_lock,
    open_run,
    set_rng_state,
)
from .runfolder import write_metrics as _write_metrics
from .runlog import best_line, epoch_line
from .stepcheck import (
    Verdicts,
    apply_gradients,
    checks_on_device,
    load_optimizer_state,
    make_optimizer,
    to_device,
)
from .tables import new_model, with_learned_rules


# ----------------------------------------------------------------------------- schedule
def learning_rate(step: int, total: int, warmup: int, base: float) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to 0 at `total` steps."""
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


@dataclass
class Schedule:
    """The learning-rate schedule of a run, in optimiser steps (batches)."""

    total: int
    warmup: int
    base_lr: float

    @classmethod
    def for_run(cls, cfg: Config, batches_per_epoch: int) -> Schedule:
        """batches_per_epoch: epoch_batches(ds, cfg)."""
        return cls(total=batches_per_epoch * cfg.train.epochs,
                   warmup=round(cfg.train.warmup_epochs * batches_per_epoch),
                   base_lr=cfg.train.lr)

    def lr(self, step: int) -> float:
        return learning_rate(step, self.total, self.warmup, self.base_lr)


@dataclass
class RunState:
    """Where a run stands (saved in every checkpoint next to the model and optimiser):
    optimiser steps taken, epochs done, one metrics row per epoch, the best epoch so far
    and the epochs since it (early stopping)."""

    step: int = 0
    epoch: int = 0
    history: list = field(default_factory=list)
    best: dict = field(default_factory=lambda: {"epoch": 0, "val_f1": -1.0,
                                                "val_loss": float("inf")})
    bad_epochs: int = 0

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> RunState:
        return cls(step=ckpt["scheduler"]["step"], epoch=ckpt["epoch"],
                   history=ckpt["history"], best=ckpt["best"], bad_epochs=ckpt["bad_epochs"])

    def record(self, row: dict, select: str) -> bool:
        """Add an epoch's metrics row; returns whether it is the best epoch so far."""
        improved = _better(row, self.best, select)
        if improved:
            self.best = {"epoch": row["epoch"], "val_f1": row["val_f1"],
                         "val_loss": row["val_loss"], "train_loss": row["train_loss"]}
            self.bad_epochs = 0
        else:
            self.bad_epochs += 1
        row["best"] = int(improved)
        self.history.append(row)
        self.epoch = row["epoch"]
        return improved

    def patience_spent(self, patience: int) -> bool:
        """Early stopping: `patience` epochs without a better one (0 = never)."""
        return bool(patience) and self.bad_epochs >= patience


def _better(row: dict, best: dict, select: str) -> bool:
    """Whether this epoch beats the best so far: lower validation loss ("loss") or higher
    validation F1 ("f1", ties to the lower loss); without validation data, lower
    training loss."""
    if math.isnan(row["val_loss"]):
        return row["train_loss"] < best.get("train_loss", float("inf"))
    if math.isnan(best["val_loss"]):  # a run resumed with validation windows it lacked
        return True
    if select == "f1":
        return row["val_f1"] > best["val_f1"] or (row["val_f1"] == best["val_f1"]
                                                  and row["val_loss"] < best["val_loss"])
    return row["val_loss"] < best["val_loss"]


def epoch_batches(ds: Dataset, cfg: Config) -> int:
    """Optimiser steps per epoch (long windows batch apart: genemodel/intronwindows.py);
    with windows.phases, the most any tiling's epoch takes."""
    return max(intronwindows.batch_count([w.end - w.start for w in d.windows],
                                         cfg.windows.size, cfg.train.batch_size)
               for d in map(ds.for_epoch, range(1, 2 + len(ds.phase_sets))))


# ----------------------------------------------------------------------------- one batch
def _forward(model, x, lengths, device, amp: bool):
    """Encoder (bfloat16 autocast when `amp`) -> float32 emissions, hidden states, steps."""
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=amp):
        emissions, hidden, steps = model(to_device(x, device), to_device(lengths, device))
    return emissions.float(), (None if hidden is None else hidden.float()), steps


def _batch_nll(model, x, lengths, y, device, amp: bool):
    """Per-sequence negative log-likelihood (B,) of a batch, with what it was computed
    from: (nll, emissions, hidden, steps, labels cut to the emitted steps)."""
    em, hid, steps = _forward(model, x, lengths, device, amp)
    y = to_device(y[:, :em.shape[1]], device)
    return model.crf.nll(em, y, steps, hidden=hid), em, hid, steps, y


class BatchLoss(torch.nn.Module):
    """The training loss of a (share of a) batch as one module call, so that
    DistributedDataParallel sees every parameter (encoder and CRF) used in its forward.

    forward(x, lengths, y, weight) -> (sum_b weight * nll_b / steps_b, nll (B,), steps (B,));
    with `prior` > 0 the loss also holds prior x the head's duration roughness
    (train/priors.py), on every process alike.
    """

    def __init__(self, model, device, amp: bool, prior: float = 0.0):
        super().__init__()
        self.model, self.device, self.amp, self.prior = model, device, amp, prior

    def forward(self, x, lengths, y, weight: float):
        nll, _, _, steps, _ = _batch_nll(self.model, x, lengths, y, self.device, self.amp)
        loss = (nll / steps.to(nll.dtype)).sum() * weight
        if self.prior:
            loss = loss + self.prior * self.model.crf.duration_roughness()
        return loss, nll, steps


# ----------------------------------------------------------------------------- epochs
def train_epoch(model, opt, ds: Dataset, cfg: Config, epoch: int, state: RunState,
                schedule: Schedule, device, amp: bool, on_batch=None,
                ctx: Context | None = None, loss_fn=None, average=None) -> dict:
    """One pass over the training windows in the epoch's seeded order (half of them
    reverse-complemented when the Dataset flips strands). Advances `state.step`; returns
    {"epoch", "lr" (the last one used), "train_loss" (NLL per CRF step)}.

    With several processes (`ctx`), every process draws the same order and takes its
    share of each global batch (distributed.shard); `loss_fn` is the BatchLoss under
    DistributedDataParallel, which averages the gradients, and each share's loss is
    weighted by world_size / (global batch) so the average is the global batch mean.
    A process whose share of the last batch is empty runs one window at weight 0 (every
    process must join each gradient reduction). `average` (a WeightAverage) takes each
    step's weights."""
    ctx = ctx or Context(device=device)
    loss_fn = loss_fn or BatchLoss(model, device, amp)
    ds = ds.for_epoch(epoch)  # windows.phases: this epoch's tiling
    model.train()
    bs = cfg.train.batch_size
    gen = torch.Generator().manual_seed(cfg.train.seed * 100003 + epoch)
    order = torch.randperm(len(ds), generator=gen).tolist()
    flips = (torch.rand(len(ds), generator=gen) < 0.5).tolist()
    lengths = [w.end - w.start for w in ds.windows]
    plan = intronwindows.batches(order, lengths, cfg.windows.size, bs, gen)
    # dropout masks: seeded per epoch and process (the same on resume; distinct per rank)
    torch.manual_seed((cfg.train.seed * 100003 + epoch) * 1009 + ctx.rank)
    # the steps' checks are read one step late on a CUDA device (train/stepcheck.py)
    verdicts = Verdicts(ds, flips, epoch, model, on_batch)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    n_steps = torch.zeros((), dtype=torch.int64, device=device)
    lr = cfg.train.lr
    for nb, batch in enumerate(plan, 1):
        lr = schedule.lr(state.step)
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        idx = shard(batch, ctx)
        weight = ctx.world_size / len(batch)
        if not idx:
            idx, weight = batch[:1], 0.0
        x, lengths, y = ds.batch(idx, flip=[flips[j] for j in idx])
        loss, nll, steps = loss_fn(x, lengths, y, weight)
        # the batch mean over all processes: the same value (and verdict) on each
        mean = all_sum(loss.detach(), ctx) / ctx.world_size
        verdicts.settle()  # the step before (done on the device by now)
        loss_ok = torch.isfinite(mean)
        ok = apply_gradients(model, opt, loss, cfg.train.grad_clip, loss_ok)
        verdicts.push(loss_ok, ok, mean, nll, idx, batch, nb, now=not checks_on_device(opt))
        if average is not None:
            average.update(model)
        state.step += 1
        if weight:
            loss_sum += nll.detach().double().sum()
            n_steps += steps.sum()
    verdicts.settle(all=True)
    totals = all_sum(torch.tensor([float(loss_sum), float(n_steps)], dtype=torch.float64), ctx)
    return {"epoch": epoch, "lr": lr,
            "train_loss": float(totals[0]) / max(1.0, float(totals[1]))}


NO_VALIDATION = {"val_loss": float("nan"), "val_f1": float("nan"),
                 "val_accuracy": float("nan"), "val_segment_f1": float("nan"),
                 "val_boundary_f1": float("nan"), "val_f1_per_label": []}


def validate(model, ds: Dataset, cfg: Config, device, amp: bool, C: int,
             ctx: Context | None = None) -> dict:
    """Mean NLL per CRF step and per-label F1 of the Viterbi labels, at model resolution;
    segment F1 (>= 50% reciprocal overlap) and boundary F1 (within one step) averaged over
    labels. Without validation windows, nan everywhere.

    With several processes the windows are sharded (window i to process i mod W) and the
    counts and sums are added up across processes, so every process gets the metrics a
    single process computes (counts exactly; the NLL sum up to summation order). Each
    process validates its share in batches of train.batch_size windows (no gradients are
    kept), so with W processes each runs 1/W of the calls: the chain kernels take about
    the same time per call at any batch up to the GPU's width."""
    if not len(ds):
        return dict(NO_VALIDATION)
    ctx = ctx or Context(device=device)
    model.eval()
    conf = np.zeros((C, C), np.int64)
    seg_counts = new_segment_counts(C)
    nll_sum, steps_sum = 0.0, 0
    bs = cfg.train.batch_size
    mine = shard(list(range(len(ds))), ctx)
    with torch.no_grad():
        for i in range(0, len(mine), bs):
            x, lengths, y = ds.batch(mine[i:i + bs])
            nll, em, hid, steps, y = _batch_nll(model, x, lengths, y, device, amp)
            if getattr(model, "frames", False):  # gold frame codes -> scheme labels
                y = torch.as_tensor(model.crf.layout.collapse(y.cpu().numpy()), device=device)
            nll_sum += float(nll.double().sum())
            steps_sum += int(steps.sum())
            seg = model.crf.decode(em, steps, hidden=hid)
            conf += confusion(seg.labels.to(device), y, C)
            pred_np, true_np = seg.labels.cpu().numpy(), y.cpu().numpy()
            for b, n in enumerate(steps.tolist()):
                add_segment_counts(seg_counts, true_np[b, :n], pred_np[b, :n], tolerance=1)
    if ctx.enabled:  # one reduction: the counts (exact in float64 below 2^53) and sums
        keys = sorted(seg_counts)
        flat = np.concatenate([conf.ravel()] + [seg_counts[k] for k in keys]
                              + [np.array([steps_sum])]).astype(np.float64)
        flat = all_sum(torch.from_numpy(flat), ctx).numpy().round().astype(np.int64)
        conf = flat[:C * C].reshape(C, C)
        for j, k in enumerate(keys):
            seg_counts[k] = flat[C * C + j * C:C * C + (j + 1) * C]
        steps_sum = int(flat[-1])
        nll_sum = float(all_sum(torch.tensor([nll_sum], dtype=torch.float64), ctx)[0])
    f1 = f1_scores(conf)
    present = (conf.sum(0) + conf.sum(1)) > 0
    seg_f1, bnd_f1 = segment_f1(seg_counts)
    return {"val_loss": nll_sum / max(1, steps_sum),
            "val_f1": float(np.nanmean(f1[present])) if present.any() else float("nan"),
            "val_accuracy": float(np.trace(conf) / max(1, conf.sum())),
            "val_segment_f1": nanmean(seg_f1), "val_boundary_f1": nanmean(bnd_f1),
            "val_f1_per_label": [float(v) for v in f1]}


def _best_from_last(ckpt: dict, best_path: Path) -> None:
    """last.pt is written before best.pt; a run stopped between the two (disk full,
    SIGKILL) has a last.pt whose own epoch is the best but an older best.pt (or none):
    best.pt is written again from last.pt."""
    if ckpt["best"]["epoch"] != ckpt["epoch"]:
        return
    if best_path.is_file():
        try:
            if load_checkpoint(best_path).data["epoch"] == ckpt["epoch"]:
                return
        except SemisegError:
            pass  # a damaged best.pt: replaced below
    ui.log(f"{best_path} did not hold epoch {ckpt['epoch']}, the best: written from last.pt")
    _save(ckpt, best_path, best_path.parent / "last.pt")


def _save(state: dict, path: Path, last_path: Path) -> None:
    """save_checkpoint; a failed write (disk full: torch.save raises a RuntimeError that
    does not say so) is one line saying what is kept and how to go on."""
    try:
        save_checkpoint(state, path)
    except (OSError, RuntimeError) as err:
        raise SemisegError(f"cannot write {path}: {_why(path.parent, err)}; "
                           + _kept(last_path)) from None


def _why(folder: Path, err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    try:
        st = os.statvfs(folder)
        if st.f_bavail * st.f_frsize < (1 << 20):
            return os.strerror(28)  # ENOSPC: "No space left on device"
    except OSError:
        pass
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _kept(last_path: Path) -> str:
    if last_path.is_file():
        return (f"{last_path} holds the last complete epoch: continue with --resume "
                "(after freeing space, if the disk is full)")
    return ("no epoch was complete (the folder holds no checkpoint): run the same command "
            "again to start over")


def _optimizer(model, cfg: Config) -> torch.optim.Optimizer:
    """AdamW; weight decay on the encoder's and emission layer's matrices only; the CRF
    head's own parameters (everything outside encoder and emit) at train.crf_lr_scale
    times the learning rate (each group's "lr_scale", applied by train_epoch)."""
    decay, no_decay, head = [], [], []
    for name, p in model.named_parameters():
        if not name.startswith(("encoder", "emit")):
            head.append(p)
        elif p.dim() >= 2:
            decay.append(p)
        else:
            no_decay.append(p)
    groups = [{"params": decay, "weight_decay": cfg.train.weight_decay, "lr_scale": 1.0},
              {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
              {"params": head, "weight_decay": 0.0, "lr_scale": cfg.train.crf_lr_scale}]
    return make_optimizer([g for g in groups if g["params"]], cfg.train.lr)


def _load_data(cfg: Config):
    """(cfg, data, scheme, columns, training Dataset, validation Dataset) of a config,
    with track statistics fitted on the training chromosomes (cfg: labels.min_intron
    and crf.site_order "learned" resolved, data.learn_min_intron and learn_site_order)."""
    data, annotation, scheme, columns = prepare(cfg)
    cfg, scheme = learn_min_intron(cfg, scheme, annotation, data)
    cfg = learn_site_order(cfg, scheme, annotation, data)
    tr, va, train_chroms = make_windows(cfg, data.chrom_sizes)
    check_fasta(cfg, data, tr)
    if cfg.inputs.tracks:  # deterministic, so a resumed run gets the same statistics
        data.fit_stats(train_chroms, exclude=holdout_regions(cfg, data.chrom_sizes))
    phases = phase_windows(cfg, data.chrom_sizes)
    with ui.progress() as bar:
        task = bar.add_task("loading windows", unit="windows", info="",
                            total=len(tr) + len(va) + sum(map(len, phases)))
        train_ds, valid_ds = make_datasets(cfg, data, annotation, scheme, columns, tr, va,
                                           on_load=lambda: bar.advance(task, 1),
                                           phases=phases)
    check_signal(train_ds, [data.feature_names[i] for i in columns])
    ui.log(windows_line(train_ds, valid_ds, cfg.windows.size))
    return cfg, data, scheme, columns, train_ds, valid_ds


# ----------------------------------------------------------------------------- the run
def train(cfg: Config, out: str | Path, resume: bool = False, stop_after: int | None = None,
          threads: int | None = None, overwrite: bool = False) -> dict:
    """Train; returns the final checkpoint's summary (best epoch, best F1, paths).

    Under torchrun (WORLD_SIZE > 1) this runs in every process: each takes its share of
    every batch (train/distributed.py), and rank 0 alone writes the run folder and logs.

    Args:
        cfg: the resolved config.
        out: the run folder (created).
        resume: continue from out/last.pt (the config must be the same; the number of
            processes may differ, the global batch is the same).
        stop_after: stop after this many epochs of this call (tests use it to simulate an
            interrupted run; the schedule still follows cfg.train.epochs).
        threads: CPU threads for torch (None: torch's default).
        overwrite: delete the run in `out` (checkpoints, metrics, config) and start again.
    """
    per_rank_batch(cfg.train.batch_size, world_size())  # before any process waits
    ctx = start(cfg.device)
    try:
        with folder_lock(Path(out), ctx.main):
            result = _train(cfg, Path(out), resume, stop_after, threads, ctx, overwrite)
    except BaseException:
        stop(ctx, wait=False)  # the other processes may be anywhere: do not wait for them
        raise
    stop(ctx)
    return result


def _write_run_files(cfg: Config, out: Path, train_ds) -> None:
    """OUT/config.yaml (the resolved config) and, where the annotation clean-up set
    genes aside, OUT/annotation_masked.tsv (what, and why)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        save_config(cfg, out / "config.yaml")
    except OSError as err:
        (out / "config.yaml.tmp").unlink(missing_ok=True)
        raise SemisegError(f"cannot write {out / 'config.yaml'}: {err.strerror}; "
                           + _kept(out / "last.pt")) from None
    if train_ds.cleanup is not None:
        (out / "annotation_masked.tsv").write_text(train_ds.cleanup.tsv())


def _save_epoch(ckpt_state: dict, state: RunState, names: list[str], out: Path,
                improved: bool) -> None:
    """An epoch's files: last.pt first (--resume needs it; _best_from_last mends a
    best.pt missed after it), best.pt when it improved, metrics.tsv; signals are held
    back over the writes."""
    last_path = out / "last.pt"
    with deferred():
        _save(ckpt_state, last_path, last_path)
        if improved:
            _save(ckpt_state, out / "best.pt", last_path)
        try:
            _write_metrics(state.history, names, out / "metrics.tsv")
        except OSError as err:
            raise SemisegError(f"cannot write {out / 'metrics.tsv'}: "
                               f"{err.strerror}; {_kept(last_path)}") from None


def _calibrate(cfg: Config, model, valid_ds, device, best_path: Path) -> None:
    """train.calibrate and train.symmetric_introns: best.pt's "calibration" record
    (genemodel/calibrate.after_training), best.pt written again."""
    from ..genemodel.calibrate import after_training

    if not (cfg.crf.frames and best_path.exists()
            and (cfg.train.calibrate or cfg.train.symmetric_introns)):
        return
    best = dict(load_checkpoint(best_path).data)
    model.load_state_dict(best["model"])
    cal, lines = after_training(model, cfg, valid_ds, device)
    for line in lines:
        ui.log(line)
    if cal:
        best["calibration"] = cal
        with deferred():  # an interrupt lands after the write: best.pt whole either way
            _save(best, best_path, best_path.parent / "last.pt")


def _train(cfg: Config, out: Path, resume: bool, stop_after: int | None,
           threads: int | None, ctx: Context, overwrite: bool = False) -> dict:
    import dataclasses

    device = ctx.device
    amp = amp_enabled(cfg, device)
    if threads:
        torch.set_num_threads(threads)
    if not ctx.main:
        ui.set_quiet(True)
    if cfg.train.world_size not in (1, ctx.world_size):
        ui.log(f"train.world_size: the config says {cfg.train.world_size}; this run has "
               f"{ctx.world_size} process(es), which is what config.yaml records")
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train,
                                                             world_size=ctx.world_size))
    last_path, best_path = out / "last.pt", out / "best.pt"
    ckpt = open_run(cfg, out, resume, overwrite)
    cfg, data, scheme, columns, train_ds, valid_ds = _load_data(cfg)
    check_learned_on_resume(ckpt, cfg, out)
    cfg = with_learned_rules(cfg, scheme, train_ds, data.fasta)
    names = list(scheme.names)
    procs = (f"; {ctx.world_size} processes ({'NCCL' if device.type == 'cuda' else 'gloo'}),"
             f" {cfg.train.batch_size // ctx.world_size} windows each per batch"
             if ctx.enabled else "")
    ui.log(f"device {device.type}{' (bfloat16 encoder)' if amp else ''}{procs}; labels "
           f"{', '.join(names)}; resolution {cfg.model.resolution} bp; K = "
           f"{cfg.crf.max_duration} steps ({cfg.crf.max_duration * cfg.model.resolution:,} bp)")

    model = new_model(cfg, scheme, columns, train_ds)
    model.to(device)
    opt = _optimizer(model, cfg)
    per_epoch = epoch_batches(train_ds, cfg)
    schedule = Schedule.for_run(cfg, per_epoch)
    H = averaging.horizon(cfg, per_epoch)
    average = averaging.WeightAverage(model, H) if H else None
    state = RunState()
    if ckpt is not None:
        averaging.resume(model, average, ckpt)
        load_optimizer_state(opt, ckpt["optimizer"])
        state = RunState.from_checkpoint(ckpt)
        set_rng_state(ckpt["rng"])
        ui.log(f"resuming {out} after epoch {state.epoch}")
        if ctx.main:
            _best_from_last(ckpt, best_path)
    # every process starts from the same weights (the same seed; DDP also broadcasts)
    loss_fn = wrap(BatchLoss(model, device, amp,
                             duration_prior_weight(cfg, train_ds.windows)), ctx)
    if ctx.main:
        _write_run_files(cfg, out, train_ds)

    done_here, stopped_early = 0, False
    try:
        with ui.progress() as bar:
            task = bar.add_task("training", total=schedule.total, completed=state.step,
                                unit="batches", info="")
            for epoch in range(state.epoch + 1, cfg.train.epochs + 1):
                if stop_after is not None and done_here >= stop_after:
                    break
                if state.patience_spent(cfg.train.patience):
                    stopped_early = True
                    break
                t0 = time.perf_counter()

                def on_batch(loss: float, epoch=epoch) -> None:
                    bar.update(task, advance=1,
                               info=f"epoch {epoch}/{cfg.train.epochs} loss {loss:.4f}")

                row = train_epoch(model, opt, train_ds, cfg, epoch, state, schedule, device,
                                  amp, on_batch, ctx=ctx, loss_fn=loss_fn, average=average)
                with (average.applied(model) if average else contextlib.nullcontext()):
                    row.update(validate(model, valid_ds, cfg, device, amp, len(names), ctx=ctx))
                row["seconds"] = time.perf_counter() - t0
                # the row is the same on every process (reduced), so is this decision
                improved = state.record(row, cfg.train.select)
                if ctx.main:
                    _save_epoch(checkpoint_state(model, opt, state, schedule, cfg, scheme,
                                                 data, columns, average),
                                state, names, out, improved)
                done_here += 1
                ui.log(epoch_line(epoch, row, improved))
    except KeyboardInterrupt:
        if not ctx.main:
            raise
        raise Interrupted(_kept(last_path)) from None
    if stopped_early:
        ui.log(f"early stopping: no better validation {cfg.train.select} for "
               f"{cfg.train.patience} epochs")
    if ctx.main and (stopped_early or state.epoch >= cfg.train.epochs):
        _calibrate(cfg, model, valid_ds, device, best_path)
    best = state.best
    ui.log(best_line(best, best_path))
    return {"best_epoch": best["epoch"], "best_val_f1": best["val_f1"],
            "best": str(best_path), "last": str(last_path), "epochs_run": len(state.history)}
