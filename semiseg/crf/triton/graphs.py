"""CUDA graphs for small calls of the Triton backend (issue 9: no host-bound time).

At small shapes the GPU finishes a call before the host has launched it: at (32, 300, 30,
39) the eager forward + backward spends ~1.9 ms of wall time on one H100 for ~1.4 ms of
GPU work (Triton launches, stream forks and joins, a dozen small torch ops), and the
public API more (RESULTS-log.md, "CUDA graphs for small calls"). Captured once per input
signature and replayed, the same kernels run from one launch.

How:
- `eligible(x)`: CUDA inputs, static or periodic transitions (not the duration-dependent
  family), B x T x CP <= MAX_ELEMENTS (each instance keeps its buffers), ENABLED (the
  environment variable SEMISEG_CUDA_GRAPHS=0 turns graphs off).
- A signature's first call runs eagerly; its second captures (shapes met once never pay
  a capture).
- An instance is a set of static input tensors plus the graphs captured over them: the
  forward (its outputs, log Z and the saved state, live in the graph's memory), one
  backward per `wanted` set (reading that saved state), or the Viterbi. A call copies its
  inputs into the static tensors and replays; results handed to the caller are copies.
- A forward holds its instance for as long as the `saved` it returned is alive (a
  backward may follow), so two pending forwards of one signature never share buffers: the
  second gets another instance (up to MAX_INSTANCES cached in all, the least recently
  used idle one evicted), or runs eagerly when none can be had.
- The replayed kernels are the eager path's, on the same inputs in the same order, so
  results are bitwise the eager ones (tests/test_gpu_kernels.py checks it).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import torch

from ..inputs import CRFInputs

ENABLED = os.environ.get("SEMISEG_CUDA_GRAPHS", "1") != "0"
MAX_ELEMENTS = 1 << 21  # B x T x CP of a call that may be graphed
MAX_INSTANCES = 8  # graph instances cached in all


def eligible(x: CRFInputs, CP: int) -> bool:
    return (ENABLED and x.scores.is_cuda and not x.duration_dependent
            and x.batch * x.T * CP <= MAX_ELEMENTS)


def signature(x: CRFInputs) -> tuple:
    """What a captured graph depends on besides the input values."""
    present = tuple(getattr(x, n) is not None
                    for n in ("start", "end", "proj_start", "proj_end", "allowed"))
    return (x.scores.device, x.scores.dtype, tuple(x.scores.shape),
            tuple(x.transition.shape), x.K, present)


class _Instance:
    """Static inputs and the graphs captured over them."""

    def __init__(self, x: CRFInputs):
        self.x = x.replace(**{n: (torch.empty_like(v, memory_format=torch.contiguous_format)
                                  if v is not None else None)
                              for n, v in _tensors(x).items()})
        self.graph = None  # the forward's or the Viterbi's
        self.out = None  # its outputs, in the graph's memory
        # (wanted, settings: the Tuning) -> (graph, grad_log_z tensor, gradient dict)
        self.backward = {}
        self.held = False

    def load(self, x: CRFInputs):
        pairs = [(getattr(self.x, n), v) for n, v in _tensors(x).items() if v is not None]
        _copy([d for d, _ in pairs], [v for _, v in pairs])


def _copy(dst: list, src: list) -> None:
    """dst[i] <- src[i], with as few launches as torch allows (one multi-tensor copy)."""
    torch._foreach_copy_(dst, src)


def _copies(out) -> list:
    """Fresh copies of the tensors in out (a graph's outputs: a later replay rewrites them)."""
    fresh = [torch.empty_like(v) for v in out]
    _copy(fresh, list(out))
    return fresh


def _tensors(x: CRFInputs) -> dict:
    return {n: getattr(x, n) for n in ("scores", "lengths", "transition", "duration_bias",
                                       "start", "end", "proj_start", "proj_end", "allowed")}


def _capture(fn: Callable):
    """(graph, fn's outputs in the graph's memory): one eager warm-up run on a side stream
    (compiles the kernels, settles the allocator), then the capture. Nothing is computed
    by the capture itself: the caller replays."""
    main = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    side.wait_stream(main)
    with torch.cuda.stream(side):
        fn()
    main.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        out = fn()
    return graph, out


class _Pool:
    """Instances by key, at most `limit` in all; an evicted instance is dropped (its
    graphs and their memory are freed with it). Thread-safe."""

    def __init__(self, limit: int):
        self.limit = limit
        self.lock = threading.RLock()  # a finalizer may release during make()
        self.by_key: OrderedDict[tuple, list] = OrderedDict()

    def acquire(self, key, make: Callable):
        """An idle instance of `key` (made with make() if there is none and room can be
        made), now held; None when every instance is held and none can be evicted."""
        with self.lock:
            insts = self.by_key.setdefault(key, [])
            self.by_key.move_to_end(key)
            for inst in insts:
                if not inst.held:
                    inst.held = True
                    return inst
            if sum(len(v) for v in self.by_key.values()) >= self.limit and not self._evict():
                return None
            inst = make()
            inst.held = True
            insts.append(inst)
            return inst

    def _evict(self) -> bool:
        for key, insts in self.by_key.items():  # least recently used key first
            for i, inst in enumerate(insts):
                if not inst.held:
                    del insts[i]
                    if not insts:
                        del self.by_key[key]
                    return True
        return False

    def release(self, inst):
        with self.lock:
            inst.held = False

    def clear(self):
        with self.lock:
            self.by_key.clear()

    def __len__(self):
        with self.lock:
            return sum(len(v) for v in self.by_key.values())


POOL = _Pool(MAX_INSTANCES)


class _Seen:
    """Keys called before (the last `limit`): a graph is captured only for a key's second
    call, so shapes met once (the last, shorter batch of a genome, contigs of many lengths)
    never pay a capture."""

    def __init__(self, limit: int):
        self.limit = limit
        self.lock = threading.Lock()
        self.keys: OrderedDict[tuple, None] = OrderedDict()

    def again(self, key) -> bool:
        """Whether key was seen before (and remember it now)."""
        with self.lock:
            if key in self.keys:
                self.keys.move_to_end(key)
                return True
            self.keys[key] = None
            if len(self.keys) > self.limit:
                self.keys.popitem(last=False)
            return False


SEEN = _Seen(256)


class Saved:
    """What a graphed forward returns as `saved`: its instance, held until this object is
    released (then another forward may replay over the instance's buffers)."""

    __slots__ = ("__weakref__", "inst")

    def __init__(self, inst: _Instance):
        self.inst = inst
        weakref.finalize(self, POOL.release, inst)


def _replayed(key: tuple, x: CRFInputs, run: Callable) -> _Instance | None:
    """A held instance of key whose graph of run(static inputs) has just been replayed on
    x, or None (the key's first call, or no instance to be had): run x eagerly then."""
    if not SEEN.again(key):
        return None

    def make():
        inst = _Instance(x)
        inst.load(x)  # the warm-up run reads them (lengths bound its memory accesses)
        inst.graph, inst.out = _capture(lambda: run(inst.x))
        return inst

    inst = POOL.acquire(key, make)
    if inst is not None:
        inst.load(x)
        inst.graph.replay()
    return inst


def forward(x: CRFInputs, keep: bool, eager: Callable, settings: tuple):
    inst = _replayed(("forward", signature(x), keep, settings), x, lambda y: eager(y, keep))
    if inst is None:
        return eager(x, keep)
    return inst.out[0].clone(), Saved(inst)


def backward(saved: Saved, grad_log_z: torch.Tensor, wanted, eager: Callable,
             settings: tuple) -> dict:
    """The gradients from the forward state in saved's instance (whose static inputs still
    hold that forward's inputs: the instance is held while `saved` is alive)."""
    inst = saved.inst
    key = (None if wanted is None else tuple(sorted(wanted)), settings)
    if key not in inst.backward:
        g = torch.empty_like(grad_log_z, memory_format=torch.contiguous_format)
        g.copy_(grad_log_z)
        graph, out = _capture(lambda: eager(inst.x, inst.out[1], g, wanted))
        inst.backward[key] = (graph, g, out)
    graph, g, out = inst.backward[key]
    g.copy_(grad_log_z)
    graph.replay()
    return dict(zip(out, _copies(list(out.values())), strict=True))  # the eager path's keys


def viterbi(x: CRFInputs, eager: Callable, settings: tuple):
    inst = _replayed(("viterbi", signature(x), settings), x, eager)
    if inst is None:
        return eager(x)
    try:
        return tuple(_copies(inst.out))
    finally:
        POOL.release(inst)
