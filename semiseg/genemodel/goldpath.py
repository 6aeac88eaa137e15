"""The gold half of the gene model's loss by its one path, where it has only one.

FrameHead.nll is log Z - log Z(gold), log Z(gold) the log-partition over the
segmentations that agree with a window's gold codes (the gold mask). With run tails
(crf.run_tails: a long run is fixed-length tail pieces and one last piece) a window
with no unknown base mostly has exactly one such segmentation: the mask allows a label
and its run tail, or an intron in any frame, but the grammar's fixed durations and
frames leave one path (not where a window starts inside an intron: its frame is open,
three paths; without run tails a run has a great many). Then log Z(gold) is that
path's score, a sum of gathered terms, and its gradient the path's indicator: the same
value and gradients as the clamped log-partition, without its forward and backward
passes (RESULTS-log.md, "The gold half of the loss by its one path on the CPU").

Whether a window's gold lattice holds one path is a property of its masks alone (the
grammar's -inf transitions and durations, the sequence mask, the gold mask), not of the
learned scores, which are finite: it is decided once per distinct window (its gold
codes and bases, by content) with every finite score set to 0, where log Z counts the
paths (log 1 = 0), and the path is then found by the max-sum on the same zeros.
`GoldPaths` keeps the answer per window; a window with unknown bases, or more than one
path, goes through the clamped log-partition as before. Used on the CPU (the numba
backend, float64), where the clamped passes cost as much as the free ones and a
window's content is on the host: on a GPU the content would have to be copied to the
host every step (a wait), so the GPU keeps the clamped call.
"""

from __future__ import annotations

import hashlib
import os

import torch
from torch import Tensor

from ..crf import log_partition, viterbi

# SEMISEG_GOLD_PATHS=0 sums every window's gold by the clamped log-partition (as on a
# GPU); the tests turn it off to compare
ENABLED = os.environ.get("SEMISEG_GOLD_PATHS", "1") != "0"
MAX_WINDOWS = 200_000  # distinct windows remembered (a training set's tilings and flips)


def _zeros(v: Tensor | None) -> Tensor | None:
    """v with every finite entry 0 (its -inf entries, the grammar's, kept), float64."""
    if v is None:
        return None
    v = v.detach().double()
    return torch.where(torch.isfinite(v), torch.zeros_like(v), v)


class GoldPaths:
    """Per distinct window (gold codes and bases up to its length): its one gold path
    as (starts, durations, labels) int64 arrays, or None (unknown bases, several paths,
    or none)."""

    def __init__(self):
        self.paths: dict[bytes, tuple | None] = {}

    def lookup(self, t: dict, gold: Tensor, labels: Tensor, codes: Tensor,
               lengths: Tensor) -> list[tuple | None]:
        """The path of each sequence of a batch (CPU tensors): t the head's terms, gold
        the (B, T, C) gold mask (with the sequence mask), labels the gold codes. The
        windows not met before are counted (and their paths found) together, in one
        call each over the backend's threads."""
        keys = [hashlib.sha1(labels[b, :int(n)].numpy().tobytes()
                             + codes[b, :int(n)].numpy().tobytes()).digest()
                for b, n in enumerate(lengths.tolist())]
        new = [b for b, k in enumerate(keys) if k not in self.paths]
        if new:
            if len(self.paths) + len(new) > MAX_WINDOWS:
                self.paths.clear()
            for b, path in zip(new, _one_paths(t, gold[new], lengths[new])):
                self.paths[keys[b]] = path
        return [self.paths[k] for k in keys]


def _one_paths(t: dict, gold: Tensor, lengths: Tensor) -> list[tuple | None]:
    """The single segmentation of each sequence's gold lattice (gold (n, T, C)), or None
    where it holds more than one (or none): log Z with every finite score 0 counts the
    segmentations (0 for one, log 2 = 0.69 or more for two or more, -inf for none), and
    the max-sum on the same zeros finds the one."""
    n, T, C = gold.shape
    zero = torch.zeros(n, T, C, dtype=torch.float64)
    tr, db = _zeros(t["transition"]), _zeros(t["duration_bias"])
    kw = dict(start=_zeros(t["start"]), end=_zeros(t["end"]), backend="numba")
    with torch.no_grad():
        log_n = log_partition(zero, tr, db, lengths, allowed=gold, **kw)
        one = [b for b in range(n) if torch.isfinite(log_n[b]) and float(log_n[b]) < 0.5]
        out: list[tuple | None] = [None] * n
        if one:
            seg = viterbi(zero[one], tr, db, lengths[one], allowed=gold[one], **kw)
            for b, rows in zip(one, seg.segments):
                st, du, lab = rows.arrays()
                out[b] = (st.copy(), du.copy(), lab.copy())
    return out


def path_score(t: dict, b: int, path: tuple) -> Tensor:
    """The score of sequence b's segmentation `path` under the terms t (docs/contract.md's
    score(y)), in float64, differentiable in every floating term."""
    st, du, lab = (torch.from_numpy(a) for a in path)
    sc = t["scores"][b].double()
    L = int(st[-1] + du[-1])
    per_pos = torch.repeat_interleave(lab, du)  # the label of every position
    s = sc[torch.arange(L), per_pos].sum()
    s = s + t["duration_bias"].double()[du - 1, lab].sum()
    if t.get("proj_start") is not None:
        s = s + t["proj_start"][b].double()[st, lab].sum()
    if t.get("proj_end") is not None:
        s = s + t["proj_end"][b].double()[st + du - 1, lab].sum()
    tr = t["transition"].double()
    if len(lab) > 1:
        if tr.dim() == 2:
            s = s + tr[lab[:-1], lab[1:]].sum()
        else:
            s = s + tr[(du[1:] - 1) % tr.shape[0], lab[:-1], lab[1:]].sum()
    if t.get("start") is not None:
        s = s + t["start"].double()[lab[0]]
    if t.get("end") is not None:
        s = s + t["end"].double()[lab[-1]]
    return s
