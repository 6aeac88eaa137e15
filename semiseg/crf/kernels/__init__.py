"""Triton backend of semiseg.crf (the contract: dispatch.py's docstring and SPEC.md).

Static (C, C) transitions (chain.py's docstring has the schedule and the math):
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
tiles (tiled.py; _ring_tile), bitwise the same results; from CHAIN_TILE_FROM /
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
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import torch
from torch import Tensor

from ..inputs import CRFInputs, param_grads_wanted
from . import chain, graphs, split_end, tiled

MAX_RING = 32768  # KP * CP ring elements per program (the duration-dependent family,
# whose register rings were never measured beyond it)
MAX_RING_TILED = 131072  # the same for static and periodic transitions: K = 8192 at
# C <= 16 (their rings in memory, in tiles: _chain_opts, _bwd_tile, _ring_tile)


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _shape(x: CRFInputs):
    return _padded(x.T, x.K, x.C)


def _padded(T: int, K: int, C: int) -> tuple[int, int]:
    """(KP, CP): the ring's slots min(K, T) and the labels C, each padded to a power of
    two (at least 2)."""
    return max(2, _pow2(min(K, T))), max(2, _pow2(C))


def supports(x: CRFInputs) -> str | None:
    """None if dispatch's "auto" should run these kernels on x, else the reason not."""
    return _scope(x)


def _scope(x: CRFInputs) -> str | None:
    """None if these kernels can compute x at all, else the reason they cannot."""
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


LEAVE_OUT = 0  # timing experiments only (chain._fwd_kernel's docstring); 0 = exact
WARPS: int | None = None  # fixed warps per program (benchmarks set it); None = by shape


def _warps(KP: int, CP: int) -> int:
    """Warps of the chains and the backward: by the ring (KP x CP) and the transition step
    (CP x CP). 4 where both are small (KP x CP <= 2,048, CP <= 64): at (32, 300, 30, 39)
    4 warps against 8 ran forward+backward 1.46 -> 1.33 ms of GPU time and the public API
    1.82-1.98 -> 1.61-1.63 ms wall (H200; RESULTS.md, "The small call at 4 warps"),
    as graph_probe.py had measured on an H100 (1.566 -> 1.399 ms)."""
    if WARPS is not None:
        return WARPS
    if KP * CP <= 2048 and CP <= 64:
        return 4
    n = max(KP * CP, 2 * CP * CP)
    if n <= 2048:
        return 4
    if n <= 8192:
        return 8
    return 16


def _wave_warps(KP: int, CP: int, kernel: str, params: bool = True, sparse: bool = False) -> int:
    """Warps of the periodic backward's wave kernels (`kernel`: "recompute", the
    end-indexed chain's MODE 1, or "bwd", _bwd_kernel END; `params`: whether it forms
    the duration-bias and transition sums). At the 1-bp gene model's shape (KP x CP =
    256 x 64) 32 warps ran the full backward 1.5x faster than _warps' 16 on an H100,
    while the chains of the forward and its second halves ran 0.86x
    (benchmarks/KERNELS_NOTES.md, "Warps per kernel"); at CP <= 32 the same change was
    0.3-0.8x, so it applies from CP = 64 only. Without the parameter sums (posteriors)
    _bwd_kernel ran fastest at 8 warps there (posterior pass at 132 x 14,675: 0.76 s
    against 0.93 s at 32 and 1.57 s at 16), while the full backward at 8 ran 2.9x slower
    than at 32 (KERNELS_NOTES.md, session 12). With sparse transition tables (`sparse`)
    _bwd_kernel runs at 8 warps with the parameter sums too: at the gene shape (132 x
    20000) forward+backward took 1017 ms so against 2711 at 32 warps and 1307 at 16
    (its 32-warp build spilled 320 bytes; RESULTS.md, "Sparse periodic transition
    tables")."""
    if WARPS is not None:
        return WARPS
    if sparse and kernel == "bwd":
        return 8
    if CP >= 64 and KP * CP >= 16384:
        return 8 if kernel == "bwd" and not params else 32
    return _warps(KP, CP)


BIG_VITERBI = 32768  # KP x CP from which the static Viterbi runs at 32 warps
# (_viterbi_warps; its chains are tiled there and take _chain_opts' warps, so this is its
# join's): register kernels at K = 2000 took 156 ms at 32 warps against 325 at 16 and 512
# at 8, 472 / 943 / 1488 at K = 4000 (benchmarks/big_ring_probe.py)


def _viterbi_warps(KP: int, CP: int) -> int:
    """Warps of the static Viterbi (both chains and the join): _warps' rule, at most 8,
    and 32 from BIG_VITERBI (where the chains are tiled and take _chain_opts' warps). On
    an H100 8 warps ran it 1.20x, 1.22x and 1.36x faster than 16 at (16, 20000, 1000,
    16), (16, 20000, 512, 32) and (64, 20000, 256, 37), with the same labels; 4 ran 8-16x
    slower (RESULTS.md, "Warps of the periodic reversed chain")."""
    if WARPS is not None:
        return WARPS
    return 32 if KP * CP >= BIG_VITERBI else min(_warps(KP, CP), 8)


def _viterbi_per_warps(KP: int, CP: int) -> int:
    """Warps of the periodic Viterbi chains: 32 from KP = 512 at KP x CP >= 16384, where
    it measured 1.6-1.7x faster than 16 (KP = 512 and 1024 at CP = 32 and 16), but not at
    KP = 256, CP = 64 (0.5x)."""
    if WARPS is not None:
        return WARPS
    return 32 if KP >= 512 and KP * CP >= 16384 else _warps(KP, CP)


DB_GLOBAL_FROM = 16384  # KP x CP from which _bwd_kernel keeps its duration-bias sum in
# g_db (DB_GLOBAL) instead of registers, at CP <= 32; benchmarks set it


def _db_global(KP: int, CP: int, params: bool) -> bool:
    """Whether _bwd_kernel sums the duration-bias gradient in global memory (DB_GLOBAL):
    for long rings (KP x CP >= DB_GLOBAL_FROM at CP <= 32), where a second register array
    of the ring's size made the backward spill. On an H100 (benchmarks/db_global_probe.py)
    forward+backward ran 4.9x faster at (16, 20000, 2000, 13), 1.76x at (4, 20000, 1000,
    24), 1.43x at (16, 20000, 1000, 16) and 1.23x there with periodic transitions, equal
    at 128 x 32, but 0.85x at the gene model's 256 x 64 (its backward at 32 warps holds
    the sum without spilling), hence CP <= 32."""
    return params and KP * CP >= DB_GLOBAL_FROM and CP <= 32


BWD_TILE_FROM = 32768  # KP x CP from which the static backward walks its ring in tiles
BWD_TILE_ELEMS = 8192  # ring elements (slots x CP) per tile there; benchmarks set both
BWD_TILE_WARPS: int | None = None  # warps of the tiled backward; None = 16


def _tile_slots(KP: int, CP: int, frm: int, elems: int) -> int:
    """Slots per tile of a ring walked in memory (elems ring elements per tile), from
    KP x CP = frm; 0 below it (the ring in registers)."""
    return max(1, min(KP, elems // CP)) if KP * CP >= frm else 0


def _work(tile: int, programs: int, KP: int, CP: int, dummy: Tensor) -> Tensor:
    """The (KP, CP) float32 rings in memory of `programs` tiled programs, or dummy."""
    if not tile:
        return dummy
    return torch.empty(programs * KP * CP, device=dummy.device, dtype=torch.float32)


def _bwd_tile(KP: int, CP: int) -> int:
    """Slots per tile of the static backward's ring in memory (chain._bwd_kernel TILE),
    or 0 for the ring in registers: from KP x CP = BWD_TILE_FROM, where the whole-ring
    step spilled. On an H100 (benchmarks/bwd_tiles_probe.py; RESULTS.md, "The static
    backward's ring in tiles") forward+backward at (16, 20000, K, 13) went 835 -> 333 ms
    at K = 2000 and 3812 -> 1170 ms at K = 4000, and K = 8192 runs (3.8 s); at 1000 x 16
    the tiles lost (100 -> 113 ms). Tiles of 8192 elements at 16 warps were the best of
    2048 / 4096 / 8192 x 8 / 16 / 32 at K = 2000 (4-5% over 4096)."""
    return _tile_slots(KP, CP, BWD_TILE_FROM, BWD_TILE_ELEMS)


CHAIN_TILE_FROM = 32768  # KP x CP from which the static chains (_fwd_kernel: forward,
# reversed, recompute, Viterbi halves) keep their ring in memory, walked in tiles
CHAIN_TILE_ELEMS = 16384  # ring elements per tile there
CHAIN_TILE_WARPS: int | None = None  # their warps; None = 16. Benchmarks set these


def _bwd_opts(KP: int, CP: int, nw: int, params: bool, programs: int, dummy: Tensor) -> dict:
    """Launch options of _bwd_kernel (static or periodic): TILE (_bwd_tile) with each of
    `programs` segments' ring in `work` and BWD_TILE_WARPS, else the caller's warps nw; the
    duration-bias sum in g_db where tiled or _db_global asks for it."""
    tile = _bwd_tile(KP, CP)
    return {"TILE": tile, "work": _work(tile, programs, KP, CP, dummy), "PARAM_GRADS": params,
            "DB_GLOBAL": params and (tile > 0 or _db_global(KP, CP, params)),
            "num_warps": (BWD_TILE_WARPS or 16) if tile else nw}


def _chain_opts(KP: int, CP: int, nw: int) -> dict:
    """Launch options (TILE, num_warps) of a static _fwd_kernel chain or the join: tiled
    from KP x CP = CHAIN_TILE_FROM (chain._fwd_kernel's docstring;
    benchmarks/KERNELS_NOTES.md, session 16), else the caller's warps nw."""
    tile = _tile_slots(KP, CP, CHAIN_TILE_FROM, CHAIN_TILE_ELEMS)
    return {"TILE": tile, "num_warps": (CHAIN_TILE_WARPS or 16) if tile else nw}


CHAIN_SPLIT: int | None = None  # programs per static tiled chain; None = _split_opts' rule
SPLIT_MIN_ELEMS = 1024  # ring elements per program below which a chain is not split further
SPLIT_REG_ELEMS = 16384  # ring elements per program up to which a split chain keeps its
# part in registers (else in tiles in memory); benchmarks set it. 16,384 since one backward
# program per SM at 16 warps (_programs_per_sm) took K = 8192 to 822 ms: K = 4000 then
# 400.8 -> 377.4 ms, the same bits (RESULTS.md, "The small call met")


def _split_opts(B: int, KP: int, CP: int, kw: dict, dummy: Tensor) -> dict:
    """Launch options of a static forward / reversed chain (chain._fwd_kernel MODE 0) split
    over SPLIT programs per sequence: on a GPU, for tiled chains only, the largest power of
    two G with 2 B G <= SMs (both directions' launches run side by side and every program
    of a split chain must be resident at once: it waits for the others every step) and at
    least SPLIT_MIN_ELEMS ring elements per program (CHAIN_SPLIT forces G, within the
    SMs). Each program holds KP / G slots: in registers up to SPLIT_REG_ELEMS ring
    elements (TILE 0), else in memory, walked in tiles of at most that; at 4 warps up to
    2,048 ring elements, 8 up to 4,096, else 16 (CHAIN_TILE_WARPS forces them). On an
    H100 at B = 1, T = 1e6, K = 1000, C = 24 fwd+bwd went 8.71 s -> 3.76 s by this rule
    with the parts in memory (G = 32, 4 warps; benchmarks/split_chains.py; RESULTS.md,
    "Static chains split over programs") and 3.74 -> 3.27 s with them in registers; at
    (16, 20000, 2000, 13) (G = 4, 8,192 elements each) 227.7 -> 198.3 ms, and at K =
    4000 (16,384 elements each) 400.8 -> 377.4 ms (benchmarks/k_doubling.py; RESULTS.md,
    "The K-doubling row met", "The small call met"); at 32,768 (K = 8192) registers
    spilled (821 -> 1791 ms). Returns kw
    with TILE, SPLIT, xch (the parts' exchange), bar (the counters, zero) and
    num_warps."""
    dev = dummy.device
    G = 1
    if kw["TILE"] and dev.type == "cuda":
        room = _sm_count(dev) // (2 * B)
        if CHAIN_SPLIT is not None:
            G = CHAIN_SPLIT
        else:
            while 2 * G <= room and KP * CP // (2 * G) >= SPLIT_MIN_ELEMS:
                G *= 2
        G = max(1, min(G, room, KP))
    if G == 1:
        return kw
    per = KP * CP // G
    nw = CHAIN_TILE_WARPS or (4 if per <= 2048 else 8 if per <= 4096 else 16)
    tile = 0 if per <= SPLIT_REG_ELEMS else min(kw["TILE"], KP // G)
    return dict(kw, TILE=tile, SPLIT=G, num_warps=nw, **_exchange_buffers(B, 4 * G * CP, dev))


def _exchange_buffers(B: int, floats: int, dev, tagged: bool = False) -> dict:
    """A split chain's exchange: `xch`, `floats` float32 per sequence (chain._exchange:
    two step halves of the programs' parts), and `bar`, one int32 step counter per
    sequence, zero at launch (chain._arrive_wait). tagged (chain._exchange TAG): xch as
    int64 words, zero at launch (each a part and its step's tag)."""
    if tagged:
        return {"xch": torch.zeros(B * floats, device=dev, dtype=torch.int64),
                "bar": torch.zeros(1, device=dev, dtype=torch.int32)}
    return {"xch": torch.empty(B * floats, device=dev, dtype=torch.float32),
            "bar": torch.zeros(B, device=dev, dtype=torch.int32)}


JOIN_PARTS_FROM = 32768  # KP x CP from which the static join's crossing sum runs in
# parallel tiles (_join_parts; 0 = always); benchmarks set it
JOIN_TILE_ELEMS = 2048  # ring elements per tile there


def _join_parts(B: int, KP: int, CP: int, dummy: Tensor) -> tuple[int, int, Tensor | None]:
    """The static join's crossing sum split into tiles of JOIN_TILE_ELEMS ring elements,
    one program each (chain._cross_part_kernel), for rings from JOIN_PARTS_FROM: (tiles
    NT, slots per tile, the (B, NT, CP) parts buffer); (0, 0, None) below it (the join
    sums them itself, as before).
    The join is one program per sequence after both chains, so its O(K^2 C) sum is wall
    time: on an H100 at (16, 20000, 8192, 13) fwd+bwd 982.8 -> 910.8 ms, at K = 4000
    454.3 -> 432.5 ms (RESULTS.md, "The K-doubling row met")."""
    if KP * CP < JOIN_PARTS_FROM:
        return 0, 0, None
    tile = max(1, min(KP, JOIN_TILE_ELEMS // CP))
    nt = KP // tile
    return nt, tile, torch.empty(B * nt * CP, device=dummy.device, dtype=torch.float32)


MIN_SEGMENT = 32  # shortest checkpoint segment the GPU schedule picks (each pays a join)
PROGRAMS_PER_SM: int | None = None  # backward segment programs the GPU schedule aims
# for, per SM; None = _programs_per_sm's rule (benchmarks set it)


def _programs_per_sm(KP: int, CP: int) -> int:
    """Backward segment programs per SM that _segment_length aims for: 1 where the static
    backward runs 16 warps (tiled, or by _warps: a ring or a transition step of more
    than 8,192 elements), whose programs take an SM's registers each, else 2 (at 4 warps
    the small-shape backward compiles to ~255 registers a thread: two programs an SM).
    On an H100 (RESULTS.md, "The small call met") 1 against 2 at 16 warps ran (16,
    20000, K, 13) fwd+bwd 96.6 / 184.0 / 419.1 / 908.9 -> 94.0 / 183.1 / 401.9 / 820.3
    ms for K = 1000 / 2000 / 4000 / 8192; at 8 warps it gained 3% static but lost 2%
    periodic at (8, 20000, 100, 24), so stays 2."""
    if PROGRAMS_PER_SM is not None:
        return PROGRAMS_PER_SM
    warps = 16 if _bwd_tile(KP, CP) else _warps(KP, CP)
    return 1 if warps >= 16 else 2


@functools.cache
def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _segment_length(T: int, K: int, B: int = 1, device=None, C: int = 1) -> int:
    """Checkpoint spacing P. ~sqrt(T K) balances checkpoints ((T/P) K C) against one
    segment's rows (P C). On a GPU the backward runs every segment of every sequence at
    once (its depth is ~2P steps plus a join of ~K), so P shrinks until there are at
    most _programs_per_sm x SMs programs (B x ceil(T/P)), but not below MIN_SEGMENT
    positions. At most, not about: with the segments per sequence rounded up,
    (32, 300, 30, 39) had 32 x 9 = 288 backward programs for the 264 an H100 holds at
    once, and the last 24 ran as a second wave (RESULTS.md, "The small call met")."""
    P = math.ceil(math.sqrt(T * min(K, T)))
    if device is not None and device.type == "cuda":
        per_seq = max(1, _programs_per_sm(*_padded(T, K, C)) * _sm_count(device) // B)
        P = min(P, max(MIN_SEGMENT, math.ceil(T / per_seq)))
    return max(1, min(T, P))


def _common(x: CRFInputs):
    dev = x.scores.device
    f32 = {"device": dev, "dtype": torch.float32}
    dummy = torch.empty(1, **f32)  # stands for absent inputs and unused outputs
    scores = x.scores.contiguous()
    allowed = x.allowed.contiguous().view(torch.uint8) if x.allowed is not None else dummy
    ps = x.proj_start.contiguous() if x.proj_start is not None else dummy
    pe = x.proj_end.contiguous() if x.proj_end is not None else dummy
    start = x.start.contiguous() if x.start is not None else torch.zeros(x.C, **f32)
    end = x.end.contiguous() if x.end is not None else torch.zeros(x.C, **f32)
    flags = {"HAS_ALLOWED": x.allowed is not None, "HAS_PS": x.proj_start is not None,
             "HAS_PE": x.proj_end is not None}
    return scores, allowed, ps, pe, start, end, flags, dummy


FOLD_MASK = True  # Viterbi: `allowed` folded into the scores on the host (benchmarks set it)


def _folded(x: CRFInputs, scores, flags):
    """The Viterbi kernels' scores and flags with `allowed` folded into the scores (-inf
    where a label is not allowed: the very values chain._emission makes of them), so the
    kernels compile without HAS_ALLOWED. Measured on an H100 (triton 3.6) at the gene
    model's shape, (100, 20000, 256, 37) periodic: the Viterbi chains took 1065 ms with
    HAS_ALLOWED and 413 ms without it, an all-True mask as slow as the real one (RESULTS.md,
    "Viterbi with a sequence mask"); the forward chains did not change (288 / 280 ms)."""
    if not flags["HAS_ALLOWED"] or not FOLD_MASK:
        return scores, flags
    return scores.masked_fill(~x.allowed, float("-inf")), dict(flags, HAS_ALLOWED=False)


GAMMA_ROWS: bool | None = None  # force the forward's gamma variant (tests); None = by shape


def _gamma_rows(CP: int) -> bool:
    """Which forward gamma variant (chain._fwd_kernel's docstring). Measured on an H200:
    reducing over the columns of the padded transpose is faster at C = 24 and C = 6
    (1.91 vs 2.39 and 2.17 vs 2.64 us per step), over the rows faster at C = 39 (3.08 vs
    3.72 us per step, padded to 64)."""
    return CP >= 64 if GAMMA_ROWS is None else GAMMA_ROWS


def _fwd_transition(tr: Tensor, CP: int) -> Tensor:
    """The forward kernel's transition operand: as given, or the -inf padded transpose."""
    if _gamma_rows(CP):
        return tr.contiguous()
    C = tr.shape[0]
    out = torch.full((CP, CP), float("-inf"), device=tr.device, dtype=torch.float32)
    out[:C, :C] = tr.t()
    return out


def _log_z(fin_alp: Tensor, fin_n: Tensor, end: Tensor, C: int) -> Tensor:
    """float64 log Z = N + logsumexp_c(alpha_rel[L, c] + end[c])."""
    return fin_n + torch.logsumexp(fin_alp[:, :C].double() + end.double(), dim=1)


def _grad_weights(saved, grad_log_z: Tensor):
    """grad_log_z in float64 and float32, zero where log Z is -inf (no gradient there)."""
    g = grad_log_z.to(torch.float64)
    g = torch.where(torch.isfinite(saved["log_z64"]), g, torch.zeros_like(g))
    return g, g.to(torch.float32).contiguous()


def _backward_buffers(x: CRFInputs, KP: int, CP: int, tr_shape: tuple):
    """The reversed chain's state (ring, gamma, normaliser, max) and the zeroed gradient
    accumulators: scores, proj_start, proj_end (float32, B x T x C), per-sequence duration
    bias (B, KP, CP) and transition (B, *tr_shape) partial sums in float64."""
    B, T, C, dev = x.batch, x.T, x.C, x.scores.device
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    state = (torch.empty(B, KP, CP, **f32), torch.empty(B, CP, **f32),
             torch.empty(B, **f64), torch.empty(B, **f32))
    grads = (torch.zeros(B, T, C, **f32), torch.zeros(B, T, C, **f32),
             torch.zeros(B, T, C, **f32), torch.zeros(B, KP, CP, **f64),
             torch.zeros(B, *tr_shape, **f64))
    return state, grads


def _gradients(x: CRFInputs, g_scores, g_ps, g_pe, g_db, transition) -> dict:
    """The backend contract's gradient dict from the (already weighted) scores and
    projection gradients, the weighted float64 sums g_db (KP, CP, duration order) and
    transition (both None when they were not asked for: left out); start/end gradients
    are the boundary posteriors at the first / last position, summed over the batch."""
    dt = x.scores.dtype
    last = (x.lengths - 1).clamp(min=0)[:, None, None].expand(-1, 1, x.C)
    out = {
        "scores": g_scores,
        "proj_start": g_ps,
        "proj_end": g_pe,
        "start": g_ps[:, 0, :].sum(0, dtype=torch.float64).to(dt),
        "end": g_pe.gather(1, last).sum((0, 1), dtype=torch.float64).to(dt),
    }
    if g_db is not None:
        out["duration_bias"] = _duration_grad(g_db, x.K, x.C, dt)
        out["transition"] = transition.to(dt)
    return out


class _Overlap:
    """Run recompute(k) then reverse(k) for k = nseg-1..0, recompute(k-1) beside reverse(k).

    On CUDA, recomputes go to a side stream: recompute(k-1) waits only for reverse(k+1)
    (which last read its row buffer, k-1 and k+1 sharing one), and reverse(k) waits for
    recompute(k). The arithmetic and its order are the same as running them in turn.
    """

    _streams: ClassVar[dict] = {}  # one side stream per device, reused

    def __init__(self, device, nseg):
        self.cuda = device.type == "cuda" and nseg > 1
        self.nseg = nseg
        if self.cuda:
            key = (device.index if device.index is not None else torch.cuda.current_device())
            if key not in self._streams:
                self._streams[key] = torch.cuda.Stream(device=device)
            self.side = self._streams[key]
            self.main = torch.cuda.current_stream(device)

    def run(self, recompute, reverse):
        n = self.nseg
        if not self.cuda:
            for k in range(n - 1, -1, -1):
                recompute(k)
                reverse(k)
            return
        ev_rec = [torch.cuda.Event() for _ in range(n)]
        ev_rev = [torch.cuda.Event() for _ in range(n)]
        self.side.wait_stream(self.main)  # inputs, checkpoints and zeroed gradients
        with torch.cuda.stream(self.side):
            recompute(n - 1)
            ev_rec[n - 1].record(self.side)
        for k in range(n - 1, -1, -1):
            if k >= 1:
                with torch.cuda.stream(self.side):
                    if k + 1 < n:
                        self.side.wait_event(ev_rev[k + 1])
                    recompute(k - 1)
                    ev_rec[k - 1].record(self.side)
            self.main.wait_event(ev_rec[k])
            reverse(k)
            ev_rev[k].record(self.main)


def _duration_grad(g_db: Tensor, K: int, C: int, dt) -> Tensor:
    """The (K, C) gradient from the weighted float64 sum (KP, CP) in duration order;
    durations beyond the ring (> T) get 0."""
    n = min(K, g_db.shape[0])
    out = torch.zeros(K, C, device=g_db.device, dtype=torch.float64)
    out[:n] = g_db[:n, :C]
    return out.to(dt)


def _db_table(x: CRFInputs, KP: int, CP: int, rows: int | None = None) -> Tensor:
    """duration_bias as the static and periodic kernels read it: (rows, CP) float32 (rows
    KP by default), row d - 1 for duration d, -inf beyond min(K, KP) durations and C
    labels. A ring slot's duration is 1..KP (1..2 KP for the periodic reversed chain's
    residue planes: the periodic family asks for 2 KP rows), so its row is read whole,
    unmasked, at a CP-aligned address (the loads vectorise; (K, C) rows of C floats with a
    mask per label did not). The same values where the kernels read them, so the same
    results, bitwise."""
    out = torch.full((rows or KP, CP), float("-inf"), device=x.scores.device,
                     dtype=torch.float32)
    n = min(x.K, KP)
    out[:n, :x.C] = x.duration_bias[:n]
    return out


def _sides(x: CRFInputs, KP: int, CP: int, scores, allowed, ps, pe, start, end, flags):
    """Kernel arguments of the two directions: (inputs..., flags) forward and reversed.

    The reversed chain reads the same scores and mask, the transposed transition, proj_end
    where the forward reads proj_start (and the reverse), and starts from `end`."""
    db = _db_table(x, KP, CP)
    fwd = (scores, allowed, ps, pe, _fwd_transition(x.transition, CP), db, start)
    rev = (scores, allowed, pe, ps, _fwd_transition(x.transition.t(), CP), db, end)
    rflags = dict(flags, HAS_PS=flags["HAS_PE"], HAS_PE=flags["HAS_PS"])
    return (fwd, flags), (rev, rflags)


def _chain_state(B: int, n: int, KP: int, CP: int, dev):
    """Ring, gamma, alpha (float32) and normaliser (float64) for B sequences x n slots."""
    return (torch.empty(B, n, KP, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, device=dev, dtype=torch.float64))


class _Both:
    """Launch independent kernels side by side: the first on the current stream, each
    other on a side stream of its own (on CUDA; one after the other elsewhere)."""

    _streams: ClassVar[dict] = {}  # side streams per device, reused

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.key = (device.index if device.index is not None
                        else torch.cuda.current_device())
            self.device = device
            self.main = torch.cuda.current_stream(device)

    def run(self, first, *others):
        if not self.cuda:
            first()
            for fn in others:
                fn()
            return
        sides = self._streams.setdefault(self.key, [])
        while len(sides) < len(others):
            sides.append(torch.cuda.Stream(device=self.device))
        for side, fn in zip(sides, others, strict=False):
            side.wait_stream(self.main)  # inputs and buffers are ready
            with torch.cuda.stream(side):
                fn()
        first()
        for side in sides[:len(others)]:
            self.main.wait_stream(side)


def _knobs() -> tuple:
    """The module settings a captured graph depends on (graphs.py)."""
    return (LEAVE_OUT, WARPS, MIN_SEGMENT, PROGRAMS_PER_SM, FOLD_MASK, GAMMA_ROWS,
            ROWS_BUDGET, FULL_ROWS, RING_TILE, TILE_WARPS, REV_WARPS, DB_GLOBAL_FROM,
            CHAIN_SPLIT, SPLIT_MIN_ELEMS, SPLIT_REG_ELEMS, JOIN_PARTS_FROM, JOIN_TILE_ELEMS,
            BWD_TILE_FROM, BWD_TILE_ELEMS, BWD_TILE_WARPS, END_TILE_ELEMS,
            BIG_VITERBI, CHAIN_TILE_FROM, CHAIN_TILE_ELEMS, CHAIN_TILE_WARPS, SPARSE_BELOW, SPARSE_FROM_CP,
            SPARSE_VITERBI, RES_PLANES_MAX_CP, REV_SPLIT, REV_SPLIT_WARPS, REV_PART_GAMMA,
            END_SPLIT, END_SPLIT_WARPS, PREFETCH, LAZY_ALPHA, REV_TAG, END_TAG)


def forward(x: CRFInputs, keep: bool = False):
    """log Z and the saved state (dispatch.py's contract); a small call replays a CUDA
    graph of `_forward` (graphs.py), bitwise the same."""
    _check(x)
    sp = _sparse_width(x)  # outside any capture: it reads the transition on the host
    if graphs.eligible(x, _shape(x)[1]):
        return graphs.forward(x, keep, functools.partial(_forward, sparse=sp),
                              _knobs() + (sp,))
    return _forward(x, keep, sp)


def backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """The gradients (dispatch.py's contract): by graph replay after a graphed forward."""
    _check(x)
    if isinstance(saved, graphs.Saved):
        return graphs.backward(saved, grad_log_z, wanted, _backward, _knobs())
    return _backward(x, saved, grad_log_z, wanted)


def viterbi(x: CRFInputs):
    """(score, labels, seg_start) (dispatch.py's contract); small calls by graph replay."""
    _check(x)
    sp = _sparse_width(x) if SPARSE_VITERBI else 0
    if graphs.eligible(x, _shape(x)[1]):
        return graphs.viterbi(x, functools.partial(_viterbi, sparse=sp), _knobs() + (sp,))
    return _viterbi(x, sp)


def _forward(x: CRFInputs, keep: bool = False, sparse: int = 0):
    """Both chains at once, each over half of every sequence, then log Z where they meet.
    keep (dispatch.py): a backward will follow; the periodic family then writes the
    forward rows of every position while its chains run, when they fit the rows budget,
    so that its backward recomputes none. sparse: _sparse_width(x) (periodic only)."""
    if x.duration_dependent:
        return _forward_dd(x)
    if x.periodic:
        return _forward_per(x, keep, sparse)
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P = _segment_length(T, K, B, dev, C)
    nck = math.ceil(T / P) + 1  # boundaries 0, P, ..., and T when P divides it
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    (fa, ff), (ra, rf) = _sides(x, KP, CP, scores, allowed, ps, pe, start, end, flags)
    ck = {"f": _chain_state(B, nck, KP, CP, dev), "r": _chain_state(B, nck, KP, CP, dev)}
    mid = {"f": _chain_state(B, 1, KP, CP, dev), "r": _chain_state(B, 1, KP, CP, dev)}
    nw = _warps(KP, CP)
    rows = _gamma_rows(CP)

    kw = _chain_opts(KP, CP, nw)

    def half(side, args, fl, rev):
        def go():
            sk = _split_opts(B, KP, CP, kw, dummy)
            chain._fwd_kernel[(B, sk.get("SPLIT", 1))](
                *args, x.lengths, *ck[side], *mid[side], dummy, dummy, dummy, dummy, dummy,
                dummy, dummy, _work(kw["TILE"], B, KP, CP, dummy), T, C, K, P, nck, 0,
                KP=KP, CP=CP, MODE=0, REV=rev, PHASE=0, GAMMA_ROWS=rows,
                LEAVE_OUT=LEAVE_OUT, **sk, **fl)
        return go

    _Both(dev).run(half("f", fa, ff, False), half("r", ra, rf, True))
    log_z64 = torch.empty(B, device=dev, dtype=torch.float64)
    (f_ring, _, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid["f"], mid["r"]
    nt, jtile, parts = _join_parts(B, KP, CP, dummy)
    if nt:
        chain._cross_part_kernel[(B, nt)](f_ring, r_ring, fa[5], x.lengths, parts, K, P,
                                          KP=KP, CP=CP, TILE=jtile, num_warps=4)
    chain._join_kernel[(B,)](f_ring, f_alp, f_n, r_ring, r_gam, r_n, fa[5], x.lengths,
                             log_z64, C, K, P, KP=KP, CP=CP, **kw, parts=parts, NT=nt)
    saved = {"ck": ck, "mid": mid, "log_z64": log_z64, "P": P, "nck": nck,
             "sides": ((fa, ff), (ra, rf))}
    if keep:  # a backward follows: its chains now, beside the caller's host work
        saved["second"] = _second_halves(x, saved)
    return log_z64.to(x.scores.dtype), saved


ROWS_BUDGET: int | None = None  # bytes of forward rows the backward may hold at once;
# None = by device (_rows_budget). Tests and benchmarks set it.
FULL_ROWS: bool | None = None  # False forces the wave path (benchmarks); None = by budget


def _rows_budget(device) -> int:
    """ROWS_BUDGET, or by device: 1/16 of a GPU's memory within [256 MB, 4 GB] (256 MB
    elsewhere). More rows per wave means fewer, fuller waves: at the gene model's
    posterior shape (66 x 20000, K 256, 37 labels, P = 3) 4 GB ran 1.32 the speed of
    256 MB on an H100 (RESULTS.md, "Annotation on one H100: decoding windows ...")."""
    if ROWS_BUDGET is not None:
        return ROWS_BUDGET
    if device.type != "cuda":
        return 256 << 20
    total = torch.cuda.get_device_properties(device).total_memory
    return min(4 << 30, max(256 << 20, total // 16))


def _rows_fit(x: CRFInputs, row_bytes: int) -> bool:
    """Whether the forward rows of every position of every sequence fit the rows budget
    (FULL_ROWS False: never)."""
    return (x.batch * x.T * row_bytes <= _rows_budget(x.scores.device)
            and FULL_ROWS is not False)


def _wave_width(x: CRFInputs, P: int, nseg: int, row_bytes: int) -> int:
    """Checkpoint segments per wave whose recomputed rows fit the rows budget (>= 1)."""
    return max(1, min(nseg, _rows_budget(x.scores.device) // (x.batch * P * row_bytes)))


def _second_halves(x: CRFInputs, saved) -> dict:
    """Both static chains over their other halves, from the forward's state at M (every
    checkpoint, the final alpha and N of each direction; with the rows of every position
    when they fit ROWS_BUDGET, else the wave buffers): the backward's first part, which
    needs nothing of grad_log_z. _forward runs it when a backward will follow (keep), so
    that these kernels run while the host does the caller's work between the two calls
    (at small shapes the host's time, not the GPU's, set the wall clock); the same
    kernels on the same state, so the same bits as when _backward runs it."""
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P, nck, ck, mid = saved["P"], saved["nck"], saved["ck"], saved["mid"]
    nseg = math.ceil(T / P)
    (fa, ff), (ra, rf) = saved["sides"]
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    dummy = torch.empty(1, **f32)
    row_bytes = 2 * CP * 4 + 8  # gamma, alpha (CP float32), N (float64)
    full = _rows_fit(x, row_bytes)
    if full:
        rows = (torch.empty(B, T, CP, **f32), torch.empty(B, T, CP, **f32),
                torch.empty(B, T, **f64))
    else:
        W = _wave_width(x, P, nseg, row_bytes)
        rows = (torch.empty(B, W, P, CP, **f32), torch.empty(B, W, P, CP, **f32),
                torch.empty(B, W, P, **f64))
    fin = {"f": (torch.empty(B, CP, **f32), torch.empty(B, **f64)),
           "r": (torch.empty(B, CP, **f32), torch.empty(B, **f64))}
    nw = _warps(KP, CP)
    gr = _gamma_rows(CP)
    kw = _chain_opts(KP, CP, nw)

    def other_half(side, args, fl, rev):
        def go():
            sk = _split_opts(B, KP, CP, kw, dummy)
            chain._fwd_kernel[(B, sk.get("SPLIT", 1))](
                *args, x.lengths, *ck[side], *mid[side], *(rows if full else (dummy,) * 3),
                dummy, dummy, *fin[side], _work(kw["TILE"], B, KP, CP, dummy),
                T, C, K, P, nck, 0,
                KP=KP, CP=CP, MODE=0, REV=rev, PHASE=1, GAMMA_ROWS=gr, WRITE_ROWS=full,
                **sk, **fl)
        return go

    _Both(dev).run(other_half("f", fa, ff, False), other_half("r", ra, rf, True))
    return {"full": full, "rows": rows, "fin": fin}


def _backward(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    """The other half of both chains (every checkpoint; _second_halves, which the forward
    has run already when it was told a backward follows), then every checkpoint segment of
    every sequence at once. `wanted` (dispatch.py): without duration_bias and transition
    in it, their sums are skipped (chain._bwd_kernel's PARAM_GRADS).

    When the rows of every position fit ROWS_BUDGET, the chains write them on their second
    halves and each segment runs the chain that starts from the far side of the middle:
    the reversed one (reading forward rows) right of M, the forward one (reading reversed
    rows) left of M. Otherwise segments go in waves that fit the budget, each recomputing
    its forward rows before the reversed chain runs over it."""
    if x.duration_dependent:
        return _backward_dd(x, saved, grad_log_z)
    if x.periodic:
        return _backward_per(x, saved, grad_log_z, wanted)
    params = param_grads_wanted(wanted)
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P, nck, ck = saved["P"], saved["nck"], saved["ck"]
    nseg = math.ceil(T / P)
    (fa, ff), (ra, rf) = saved["sides"]
    scores, allowed, ps, pe, db, start, end = fa[0], fa[1], fa[2], fa[3], fa[5], fa[6], ra[6]
    f32 = {"device": dev, "dtype": torch.float32}
    dummy = torch.empty(1, **f32)
    second = saved.get("second") or _second_halves(x, saved)
    full, rows, fin = second["full"], second["rows"], second["fin"]
    if not full:
        W = rows[0].shape[1]
    nw = _warps(KP, CP)
    gr = _gamma_rows(CP)
    kw = _chain_opts(KP, CP, nw)
    # grad_log_z, zero where log Z is -inf (no gradient there)
    g32 = torch.where(saved["log_z64"] > float("-inf"), grad_log_z, 0.0).float()
    g_scores, g_ps, g_pe = torch.zeros(3, B, T, C, **f32).unbind(0)
    n_db, n_tr = (B * nck * KP * CP, B * nck * CP * CP) if params else (1, 1)
    parts = torch.zeros(n_db + n_tr, **f32)  # per-segment weighted partial sums
    g_db, g_tr = parts[:n_db], parts[n_db:]
    trans = x.transition.contiguous()
    lz = saved["log_z64"]
    bw = _bwd_opts(KP, CP, nw, params, B * nck, dummy)

    def right(k0, w):
        def go():
            chain._bwd_kernel[(B, w)](
                scores, allowed, ps, pe, trans, db, end, x.lengths, g32,
                ck["f"][0], ck["f"][2], ck["f"][3], ck["r"][0], ck["r"][1], ck["r"][3],
                *rows, *fin["f"], lz, g_scores, g_ps, g_pe, g_db, g_tr,
                T=T, C=C, K=K, P=P, NCK=nck, seg0=k0, KP=KP, CP=CP, ROWS_FULL=full, **bw,
                **ff)
        return go

    if full:
        def left():
            chain._bwd_kernel[(B, nseg)](
                scores, allowed, pe, ps, trans.t().contiguous(), db, start, x.lengths, g32,
                ck["r"][0], ck["r"][2], ck["r"][3], ck["f"][0], ck["f"][1], ck["f"][3],
                *rows, *fin["r"], lz, g_scores, g_pe, g_ps, g_db, g_tr,
                T=T, C=C, K=K, P=P, NCK=nck, seg0=0, KP=KP, CP=CP, REV=True, ROWS_FULL=True,
                **bw, **rf)

        _Both(dev).run(right(0, nseg), left)
    else:
        rwork = _work(kw["TILE"], B * W, KP, CP, dummy)  # the recompute's rings, every wave
        for k0 in range(0, nseg, W):
            w = min(W, nseg - k0)
            chain._fwd_kernel[(B, w)](
                *fa, x.lengths, *ck["f"], dummy, dummy, dummy, dummy, *rows, dummy, dummy,
                dummy, dummy, rwork, T, C, K, P, nck, k0,
                KP=KP, CP=CP, MODE=1, GAMMA_ROWS=gr, **kw, **ff)
            right(k0, w)()
    if not params:
        return _gradients(x, g_scores, g_ps, g_pe, None, None)
    transition = g_tr.view(-1, CP, CP).sum(0, dtype=torch.float64)[:C, :C]
    return _gradients(x, g_scores, g_ps, g_pe, g_db.view(-1, KP, CP).sum(0, dtype=torch.float64),
                      transition)


def _viterbi(x: CRFInputs, sparse: int = 0):
    """Both Viterbi halves at once, then the best path across their meeting point and its
    traceback to either side. sparse: _sparse_width(x) (periodic only)."""
    if x.duration_dependent:
        return _viterbi_dd(x)
    if x.periodic:
        return _viterbi_per(x, sparse)
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    scores, flags = _folded(x, scores, flags)
    (fa, ff), (ra, rf) = _sides(x, KP, CP, scores, allowed, ps, pe, start, end, flags)
    mid = {"f": _chain_state(B, 1, KP, CP, dev), "r": _chain_state(B, 1, KP, CP, dev)}
    bp_d = torch.empty(B, T, C, device=dev, dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, C, device=dev, dtype=torch.int8 if CP <= 128 else torch.int16)
    nw = _viterbi_warps(KP, CP)
    gr = _gamma_rows(CP)

    kw = _chain_opts(KP, CP, nw)

    def half(side, args, fl, rev):
        def go():
            chain._fwd_kernel[(B,)](
                *args, x.lengths, dummy, dummy, dummy, dummy, *mid[side], dummy, dummy,
                dummy, bp_d, bp_c, dummy, dummy, _work(kw["TILE"], B, KP, CP, dummy),
                T, C, K, 1, 1, 0,
                KP=KP, CP=CP, MODE=2, REV=rev, GAMMA_ROWS=gr, **kw, **fl)
        return go

    _Both(dev).run(half("f", fa, ff, False), half("r", ra, rf, True))
    score = torch.empty(B, device=dev, dtype=torch.float64)
    labels = torch.full((B, T), -1, device=dev, dtype=torch.int64)
    starts = torch.zeros(B, T, device=dev, dtype=torch.bool)
    (f_ring, _, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid["f"], mid["r"]
    chain._viterbi_join_kernel[(B, 2)](
        f_ring, f_alp, f_n, r_ring, r_gam, r_n, fa[5], x.lengths, bp_d, bp_c, score,
        labels, starts.view(torch.uint8), T, C, K, KP=KP, CP=CP, BLOCK=64, num_warps=nw)
    return score.to(x.scores.dtype), labels, starts


def _segmentation(x: CRFInputs, score: Tensor, seg_label: Tensor):
    """(score, labels, seg_start) from the float64 best score and the segment starts'
    labels (-1 elsewhere); a sequence with nothing allowed gets labels -1."""
    B, T, dev = x.batch, x.T, x.scores.device
    ok = torch.isfinite(score)
    seg_start = seg_label >= 0
    # label of each position = label of the latest segment start at or before it
    pos = torch.arange(T, device=dev).expand(B, T)
    idx = torch.where(seg_start, pos, torch.zeros_like(pos)).cummax(dim=1).values
    labels = seg_label.gather(1, idx)
    valid = pos < x.lengths[:, None]
    labels = torch.where(valid & ok[:, None], labels, torch.full_like(labels, -1))
    return score.to(x.scores.dtype), labels, seg_start & valid


# ----- periodic (P, C, C) transitions, P < K: chain._fwd_end_kernel and friends -----


def _period(x: CRFInputs):
    return x.period, _pow2(x.period)


RING_TILE: int | None = None  # end-indexed chain: slots per tile of its ring in global
# memory (0: the ring in registers); None = by shape (_ring_tile). Benchmarks set it.
TILE_WARPS: int | None = None  # warps of the tiled chain; None = _ring_tile's rule
REV_WARPS: int | None = None  # warps of the periodic family's reversed chain (_fwd_kernel
# NP > 1: the forward's and the backward's halves, the Viterbi's); None = _rev_warps' rule


def _ring_tile(KP: int, CP: int) -> int:
    """Slots per tile of the end-indexed chain's ring in global memory (tiled.py), or 0
    for the ring in registers. Tiled from KP x CP = 16384 ring elements, where the
    register ring spills: on an H100, 64-slot tiles at 16 warps ran the periodic Viterbi
    1.57x and the posterior pass 1.13x faster at the gene shape (256 x 64) and the
    Viterbi 1.10x at 1024 x 16; at 128 x 32 the two were equal (RESULTS.md, "The
    end-indexed chain's ring in global memory, in tiles")."""
    if RING_TILE is not None:
        return min(RING_TILE, KP)
    if KP * CP >= CHAIN_TILE_FROM:
        return min(KP, max(64, END_TILE_ELEMS // CP))
    return min(64, KP) if KP * CP >= 16384 else 0


END_TILE_ELEMS = 4096  # ring elements per tile of the end-indexed chain from
# CHAIN_TILE_FROM (the gene shape's 64 x 64 below it); benchmarks set it


RES_PLANES_MAX_CP = 32  # the periodic reversed chain's register ring as residue planes
# (KQ > 0) up to this CP; above it (and at 0: benchmarks, tests) one (KP, CP) ring split by
# residue at every read


REV_SPLIT: bool | None = None  # the residue planes split over NP programs per sequence
# (True / False forces it where the planes are on; None = _rev_opts' rule)
REV_SPLIT_WARPS: int | None = None  # warps of each of those programs; None = _rev_opts' rule
REV_PART_GAMMA: bool | None = None  # each split program forms its residue's part of gamma
# (chain._fwd_kernel PARTG); None = _rev_opts' rule
PREFETCH = True  # the split periodic chains load each step's rows a step ahead
# (_fwd_kernel PREFETCH, split_end.py); False: at the top of the step (benchmarks). Not
# in the unsplit chains: at the 1-bp gene shape it cost 4% (RESULTS.md, "Tagged exchanges")
LAZY_ALPHA = True  # the periodic reversed chain forms its alpha only where it is stored
# (_fwd_kernel LAZY; the same bits); False: every step (benchmarks)
REV_TAG: bool | None = None  # the reversed split chain's exchange as tagged words, no
# counter (chain._exchange TAG; with LAZY_ALPHA its parts come label-major, XT); None =
# _rev_opts' rule (where the programs form gamma's parts)
END_TAG = True  # the split end-indexed chain's alpha row as tagged words (split_end.py
# TAG); False: the counter (benchmarks)


def _rev_opts(KP: int, CP: int, nw: int, B: int, dummy: Tensor, NP: int = 1) -> dict:
    """Launch options of the periodic family's reversed chain: _chain_opts' tiles (with
    their `work` rings) from CHAIN_TILE_FROM, else the register ring at _rev_warps; for
    the logsumexp chains (NP given, > 1) at CP <= RES_PLANES_MAX_CP that ring as NP
    residue planes of KQ = pow2(ceil(KP / NP)) rows (chain._fwd_kernel's docstring). On an
    H100 the planes ran forward+backward 128.2 -> 119.7 ms at (8, 20000, 100, 24) and
    238.8 -> 217.1 ms at (16, 20000, 1000, 16), the same bits (sha1 of log Z and every
    gradient), but the forward 3% slower at the 1-bp gene shape's CP = 64 in an earlier
    run (133.3 -> 138.2 ms; RESULTS.md, "The periodic reversed chain's ring as residue
    planes"). On a GPU with B (NP + 1) <= SMs (the other direction's B programs beside
    it; REV_SPLIT forces it either way) the planes are split over NP programs per
    sequence, one plane each, exchanging their parts every step. Up to 2,048 plane
    elements (KQ x CP) each program forms its residue's part of gamma (PARTG; 4 warps),
    beyond it all of gamma from the exchanged planes (8 warps; REV_PART_GAMMA,
    REV_SPLIT_WARPS force them). On an H200 the reversed chain's kernel time went 110.8 ->
    64.5 ms at (8, 20000, 100, 24) and 172.2 -> 83.6 ms at (16, 20000, 1000, 16), where
    the parts took 122.9 (RESULTS.md, "The periodic chains' residue planes split over
    programs"). Where the parts are formed, the exchange is tagged (REV_TAG; label-major
    with LAZY_ALPHA) and the split programs load their rows a step ahead (PREFETCH): with
    LAZY_ALPHA the chain went 64.5 -> 45.9 ms at (8, 20000, 100, 24); all of gamma per
    program (8 warps) ran 4% slower tagged (RESULTS.md, "Tagged exchanges")."""
    kw = _chain_opts(KP, CP, _rev_warps(nw))
    planes = NP > 1 and not kw["TILE"] and CP <= RES_PLANES_MAX_CP
    kq = _pow2(-(-KP // NP)) if planes else 0
    kw = dict(kw, work=_work(kw["TILE"], B, KP, CP, dummy), KQ=kq, SPLIT=1,
              LAZY=int(bool(LAZY_ALPHA)))
    dev = dummy.device
    if not planes or dev.type != "cuda" or B * NP > _sm_count(dev):
        return kw
    if not (B * (NP + 1) <= _sm_count(dev) if REV_SPLIT is None else REV_SPLIT):
        return kw
    part = kq * CP <= 2048 if REV_PART_GAMMA is None else bool(REV_PART_GAMMA)
    nw = REV_SPLIT_WARPS or (4 if part else 8)
    tag = part if REV_TAG is None else bool(REV_TAG)
    xt = int(tag and part and bool(LAZY_ALPHA))
    return dict(kw, SPLIT=NP, PARTG=int(part), num_warps=nw, XT=xt, TAG=int(tag),
                PREFETCH=int(bool(PREFETCH)), **_exchange_buffers(B, 4 * _pow2(NP) * CP, dev, tag))


def _rev_warps(nw: int) -> int:
    """Warps of the periodic family's reversed chain (_fwd_kernel NP > 1), given its
    caller's rule `nw`: at most 8. On an H100 (benchmarks/warps_probe.py --sections rev)
    8 warps against the caller's 16 ran the forward 1.21x and the Viterbi 1.47x faster at
    (16, 20000, 1000, 16) (the Viterbi's 32: 1.47x) and the forward 1.09x at the gene shape
    (64, 20000, 256, 37); 4 lost at both (2-8x slower), and at (8, 20000, 100, 24), where
    the rule gives 8, 16 and 32 ran 1.3-2.1x slower."""
    return REV_WARPS or min(nw, 8)


END_SPLIT: bool | None = None  # the end-indexed forward chain's ring as NP residue planes,
# one program each (split_end.py; True / False forces it on a GPU; None = _end_split's rule)
END_SPLIT_WARPS: int | None = None  # warps of each of its programs; None = 8 up to 4,096
# plane elements (KQ x CP), else 16


def _end_split(B: int, KP: int, CP: int, NP: int, dev) -> int:
    """Programs per sequence of the end-indexed forward chain (MODE 0): NP (split_end.py)
    on a GPU at CP <= RES_PLANES_MAX_CP (where the reversed chain's planes are on) with
    2 B NP <= SMs (both directions split, side by side; every program of a split chain
    waits for the others each step, so all must be resident), else 1. On an H200 that
    chain's kernel time went 68.5 -> 49.2 ms at (8, 20000, 100, 24) (8 warps) and 141.4
    -> 76.1 ms at (16, 20000, 1000, 16) (16 warps; at 8, fwd+bwd 151.5 against 143.4
    before alpha's row became a masked store; RESULTS.md, "The periodic chains' residue
    planes split over programs"); with alpha's row as a tagged word (END_TAG) and the
    rows loaded a step ahead (PREFETCH), 47.3 -> 46.6 and 80.9 -> 69.5 ms (RESULTS.md,
    "Tagged exchanges")."""
    if NP < 2 or CP > RES_PLANES_MAX_CP or dev.type != "cuda" or B * NP > _sm_count(dev):
        return 1
    on = 2 * B * NP <= _sm_count(dev) if END_SPLIT is None else END_SPLIT
    return NP if on else 1


def _end_chain(grid: tuple, args: tuple, nw: int, **kw) -> None:
    """chain._fwd_end_kernel[grid](*args, **kw), or split_end._fwd_end_split_kernel over
    (B, NP) programs where _end_split asks for it (MODE 0), or tiled._fwd_end_tiled_kernel
    with a scratch ring per program where _ring_tile asks for it (same results, bitwise)."""
    KP, CP, NP = kw["KP"], kw["CP"], kw["NP"]
    dev = args[0].device
    if kw["MODE"] == 0 and len(grid) == 1 and _end_split(grid[0], KP, CP, NP, dev) > 1:
        B = grid[0]
        kq = _pow2(-(-KP // NP))
        if kw.get("SP"):
            kw = dict(kw, wsp=torch.empty(B * NP * CP, device=dev, dtype=torch.float32))
        tag = bool(END_TAG)  # alpha's row, by step parity (tagged: 2 NPP slots)
        ex = _exchange_buffers(B, (2 * _pow2(NP) if tag else 2) * CP, dev, tag)
        split_end._fwd_end_split_kernel[(B, NP)](
            *args[:-6], ex["xch"], ex["bar"], *args[-6:], KQ=kq, PREFETCH=int(bool(PREFETCH)),
            TAG=int(tag),
            num_warps=END_SPLIT_WARPS or (8 if kq * CP <= 4096 else 16), **kw)
        return
    tile = _ring_tile(KP, CP)
    if not tile:
        chain._fwd_end_kernel[grid](*args, num_warps=nw, **kw)
        return
    work = torch.empty(math.prod(grid), KP, CP, device=args[0].device, dtype=torch.float32)
    tiled._fwd_end_tiled_kernel[grid](*args[:-6], work, *args[-6:], TILE=tile,
                                      num_warps=TILE_WARPS or min(nw, 16), **kw)


def _per_transition(tr: Tensor, CP: int, NPP: int, transpose: bool) -> Tensor:
    """(NPP, CP, CP) -inf padded slices of a (P, C, C) transition, each transposed or not."""
    P, C = tr.shape[0], tr.shape[1]
    out = torch.full((NPP, CP, CP), float("-inf"), device=tr.device, dtype=torch.float32)
    out[:P, :C, :C] = tr.transpose(1, 2) if transpose else tr
    return out


SPARSE_BELOW = 0.25  # periodic transitions: sparse tables (chain.py, "Sparse periodic
# transitions") when their width SP <= SPARSE_BELOW x CP ...
SPARSE_FROM_CP = 32  # ... and CP >= SPARSE_FROM_CP; tests and benchmarks set both
SPARSE_VITERBI = False  # the Viterbi with sparse tables too (tests): on an H100 at the gene
# shape its chains ran 3-6x slower than dense (the reversed chain's build fell to 32
# registers and spilled 824 bytes), while the posterior pass ran 1.9x faster (RESULTS.md,
# "Sparse periodic transition tables")


def _sparse_opts(sp: int, programs: int, rows: int, CP: int, dummy: Tensor) -> dict:
    """A periodic kernel's sparse launch options: SP and, with sparse tables, `wsp`: a
    (rows, CP) float32 scratch for each of `programs` programs (chain._spread)."""
    wsp = torch.empty(programs * rows * CP, device=dummy.device) if sp else dummy
    return {"SP": sp, "wsp": wsp}


def _sparse_width(x: CRFInputs) -> int:
    """SP of the sparse transition tables (a power of two >= 2 and >= the most finite
    entries into or out of a label at one residue), or 0 for the dense tables: not
    periodic, CP < SPARSE_FROM_CP, or SP > SPARSE_BELOW x CP. Reads the transition's
    finite pattern on the host (one synchronisation), so the caller runs it outside CUDA
    graph capture and a captured graph's key holds it."""
    if not x.periodic or x.duration_dependent:
        return 0
    _, CP = _shape(x)
    if CP < SPARSE_FROM_CP:
        return 0
    fin = torch.isfinite(x.transition)
    most = int(torch.maximum(fin.sum(2).amax(), fin.sum(1).amax()))
    sp = max(2, _pow2(most))
    return sp if sp <= SPARSE_BELOW * CP else 0


def _sparse_rows(m: Tensor, sp: int):
    """(values, int32 columns) of the first sp entries of every row of m (..., CP) in the
    order finite first, each group by ascending column: rows with fewer finite entries end
    in -inf values (at columns of non-finite entries). GPU operations only, so a graph
    captured over them is right for new values with the same width."""
    order = torch.sort((~torch.isfinite(m)).to(torch.int32), dim=-1, stable=True).indices
    order = order[..., :sp]
    return m.gather(-1, order).contiguous(), order.to(torch.int32).contiguous()


def _per_tables(x: CRFInputs, CP: int, NPP: int, sp: int, dummy: Tensor) -> dict:
    """The periodic kernels' transition operands, (values, columns) each: "f" the forward
    chain's [r, dst, src], "r" the reversed chain's [r, c', c], "b" the backward's [r, src,
    dst]. Dense (sp = 0): padded (NPP, CP, CP) tables (the backward's the (P, C, C) input)
    without columns; sparse: the pred and succ forms (NPP, CP, sp) of chain.py's "Sparse
    periodic transitions"."""
    if not sp:
        return {"f": (_per_transition(x.transition, CP, NPP, transpose=True), dummy),
                "r": (_per_transition(x.transition, CP, NPP, transpose=False), dummy),
                "b": (x.transition.contiguous(), dummy)}
    full = _per_transition(x.transition, CP, NPP, transpose=False)  # [r, src, dst]
    succ = _sparse_rows(full, sp)
    return {"f": _sparse_rows(full.transpose(1, 2), sp), "r": succ, "b": succ}


def _end_state(B: int, n: int, KP: int, CP: int, dev):
    """The end-indexed forward chain's ring, alpha (float32) and normaliser (float64)."""
    return (torch.empty(B, n, KP, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, CP, device=dev, dtype=torch.float32),
            torch.empty(B, n, device=dev, dtype=torch.float64))


def _per_rows(x: CRFInputs, CP: int, NPP: int, n: int):
    """The periodic family's forward rows for n positions per sequence (B, n, ...): gamma^r
    (NPP, CP), alpha (CP) float32 and the normaliser float64."""
    f32 = {"device": x.scores.device, "dtype": torch.float32}
    return (torch.empty(x.batch, n, NPP, CP, **f32), torch.empty(x.batch, n, CP, **f32),
            torch.empty(x.batch, n, device=x.scores.device, dtype=torch.float64))


def _per_row_bytes(CP: int, NPP: int) -> int:
    """Bytes of one periodic-family row: gamma^r (NPP, CP), alpha (CP) float32, N float64."""
    return (NPP + 1) * CP * 4 + 8


def _forward_per(x: CRFInputs, keep: bool = False, sp: int = 0):
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    P = _segment_length(T, K, B, dev, C)
    nck = math.ceil(T / P) + 1
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    db = _db_table(x, KP, CP, 2 * KP)
    tabs = _per_tables(x, CP, NPP, sp, dummy)
    (tr_f, ti_f), (tr_r, ti_r) = tabs["f"], tabs["r"]
    rflags = dict(flags, HAS_PS=flags["HAS_PE"], HAS_PE=flags["HAS_PS"])
    ck = {"f": _end_state(B, nck, KP, CP, dev), "r": _chain_state(B, nck, KP, CP, dev)}
    mid = {"f": _end_state(B, 1, KP, CP, dev), "r": _chain_state(B, 1, KP, CP, dev)}
    nw = _warps(KP, CP)
    # keep: the rows of [0, M) now, of [M, L) in the backward's second half (_backward_per)
    rows = _per_rows(x, CP, NPP, T) if keep and _rows_fit(x, _per_row_bytes(CP, NPP)) else None

    def fwd():
        _end_chain((B,), (
            scores, allowed, ps, pe, tr_f, db, start, x.lengths, *ck["f"], *mid["f"],
            dummy, dummy, *(rows or (dummy,) * 3), dummy, dummy, dummy, dummy,
            T, C, K, P, nck, 0), nw, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=0, PHASE=0,
            WRITE_ROWS=rows is not None, tidx=ti_f, **_sparse_opts(sp, B, 1, CP, dummy),
            **flags)

    rk = _rev_opts(KP, CP, nw, B, dummy, NP)

    def rev():
        chain._fwd_kernel[(B, rk["SPLIT"])](
            scores, allowed, pe, ps, tr_r, db, end, x.lengths, *ck["r"], *mid["r"],
            dummy, dummy, dummy, dummy, dummy, dummy, dummy, T=T, C=C, K=K, P=P, NCK=nck,
            seg0=0, KP=KP, CP=CP, MODE=0, REV=True, PHASE=0, NP=NP, NPP=NPP, tidx=ti_r,
            **_sparse_opts(sp, B * rk["SPLIT"], NPP, CP, dummy), **rk, **rflags)

    _Both(dev).run(fwd, rev)
    log_z64 = torch.empty(B, device=dev, dtype=torch.float64)
    (f_ring, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid["f"], mid["r"]
    chain._join_end_kernel[(B,)](f_ring, f_alp, f_n, r_ring, r_gam, r_n, x.lengths, log_z64,
                                 C, P, KP=KP, CP=CP, **_chain_opts(KP, CP, nw))
    saved = {"ck": ck, "mid": mid, "log_z64": log_z64, "P": P, "nck": nck, "rows": rows,
             "ops": (scores, allowed, ps, pe, db, start, end, tabs, flags, rflags), "sp": sp}
    return log_z64.to(x.scores.dtype), saved


def _backward_per(x: CRFInputs, saved, grad_log_z: Tensor, wanted=None) -> dict[str, Tensor]:
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    P, nck, ck, mid = saved["P"], saved["nck"], saved["ck"], saved["mid"]
    scores, allowed, ps, pe, db, start, end, tabs, flags, rflags = saved["ops"]
    (tr_f, ti_f), (tr_r, ti_r), (trans, ti_b) = tabs["f"], tabs["r"], tabs["b"]
    sp = saved["sp"]
    nseg = math.ceil(T / P)
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    dummy = torch.empty(1, **f32)
    fin = {"f": (torch.empty(B, CP, **f32), torch.empty(B, **f64)),
           "r": (torch.empty(B, CP, **f32), torch.empty(B, **f64))}
    nw = _warps(KP, CP)
    full = saved.get("rows")  # the forward wrote the rows of [0, M); this half writes the rest

    def fwd():
        _end_chain((B,), (
            scores, allowed, ps, pe, tr_f, db, start, x.lengths, *ck["f"], *mid["f"],
            dummy, dummy, *(full or (dummy,) * 3), dummy, dummy, *fin["f"],
            T, C, K, P, nck, 0), nw, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=0, PHASE=1,
            WRITE_ROWS=full is not None, tidx=ti_f, **_sparse_opts(sp, B, 1, CP, dummy),
            **flags)

    rk = _rev_opts(KP, CP, nw, B, dummy, NP)

    def rev():
        chain._fwd_kernel[(B, rk["SPLIT"])](
            scores, allowed, pe, ps, tr_r, db, end, x.lengths, *ck["r"], *mid["r"],
            dummy, dummy, dummy, dummy, dummy, *fin["r"], T=T, C=C, K=K, P=P, NCK=nck,
            seg0=0, KP=KP, CP=CP, MODE=0, REV=True, PHASE=1, NP=NP, NPP=NPP, tidx=ti_r,
            **_sparse_opts(sp, B * rk["SPLIT"], NPP, CP, dummy), **rk, **rflags)

    _Both(dev).run(fwd, rev)
    if full is not None:
        W, rows = nseg, full
    else:
        W = _wave_width(x, P, nseg, _per_row_bytes(CP, NPP))
        rows = _per_rows(x, CP, NPP, W * P)
    g32 = torch.where(saved["log_z64"] > float("-inf"), grad_log_z, 0.0).float()
    g_scores, g_ps, g_pe = torch.zeros(3, B, T, C, **f32).unbind(0)
    params = param_grads_wanted(wanted)
    g_db = torch.zeros(B, nck, KP, CP, **f32) if params else dummy
    g_tr = torch.zeros(B, nck, NPP, CP, sp or CP, **f32) if params else dummy
    nw_rec = _wave_warps(KP, CP, "recompute")
    bw = _bwd_opts(KP, CP, _wave_warps(KP, CP, "bwd", params, sp > 0), params, B * nck, dummy)
    rec_sp = _sparse_opts(sp, B * W, 1, CP, dummy)
    bwd_sp = _sparse_opts(sp, B * nck, NPP, CP, dummy)
    for k0 in range(0, nseg, W):
        w = min(W, nseg - k0)
        if full is None:
            _end_chain((B, w), (
                scores, allowed, ps, pe, tr_f, db, start, x.lengths, *ck["f"],
                dummy, dummy, dummy, dummy, dummy, *rows, dummy, dummy, dummy, dummy,
                T, C, K, P, nck, k0), nw_rec, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=1,
                tidx=ti_f, **rec_sp, **flags)
        chain._bwd_kernel[(B, w)](
            scores, allowed, ps, pe, trans, db, end, x.lengths, g32,
            ck["f"][0], ck["f"][1], ck["f"][2], ck["r"][0], ck["r"][1], ck["r"][3],
            *rows, *fin["f"], saved["log_z64"], g_scores, g_ps, g_pe, g_db, g_tr,
            T=T, C=C, K=K, P=P, NCK=nck, seg0=k0, KP=KP, CP=CP, NP=NP, NPP=NPP, END=True,
            ROWS_FULL=full is not None, tidx=ti_b, **bwd_sp, **bw, **flags)
    if not params:
        return _gradients(x, g_scores, g_ps, g_pe, None, None)
    transition = g_tr.view(-1, NPP, CP, sp or CP).sum(0, dtype=torch.float64)
    if sp:  # the sparse slots [r, src, s] back to their columns (-inf slots add 0)
        transition = torch.zeros(NPP, CP, CP, **f64).scatter_add_(2, ti_b.long(), transition)
    transition = transition[:NP, :C, :C]
    return _gradients(x, g_scores, g_ps, g_pe, g_db.view(-1, KP, CP).sum(0, dtype=torch.float64),
                      transition)


def _viterbi_per(x: CRFInputs, sp: int = 0):
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    NP, NPP = _period(x)
    dev = x.scores.device
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    scores, flags = _folded(x, scores, flags)
    db = _db_table(x, KP, CP)
    tabs = _per_tables(x, CP, NPP, sp, dummy)
    (tr_f, ti_f), (tr_r, ti_r) = tabs["f"], tabs["r"]
    rflags = dict(flags, HAS_PS=flags["HAS_PE"], HAS_PE=flags["HAS_PS"])
    i32 = {"device": dev, "dtype": torch.int32}
    mid_f = _end_state(B, 1, KP, CP, dev)
    mid_bd, mid_bc = torch.empty(B, KP, CP, **i32), torch.empty(B, KP, CP, **i32)
    mid_r = _chain_state(B, 1, KP, CP, dev)
    bp_d = torch.empty(B, T, NPP, C, device=dev,
                       dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, NPP, C, device=dev,
                       dtype=torch.int16 if NPP * CP < 2**15 else torch.int32)
    nw = _viterbi_per_warps(KP, CP)

    def fwd():
        _end_chain((B,), (
            scores, allowed, ps, pe, tr_f, db, start, x.lengths, dummy, dummy, dummy,
            *mid_f, mid_bd, mid_bc, dummy, dummy, dummy, bp_d, bp_c, dummy, dummy,
            T, C, K, 1, 1, 0), nw, KP=KP, CP=CP, NP=NP, NPP=NPP, MODE=2, tidx=ti_f,
            **_sparse_opts(sp, B, 1, CP, dummy), **flags)

    rk = _rev_opts(KP, CP, nw, B, dummy)

    def rev():
        chain._fwd_kernel[(B,)](
            scores, allowed, pe, ps, tr_r, db, end, x.lengths, dummy, dummy, dummy, dummy,
            *mid_r, dummy, dummy, dummy, bp_d, bp_c, dummy, dummy, T=T, C=C, K=K, P=1, NCK=1,
            seg0=0, KP=KP, CP=CP, MODE=2, REV=True, NP=NP, NPP=NPP, tidx=ti_r,
            **_sparse_opts(sp, B, NPP, CP, dummy), **rk, **rflags)

    _Both(dev).run(fwd, rev)
    score = torch.empty(B, device=dev, dtype=torch.float64)
    labels = torch.full((B, T), -1, device=dev, dtype=torch.int64)
    starts = torch.zeros(B, T, device=dev, dtype=torch.bool)
    (f_ring, f_alp, f_n), (r_ring, r_gam, _, r_n) = mid_f, mid_r
    chain._viterbi_join_end_kernel[(B, 2)](
        f_ring, mid_bd, mid_bc, f_alp, f_n, r_ring, r_gam, r_n, x.lengths, bp_d, bp_c,
        score, labels, starts.view(torch.uint8), T, C, KP=KP, CP=CP, NPP=NPP, BLOCK=64,
        **_chain_opts(KP, CP, nw))
    return score.to(x.scores.dtype), labels, starts


# ----- duration-dependent (K, C, C) transitions: chain._fwd_dd_kernel and friends -----


def _forward_dd(x: CRFInputs):
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P = _segment_length(T, K)
    nseg = math.ceil(T / P)
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    trans = x.transition.contiguous()
    db = x.duration_bias.contiguous()
    ck_ring = torch.empty(B, nseg, KP, CP, device=dev, dtype=torch.float32)
    ck_alp = torch.empty(B, nseg, CP, device=dev, dtype=torch.float32)
    ck_n = torch.empty(B, nseg, device=dev, dtype=torch.float64)
    fin_alp = torch.empty(B, CP, device=dev, dtype=torch.float32)
    fin_n = torch.empty(B, device=dev, dtype=torch.float64)
    chain._fwd_dd_kernel[(B,)](
        scores, allowed, ps, pe, trans, db, start, x.lengths,
        ck_ring, ck_alp, ck_n,
        dummy, dummy,
        dummy, dummy,
        fin_alp, fin_n,
        T, C, K, P, nseg, 0,
        KP=KP, CP=CP, MODE=0, num_warps=_warps(KP, CP), **flags)
    log_z64 = _log_z(fin_alp, fin_n, end, C)
    saved = {"ck": (ck_ring, ck_alp, ck_n), "fin_alp": fin_alp, "fin_n": fin_n,
             "log_z64": log_z64, "P": P, "nseg": nseg}
    return log_z64.to(x.scores.dtype), saved


def _backward_dd(x: CRFInputs, saved, grad_log_z: Tensor) -> dict[str, Tensor]:
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    P, nseg = saved["P"], saved["nseg"]
    ck_ring, ck_alp, ck_n = saved["ck"]
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    trans = x.transition.contiguous()
    db = x.duration_bias.contiguous()
    f32 = {"device": dev, "dtype": torch.float32}
    f64 = {"device": dev, "dtype": torch.float64}
    rows = [(torch.empty(B, P, CP, **f32), torch.empty(B, P, **f64))
            for _ in range(2 if nseg > 1 else 1)]
    (st_ring, st_gam, st_n, st_m), (g_scores, g_ps, g_pe, g_db, g_tr) = \
        _backward_buffers(x, KP, CP, (KP, C, C))
    g, g32 = _grad_weights(saved, grad_log_z)
    nw = _warps(KP, CP)

    def recompute(seg):
        chain._fwd_dd_kernel[(B,)](
            scores, allowed, ps, pe, trans, db, start, x.lengths,
            ck_ring, ck_alp, ck_n,
            *rows[seg % len(rows)],
            dummy, dummy, dummy, dummy,
            T, C, K, P, nseg, seg,
            KP=KP, CP=CP, MODE=1, num_warps=nw, **flags)

    def reverse(seg):
        chain._bwd_dd_kernel[(B,)](
            scores, allowed, ps, pe, trans, db, start, end, x.lengths, g32,
            ck_ring, ck_alp, ck_n,
            *rows[seg % len(rows)], saved["fin_alp"], saved["fin_n"], saved["log_z64"],
            st_ring, st_gam, st_n, st_m,
            g_scores, g_ps, g_pe, g_db, g_tr,
            T, C, K, P, nseg, seg,
            KP=KP, CP=CP, num_warps=nw, **flags)

    _Overlap(dev, nseg).run(recompute, reverse)
    n = min(K, KP)  # durations beyond the ring (> T) get 0
    # (P, C, C) with P >= K: slices past K (durations that cannot occur) get 0
    transition = torch.zeros(x.transition.shape, device=dev, dtype=torch.float64)
    transition[:n] = (g_tr[:, :n] * g[:, None, None, None]).sum(0)
    return _gradients(x, g_scores, g_ps, g_pe, (g_db * g[:, None, None]).sum(0), transition)


def _viterbi_dd(x: CRFInputs):
    B, T, C, K = x.batch, x.T, x.C, x.K
    KP, CP = _shape(x)
    dev = x.scores.device
    scores, allowed, ps, pe, start, end, flags, dummy = _common(x)
    trans = x.transition.contiguous()
    db = x.duration_bias.contiguous()
    bp_d = torch.empty(B, T, C, device=dev, dtype=torch.int16 if KP < 2**15 else torch.int32)
    bp_c = torch.empty(B, T, C, device=dev, dtype=torch.int8 if CP <= 128 else torch.int16)
    fin_alp = torch.empty(B, CP, device=dev, dtype=torch.float32)
    fin_n = torch.empty(B, device=dev, dtype=torch.float64)
    chain._fwd_dd_kernel[(B,)](
        scores, allowed, ps, pe, trans, db, start, x.lengths,
        dummy, dummy, dummy,
        dummy, dummy,
        bp_d, bp_c,
        fin_alp, fin_n,
        T, C, K, 1, 1, 0,
        KP=KP, CP=CP, MODE=2, num_warps=_warps(KP, CP), **flags)
    last = fin_alp[:, :C].double() + end.double()
    best, best_c = last.max(dim=1)
    score = fin_n + best
    best_c = torch.where(torch.isfinite(score), best_c, torch.full_like(best_c, -1))
    seg_label = torch.full((B, T), -1, device=dev, dtype=torch.int64)
    chain._traceback_dd_kernel[(B,)](bp_d, bp_c, best_c, x.lengths, seg_label, T, C,
                                     num_warps=1)
    return _segmentation(x, score, seg_label)
