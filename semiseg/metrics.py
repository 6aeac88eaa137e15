"""Segmentation metrics shared by training (validation) and evaluation.

All work on label arrays (one label index per position, -1 = unlabelled) or on a
confusion matrix; nothing here knows about files, genomes or models (numpy only, so
validation can call it on a GPU machine with torch alone).

- base level: a ``[truth, pred]`` confusion matrix, per-label F1 from it;
- segments (maximal runs of one label): exact matches and >= 50% reciprocal-overlap
  matches; boundaries (segment ends, not the sequence ends) matched one-to-one within a
  tolerance. Counts add up over sequences (``new_segment_counts``,
  ``add_segment_counts``); ``segment_f1`` turns them into F1 per label.
"""

from __future__ import annotations

import numpy as np


def confusion(pred, true, C: int) -> np.ndarray:
    """``(C, C)`` counts ``[truth, pred]`` over positions with ``true >= 0``; numpy arrays
    or torch tensors of equal shape."""
    ok = true >= 0
    idx = true[ok] * C + pred[ok]
    idx = idx.cpu().numpy() if hasattr(idx, "cpu") else np.asarray(idx)
    return np.bincount(idx, minlength=C * C).reshape(C, C)


def f1_scores(conf: np.ndarray) -> np.ndarray:
    """Per-label F1 from a [truth, pred] confusion matrix (nan for absent labels)."""
    tp = np.diag(conf).astype(float)
    denom = conf.sum(0) + conf.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / denom, np.nan)


def prf(tp: float, n_pred: float, n_true: float) -> tuple[float, float, float]:
    """Precision, recall and F1 from counts (nan where undefined)."""
    p = tp / n_pred if n_pred else float("nan")
    r = tp / n_true if n_true else float("nan")
    f = 2 * tp / (n_pred + n_true) if (n_pred + n_true) else float("nan")
    return p, r, f


def nanmean(values) -> float:
    """Mean of the values that are not nan (nan if none)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


def runs(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of equal values: (starts, ends, values)."""
    if arr.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    change = np.flatnonzero(arr[1:] != arr[:-1]) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [arr.size]])
    return starts, ends, arr[starts]


def _overlap_matches(ps, pe, ts, te) -> tuple[int, int]:
    """Numbers of predicted and true segments with a >= 50% reciprocal-overlap partner."""
    hit_p = np.zeros(len(ps), bool)
    hit_t = np.zeros(len(ts), bool)
    j = 0
    for i in range(len(ps)):
        while j < len(ts) and te[j] <= ps[i]:
            j += 1
        k = j
        while k < len(ts) and ts[k] < pe[i]:
            ov = min(pe[i], te[k]) - max(ps[i], ts[k])
            if 2 * ov >= pe[i] - ps[i] and 2 * ov >= te[k] - ts[k]:
                hit_p[i] = hit_t[k] = True
            k += 1
    return int(hit_p.sum()), int(hit_t.sum())


def _boundary_matches(p: np.ndarray, t: np.ndarray, tol: int) -> int:
    """One-to-one matches between sorted boundary positions within +-tol (greedy, optimal
    on a line)."""
    i = j = n = 0
    while i < len(p) and j < len(t):
        if abs(int(p[i]) - int(t[j])) <= tol:
            n, i, j = n + 1, i + 1, j + 1
        elif p[i] < t[j]:
            i += 1
        else:
            j += 1
    return n


def new_segment_counts(C: int) -> dict[str, np.ndarray]:
    """Zeroed per-label counters for `add_segment_counts`."""
    return {k: np.zeros(C, np.int64) for k in ("n_pred", "n_true", "exact", "ov_pred",
                                               "ov_true", "b_pred", "b_true", "b_hit")}


def add_segment_counts(seg: dict, truth: np.ndarray, pred: np.ndarray, tolerance: int) -> None:
    """Add the segment and boundary counts of one sequence (label arrays of equal length,
    -1 = unlabelled) to `seg`: segments, exact matches, >= 50% reciprocal-overlap matches,
    boundaries and boundaries matched within `tolerance` positions, per label."""
    L = len(truth)
    trs, tre, trv = runs(truth)
    prs, pre, prv = runs(pred)
    for c in range(len(seg["n_pred"])):
        ts, te = trs[trv == c], tre[trv == c]
        ps, pe = prs[prv == c], pre[prv == c]
        seg["n_pred"][c] += len(ps)
        seg["n_true"][c] += len(ts)
        seg["exact"][c] += len(set(zip(ps.tolist(), pe.tolist()))
                               & set(zip(ts.tolist(), te.tolist())))
        hp, ht = _overlap_matches(ps, pe, ts, te)
        seg["ov_pred"][c] += hp
        seg["ov_true"][c] += ht
        pb = np.unique(np.concatenate([ps, pe]))
        tb = np.unique(np.concatenate([ts, te]))
        pb = pb[(pb > 0) & (pb < L)]
        tb = tb[(tb > 0) & (tb < L)]
        seg["b_pred"][c] += len(pb)
        seg["b_true"][c] += len(tb)
        seg["b_hit"][c] += _boundary_matches(pb, tb, tolerance)


def segment_f1(seg: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per-label F1 of >= 50% reciprocal-overlap segment matches and of boundaries
    (nan where a label has no segments on either side)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = seg["ov_pred"] / seg["n_pred"]
        r = seg["ov_true"] / seg["n_true"]
        ov = np.where((p + r) > 0, 2 * p * r / (p + r), 0.0)
        ov = np.where((seg["n_pred"] + seg["n_true"]) > 0, ov, np.nan)
        ov = np.where((seg["n_pred"] > 0) & (seg["n_true"] > 0), ov,
                      np.where((seg["n_pred"] + seg["n_true"]) > 0, 0.0, np.nan))
        nb = seg["b_pred"] + seg["b_true"]
        bf = np.where(nb > 0, 2 * seg["b_hit"] / nb, np.nan)
    return ov, bf

