"""Triton backend of semiseg.crf (the contract: dispatch.py's docstring and docs/contract.md).

Static (C, C) transitions (static.py; jit/chain.py's docstring has the schedule and the math):
    forward(x)  -> (log_z (B,), saved)       forward and reversed chains over one half of
                                             each sequence, side by side; log Z at the join
    backward(x, saved, grad_log_z) -> grads  both chains over their other halves, then all
                                             checkpoint segments at once (recompute forward
                                             rows, reversed chain with the gradients)
    viterbi(x)  -> (score, labels, seg_start) both max-product halves with small-integer
                                             backpointers, the join, the traceback
Periodic (P, C, C) transitions with P < K run the periodic family (chain.py's section on
it): the same two-direction schedule with an end-indexed forward chain, the wave backward;
from KP x CP = 16384 the end-indexed chain keeps its ring in global memory, walked in
tiles (jit/end.py TILE; Tuning.end_tile), bitwise the same results; from CHAIN_TILE_FROM /
BWD_TILE_FROM the reversed chain, the joins and the backward do too, as the static ones.
Fully duration-dependent (K, C, C) transitions run the *_dd kernels: one forward chain,
then segment by segment from the end (recompute beside the reversed chain, _Overlap).

Importing this package imports triton; on CPU tensors it needs TRITON_INTERPRET=1 set
before triton is first imported.

Scope: a ring of min(K, T) slots x C labels per program, up to MAX_RING ring elements for
duration-dependent transitions (K = 1000 with C = 24 fits) and MAX_RING_TILED for static
and periodic ones (K = 8192 at C <= 16: from CHAIN_TILE_FROM / BWD_TILE_FROM their chains,
joins and backward keep the ring in GPU memory and walk it in tiles); larger rings are not
implemented: `supports(x)` says so, dispatch's "auto" then picks the torch backend, and
backend="triton" raises a ValueError.

Layout: this module is the backend's entry (scope, dispatch by transition family, CUDA
graphs for small calls: graphs.py); schedule.py holds `Tuning`, every launch setting and
the rules that read them; static.py, periodic.py and dd.py launch each family's kernels;
host.py holds their shared host pieces; jit/ holds the Triton source (chain.py: the
start-indexed chain, its joins and backward; end.py: the periodic end-indexed chain;
dd.py; split_end.py: the end-indexed chain split over
programs; common.py: the helpers they share). docs/kernels.md describes the family.
"""

from __future__ import annotations

import functools

from torch import Tensor

from ..inputs import CRFInputs
from . import dd, graphs, periodic, static
from .schedule import DEFAULT, Tuning, _shape

__all__ = ["DEFAULT", "Tuning", "backward", "forward", "supports", "viterbi"]

MAX_RING = 32768  # KP * CP ring elements per program (the duration-dependent family,
# whose register rings were never measured beyond it)
MAX_RING_TILED = 131072  # the same for static and periodic transitions: K = 8192 at
# C <= 16 (their rings in memory, in tiles: Tuning.chain_opts, bwd_tile, end_tile)


def supports(x: CRFInputs) -> str | None:
    """None if dispatch's "auto" should run these kernels on x, else the reason not."""
    return _scope(x)


def _scope(x: CRFInputs) -> str | None:
    """None if these kernels can compute x at all, else the reason they cannot."""
    import torch

    KP, CP = _shape(x)
    limit = MAX_RING if x.duration_dependent else MAX_RING_TILED
    if KP * CP > limit:
        kind = ("duration-dependent" if x.duration_dependent else
                "periodic" if x.periodic else "static")
        return (f"ring of {KP} x {CP} (min(K, T) x C, padded to powers of two) exceeds "
                f"the {limit} elements these kernels hold for {kind} transitions")
    if x.scores.dtype != torch.float32:
        return f"the Triton kernels compute in float32, got {x.scores.dtype}"
    return None


def _check(x: CRFInputs):
    why = _scope(x)
    if why is not None:
        raise ValueError(f'backend="triton": {why}; use backend="torch"')


def forward(x: CRFInputs, keep: bool = False, tuning: Tuning | None = None):
    """log Z and the saved state (dispatch.py's contract) under `tuning` (DEFAULT when
    None); a small call replays a CUDA graph of the eager path (graphs.py), bitwise the
    same."""
    _check(x)
    t = tuning or DEFAULT
    sp = t.sparse_width(x)  # outside any capture: it reads the transition on the host
    if graphs.eligible(x, _shape(x)[1]):
        return graphs.forward(x, keep, functools.partial(_forward, sparse=sp, t=t), (t, sp))
    return _forward(x, keep, sp, t)


def backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """The gradients (dispatch.py's contract) with the forward's tuning: by graph replay
    after a graphed forward."""
    _check(x)
    if isinstance(saved, graphs.Saved):
        t = saved.inst.out[1]["tuning"]
        return graphs.backward(saved, grad_log_z, wanted, _backward, t)
    return _backward(x, saved, grad_log_z, wanted)


def viterbi(x: CRFInputs, tuning: Tuning | None = None):
    """(score, labels, seg_start) (dispatch.py's contract); small calls by graph replay."""
    _check(x)
    t = tuning or DEFAULT
    sp = t.sparse_width(x) if t.sparse_viterbi else 0
    if graphs.eligible(x, _shape(x)[1]):
        return graphs.viterbi(x, functools.partial(_viterbi, sparse=sp, t=t), (t, sp))
    return _viterbi(x, sp, t)


def _forward(x: CRFInputs, keep: bool = False, sparse: int = 0, t: Tuning = DEFAULT):
    """The eager forward of x's transition family. keep (dispatch.py): a backward will
    follow (static.forward, periodic.forward say what each does with it). sparse:
    t.sparse_width(x) (periodic only)."""
    if x.duration_dependent:
        return dd.forward(t, x)
    if x.periodic:
        return periodic.forward(t, x, keep, sparse)
    return static.forward(t, x, keep)


def _backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    if x.duration_dependent:
        return dd.backward(x, saved, grad_log_z)
    if x.periodic:
        return periodic.backward(x, saved, grad_log_z, wanted)
    return static.backward(x, saved, grad_log_z, wanted)


def _viterbi(x: CRFInputs, sparse: int = 0, t: Tuning = DEFAULT):
    if x.duration_dependent:
        return dd.viterbi(t, x)
    if x.periodic:
        return periodic.viterbi(t, x, sparse)
    return static.viterbi(t, x)
