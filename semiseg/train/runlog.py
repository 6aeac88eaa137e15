"""The training log's lines for an epoch and for the run's best epoch (train/loop.py).
A run without validation windows (valid_fraction 0, or a validation block wholly
held out) picks its best epoch by the training loss; its lines say so instead of
printing NaN scores."""

from __future__ import annotations

import math


def _validated(row: dict) -> bool:
    return not math.isnan(row["val_loss"])


def epoch_line(epoch: int, row: dict, improved: bool) -> str:
    """`epoch N: train loss ..., <validation scores>[ (best)], S s`."""
    val = (f"val loss {row['val_loss']:.4f}, val F1 {row['val_f1']:.4f}, segment F1 "
           f"{row['val_segment_f1']:.4f}" if _validated(row) else "no validation windows")
    return (f"epoch {epoch}: train loss {row['train_loss']:.4f}, {val}"
            f"{' (best)' if improved else ''}, {row['seconds']:.1f} s")


def best_line(best: dict, path) -> str:
    """`best epoch N (<its validation scores, or the training loss that chose it>); model
    PATH`."""
    if _validated(best):
        why = f"val loss {best['val_loss']:.4f}, val F1 {best['val_f1']:.4f}"
    else:
        why = "the lowest training loss: no validation windows"
    return f"best epoch {best['epoch']} ({why}); model {path}"
