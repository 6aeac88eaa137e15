"""The Triton backend's launch settings: one frozen `Tuning` object and the rules that read it.

Every launch choice the kernels' host code makes (warps per program, rings in registers
or in tiles of global memory, chains split over programs, checkpoint spacing, the rows
budget of the backward, sparse transition tables, ...) is a method of `Tuning`, and every
number those rules read is a field of it, with the measurement that set its default
beside it (benchmarks/RESULTS-log.md, benchmarks/KERNELS_NOTES.md). `DEFAULT` is the shipped
schedule. A benchmark or a test that wants another schedule builds its own object,
`Tuning(warps=8)` or `dataclasses.replace(DEFAULT, ...)`, and passes it:
`triton.forward(x, tuning=t)`; the backward runs with its forward's tuning, and a
captured CUDA graph's key holds it (graphs.py). Nothing here is a module global that
callers assign.

SEMISEG_TRITON_TUNING="field=value,..." (ints, floats, true/false/none) replaces the
defaults of this process (read once, at import; an unknown field is an error), so that the
whole suite can run with a kernel variant before it becomes the rule.

Every setting gives the same results, bit for bit, except `segment` (the checkpoint
spacing: another spacing sums in another order) and `gamma_rows` (the forward's other
gamma variant): tests pin both to compare against the float64 oracles at awkward
spacings.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from dataclasses import dataclass

import torch
from torch import Tensor

from ..inputs import CRFInputs


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _padded(T: int, K: int, C: int) -> tuple[int, int]:
    """(KP, CP): the ring's slots min(K, T) and the labels C, each padded to a power of
    two (at least 2)."""
    return max(2, _pow2(min(K, T))), max(2, _pow2(C))


def _shape(x: CRFInputs):
    return _padded(x.T, x.K, x.C)


@functools.cache
def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _tile_slots(KP: int, CP: int, frm: int, elems: int) -> int:
    """Slots per tile of a ring walked in memory (elems ring elements per tile), from
    KP x CP = frm; 0 below it (the ring in registers)."""
    return max(1, min(KP, elems // CP)) if KP * CP >= frm else 0


def _work(tile: int, programs: int, KP: int, CP: int, dummy: Tensor) -> Tensor:
    """The (KP, CP) float32 rings in memory of `programs` tiled programs, or dummy."""
    if not tile:
        return dummy
    return torch.empty(programs * KP * CP, device=dummy.device, dtype=torch.float32)


def _exchange_buffers(B: int, floats: int, dev, tagged: bool = False) -> dict:
    """A split chain's exchange: `xch`, `floats` float32 per sequence (common._exchange:
    two step halves of the programs' parts), and `bar`, one int32 step counter per
    sequence, zero at launch (common._arrive_wait). tagged (common._exchange TAG): xch as
    int64 words, zero at launch (each a part and its step's tag)."""
    if tagged:
        return {"xch": torch.zeros(B * floats, device=dev, dtype=torch.int64),
                "bar": torch.zeros(1, device=dev, dtype=torch.int32)}
    return {"xch": torch.empty(B * floats, device=dev, dtype=torch.float32),
            "bar": torch.zeros(B, device=dev, dtype=torch.int32)}


@dataclass(frozen=True)
class Tuning:
    """The Triton backend's launch settings (the module docstring). None means "by the
    rule": the method named in the field's comment decides from the shape and the device.
    `segment` forces the checkpoint spacing P (tests: chunk boundaries at awkward places;
    None = segment_length's rule)."""

    # fixed warps per program (benchmarks set it); None = by shape
    warps: int | None = None
    # shortest checkpoint segment the GPU schedule picks (each pays a join)
    min_segment: int = 32
    # backward segment programs the GPU schedule aims for, per SM; None =
    # segment_programs's rule (benchmarks set it)
    programs_per_sm: int | None = None
    # Viterbi: `allowed` folded into the scores on the host (benchmarks set it)
    fold_mask: bool = True
    # force the forward's gamma variant (tests); None = by shape
    gamma_rows: bool | None = None
    # bytes of forward rows the backward may hold at once; None = by device (budget).
    # Tests and benchmarks set it.
    rows_budget: int | None = None
    # False forces the wave path (benchmarks); None = by budget
    full_rows: bool | None = None
    # end-indexed chain: slots per tile of its ring in global memory (0: the ring in
    # registers); None = by shape (end_tile). Benchmarks set it.
    ring_tile: int | None = None
    # warps of the tiled chain; None = end_tile's rule
    tile_warps: int | None = None
    # warps of the periodic family's reversed chain (_fwd_kernel NP > 1: the forward's and
    # the backward's halves, the Viterbi's); None = rev_chain_warps' rule
    rev_warps: int | None = None
    # KP x CP from which _bwd_kernel keeps its duration-bias sum in g_db (DB_GLOBAL)
    # instead of registers, at CP <= 32; benchmarks set it
    db_global_from: int = 16384
    # programs per static tiled chain; None = split_opts' rule
    chain_split: int | None = None
    # ring elements per program below which a chain is not split further
    split_min_elems: int = 1024
    # ring elements per program up to which a split chain keeps its part in registers
    # (else in tiles in memory); benchmarks set it. 16,384 since one backward program per
    # SM at 16 warps (segment_programs) took K = 8192 to 822 ms: K = 4000 then 400.8 ->
    # 377.4 ms, the same bits (RESULTS-log.md, "The small call met")
    split_reg_elems: int = 16384
    # KP x CP from which the static join's crossing sum runs in parallel tiles
    # (join_parts; 0 = always); benchmarks set it
    join_parts_from: int = 32768
    # ring elements per tile there
    join_tile_elems: int = 2048
    # KP x CP from which the static backward walks its ring in tiles
    bwd_tile_from: int = 32768
    # ring elements (slots x CP) per tile there; benchmarks set both
    bwd_tile_elems: int = 8192
    # warps of the tiled backward; None = 16 (8 for the wide rings below)
    bwd_tile_warps: int | None = None
    # wide rings (CP >= 64, KP x CP from wide_tile_from up to bwd_tile_from: the gene
    # model's 256 x 64): the backward with its parameter sums walks its ring in tiles of
    # these elements at 8 warps: static, periodic with dense tables, periodic with sparse
    # tables (bwd_tile's docstring); benchmarks set them
    wide_tile_from: int = 16384
    wide_tile_static: int = 8192
    wide_tile_dense: int = 16384
    wide_tile_sparse: int = 4096
    # ring elements per tile of the end-indexed chain from CHAIN_TILE_FROM (the gene
    # shape's 64 x 64 below it); benchmarks set it
    end_tile_elems: int = 4096
    # KP x CP from which the static Viterbi runs at 32 warps (viterbi_warps; its chains
    # are tiled there and take chain_opts' warps, so this is its join's): register kernels
    # at K = 2000 took 156 ms at 32 warps against 325 at 16 and 512 at 8, 472 / 943 / 1488
    # at K = 4000 (benchmarks/big_ring_probe.py)
    big_viterbi: int = 32768
    # KP x CP from which the static chains (_fwd_kernel: forward, reversed, recompute,
    # Viterbi halves) keep their ring in memory, walked in tiles
    chain_tile_from: int = 32768
    # ring elements per tile there
    chain_tile_elems: int = 16384
    # their warps; None = 16. Benchmarks set these
    chain_tile_warps: int | None = None
    # periodic transitions: sparse tables (chain.py, "Sparse periodic transitions") when
    # their width SP <= SPARSE_BELOW x CP ...
    sparse_below: float = 0.25
    # ... and CP >= SPARSE_FROM_CP; tests and benchmarks set both
    sparse_from_cp: int = 32
    # the Viterbi with sparse tables too (tests): on an H100 at the gene shape its chains
    # ran 3-6x slower than dense (the reversed chain's build fell to 32 registers and
    # spilled 824 bytes), while the posterior pass ran 1.9x faster (RESULTS-log.md, "Sparse
    # periodic transition tables")
    sparse_viterbi: bool = False
    # the periodic reversed chain's register ring as residue planes (KQ > 0) up to this
    # CP; above it (and at 0: benchmarks, tests) one (KP, CP) ring split by residue at
    # every read
    res_planes_max_cp: int = 32
    # ... and above it up to this CP (the gene shape's 64) only where they are split over
    # programs (rev_opts; end_programs alike): wide planes, each program forming its
    # residue's part of gamma; 0 = never
    split_planes_max_cp: int = 64
    # the residue planes split over NP programs per sequence (True / False forces it where
    # the planes are on; None = rev_opts' rule)
    rev_split: bool | None = None
    # warps of each of those programs; None = rev_opts' rule
    rev_split_warps: int | None = None
    # each split program forms its residue's part of gamma (chain._fwd_kernel PARTG); None
    # = rev_opts' rule
    rev_part_gamma: bool | None = None
    # the end-indexed forward chain's ring as NP residue planes, one program each
    # (split_end.py; True / False forces it on a GPU; None = end_programs's rule)
    end_split: bool | None = None
    # warps of each of its programs; None = 8 up to 4,096 plane elements (KQ x CP), else
    # 16
    end_split_warps: int | None = None
    # the split periodic chains load each step's rows a step ahead (_fwd_kernel PREFETCH,
    # split_end.py); False: at the top of the step (benchmarks). Not in the unsplit
    # chains: at the 1-bp gene shape it cost 4% (RESULTS-log.md, "Tagged exchanges")
    prefetch: bool = True
    # the periodic reversed chain forms its alpha only where it is stored (_fwd_kernel
    # LAZY; the same bits); False: every step (benchmarks)
    lazy_alpha: bool = True
    # the reversed split chain's exchange as tagged words, no counter (common._exchange
    # TAG; with LAZY_ALPHA its parts come label-major, XT); None = rev_opts' rule (where
    # the programs form gamma's parts)
    rev_tag: bool | None = None
    # the split end-indexed chain's alpha row as tagged words (split_end.py TAG); False:
    # the counter (benchmarks)
    end_tag: bool = True
    # the checkpoint spacing P (tests); None = segment_length's rule
    segment: int | None = None
    # the two chains of a call (and the static backward's two sides) on streams of their
    # own, side by side; False: one after the other on the current stream (benchmarks:
    # how much of the two the GPU overlaps)
    side_streams: bool = True
    # where the periodic family's forward and reversed chains meet, in 64ths of the
    # checkpoint segments (jit/common._split MEET; 32 = the middle). Each chain runs part
    # of the sequence in the forward pass and the rest in the backward's, side by side.
    # At the gene shape the end-indexed forward chain's step is the shorter (on an H100
    # at (16, 10000, 256, 37) 37.0 ms against 46.7 ms for the reversed chain over the
    # whole sequence), so 36 would balance the forward pass, and with early_wave the
    # backward's longer reversed part would overlap the wave right of M: predicted 82.5
    # -> about 77 ms a training step; measured on an H100 (the fly config's step, median
    # of 3 epochs) 84.4 ms at 32, 85.2 at 36, 86.2 at 36 with early_wave
    # (RESULTS-log.md, "Twenty-third round"): the middle
    meet: int = 32
    # the periodic backward's wave over the segments right of the meeting point launched
    # as soon as the forward chain's second half ends, beside the reversed chain's
    # (periodic.backward; the same bits either way). Off: on an H100 it slowed the step
    # 84.4 -> 101.6 ms at meet 32 (its programs take SM time the reversed chain needs)
    early_wave: bool = False

    @classmethod
    def from_env(cls, spec: str | None, base: Tuning | None = None) -> Tuning:
        """`base` (default Tuning()) with the fields of spec, "name=value,..."
        (SEMISEG_TRITON_TUNING)."""
        out = cls() if base is None else base
        if not spec:
            return out
        known = {f.name for f in dataclasses.fields(cls)}
        words = {"true": True, "false": False, "none": None}
        changes = {}
        for kv in filter(None, (s.strip() for s in spec.split(","))):
            name, _, value = kv.partition("=")
            name, value = name.strip().lower(), value.strip()
            if name not in known:
                raise ValueError(f"SEMISEG_TRITON_TUNING: no setting {name!r}")
            if value.lower() in words:
                changes[name] = words[value.lower()]
            else:
                changes[name] = float(value) if "." in value else int(value)
        return dataclasses.replace(out, **changes)

    def chain_warps(self, KP: int, CP: int) -> int:
        """Warps of the chains and the backward: by the ring (KP x CP) and the transition step
        (CP x CP). 4 where both are small (KP x CP <= 2,048, CP <= 64): at (32, 300, 30, 39)
        4 warps against 8 ran forward+backward 1.46 -> 1.33 ms of GPU time and the public API
        1.82-1.98 -> 1.61-1.63 ms wall (H200; RESULTS-log.md, "The small call at 4 warps"),
        as graph_probe.py had measured on an H100 (1.566 -> 1.399 ms)."""
        if self.warps is not None:
            return self.warps
        if KP * CP <= 2048 and CP <= 64:
            return 4
        n = max(KP * CP, 2 * CP * CP)
        if n <= 2048:
            return 4
        if n <= 8192:
            return 8
        return 16

    def wave_warps(self, KP: int, CP: int, kernel: str, params: bool = True,
                   sparse: bool = False) -> int:
        """Warps of the periodic backward's wave kernels (`kernel`: "recompute", the
        end-indexed chain's MODE 1, or "bwd", _bwd_kernel END; `params`: whether it forms
        the duration-bias and transition sums). At the 1-bp gene model's shape (KP x CP =
        256 x 64) 32 warps ran the full backward 1.5x faster than chain_warps' 16 on an H100,
        while the chains of the forward and its second halves ran 0.86x
        (benchmarks/KERNELS_NOTES.md, "Warps per kernel"); at CP <= 32 the same change was
        0.3-0.8x, so it applies from CP = 64 only. Without the parameter sums (posteriors)
        _bwd_kernel ran fastest at 8 warps there (posterior pass at 132 x 14,675: 0.76 s
        against 0.93 s at 32 and 1.57 s at 16), while the full backward at 8 ran 2.9x slower
        than at 32 (KERNELS_NOTES.md, session 12). With sparse transition tables (`sparse`)
        _bwd_kernel runs at 8 warps with the parameter sums too: at the gene shape (132 x
        20000) forward+backward took 1017 ms so against 2711 at 32 warps and 1307 at 16
        (its 32-warp build spilled 320 bytes; RESULTS-log.md, "Sparse periodic transition
        tables")."""
        if self.warps is not None:
            return self.warps
        if sparse and kernel == "bwd":
            return 8
        if CP >= 64 and KP * CP >= 16384:
            return 8 if kernel == "bwd" and not params else 32
        return self.chain_warps(KP, CP)

    def viterbi_warps(self, KP: int, CP: int) -> int:
        """Warps of the static Viterbi (both chains and the join): chain_warps' rule, at most 8,
        and 32 from big_viterbi (where the chains are tiled and take chain_opts' warps). On
        an H100 8 warps ran it 1.20x, 1.22x and 1.36x faster than 16 at (16, 20000, 1000,
        16), (16, 20000, 512, 32) and (64, 20000, 256, 37), with the same labels; 4 ran 8-16x
        slower (RESULTS-log.md, "Warps of the periodic reversed chain")."""
        if self.warps is not None:
            return self.warps
        return 32 if KP * CP >= self.big_viterbi else min(self.chain_warps(KP, CP), 8)

    def viterbi_per_warps(self, KP: int, CP: int) -> int:
        """Warps of the periodic Viterbi chains: 32 from KP = 512 at KP x CP >= 16384, where
        it measured 1.6-1.7x faster than 16 (KP = 512 and 1024 at CP = 32 and 16), but not at
        KP = 256, CP = 64 (0.5x)."""
        if self.warps is not None:
            return self.warps
        return 32 if KP >= 512 and KP * CP >= 16384 else self.chain_warps(KP, CP)

    def db_global(self, KP: int, CP: int, params: bool) -> bool:
        """Whether _bwd_kernel sums the duration-bias gradient in global memory (DB_GLOBAL):
        for long rings (KP x CP >= db_global_from at CP <= 32), where a second register array
        of the ring's size made the backward spill. On an H100 (benchmarks/db_global_probe.py)
        forward+backward ran 4.9x faster at (16, 20000, 2000, 13), 1.76x at (4, 20000, 1000,
        24), 1.43x at (16, 20000, 1000, 16) and 1.23x there with periodic transitions, equal
        at 128 x 32, but 0.85x at the gene model's 256 x 64 (its backward at 32 warps holds
        the sum without spilling), hence CP <= 32."""
        return params and KP * CP >= self.db_global_from and CP <= 32

    def bwd_tile(self, KP: int, CP: int, params: bool = True, NP: int = 1,
                 sparse: bool = False) -> int:
        """Slots per tile of the backward's ring in memory (chain._bwd_kernel TILE), or 0
        for the ring in registers.

        From KP x CP = bwd_tile_from, where the whole-ring step spilled: on an H100
        (benchmarks/bwd_tiles_probe.py; RESULTS-log.md, "The static backward's ring in
        tiles") forward+backward at (16, 20000, K, 13) went 835 -> 333 ms at K = 2000 and
        3812 -> 1170 ms at K = 4000, and K = 8192 runs (3.8 s); at 1000 x 16 the tiles lost
        (100 -> 113 ms). Tiles of 8192 elements at 16 warps were the best of 2048 / 4096 /
        8192 x 8 / 16 / 32 at K = 2000 (4-5% over 4096).

        Wide rings (CP >= 64, KP x CP from wide_tile_from), with the parameter sums
        (`params`): tiles of wide_tile_static, _dense (periodic) or _sparse elements. On
        an H200 at (64, 20000, 256, 37) (benchmarks/periodic_bwd_probe.py; RESULTS-log.md,
        "The gene shape's backward in tiles") _bwd_kernel went 159 -> 133 ms static, 550 ->
        361 ms periodic, 303 -> 183 ms periodic with sparse tables, each the best of 2048 /
        4096 / 8192 / 16384 elements x 8 / 16 / 32 warps tried (the register ring at 32
        warps spilled 172 bytes, at 8 warps 200-430); at the training step's (8, 10000,
        256, 37) sparse 18.6 -> 10.6 ms. Without the parameter sums (posteriors) the
        register ring stayed faster (101 against 111 ms)."""
        if KP * CP >= self.bwd_tile_from:
            return _tile_slots(KP, CP, self.bwd_tile_from, self.bwd_tile_elems)
        if params and CP >= 64 and KP * CP >= self.wide_tile_from:
            elems = (self.wide_tile_sparse if sparse else self.wide_tile_dense if NP > 1
                     else self.wide_tile_static)
            return max(1, min(KP, elems // CP))
        return 0

    def bwd_opts(self, KP: int, CP: int, nw: int, params: bool, programs: int,
                 dummy: Tensor, NP: int = 1, sparse: bool = False) -> dict:
        """Launch options of _bwd_kernel (static or periodic, NP residues, `sparse` tables):
        TILE (bwd_tile) with each of `programs` segments' ring in `work` and bwd_tile_warps
        (16; 8 for the wide rings), else the caller's warps nw; the duration-bias sum in g_db
        where tiled or db_global asks for it."""
        tile = self.bwd_tile(KP, CP, params, NP, sparse)
        warps = 16 if KP * CP >= self.bwd_tile_from else 8  # the wide rings' tiles: 8
        return {"TILE": tile, "work": _work(tile, programs, KP, CP, dummy), "PARAM_GRADS": params,
                "DB_GLOBAL": params and (tile > 0 or self.db_global(KP, CP, params)),
                "num_warps": (self.bwd_tile_warps or warps) if tile else nw}

    def chain_opts(self, KP: int, CP: int, nw: int) -> dict:
        """Launch options (TILE, num_warps) of a static _fwd_kernel chain or the join: tiled
        from KP x CP = chain_tile_from (chain._fwd_kernel's docstring;
        benchmarks/KERNELS_NOTES.md, session 16), else the caller's warps nw."""
        tile = _tile_slots(KP, CP, self.chain_tile_from, self.chain_tile_elems)
        return {"TILE": tile, "num_warps": (self.chain_tile_warps or 16) if tile else nw}

    def split_opts(self, B: int, KP: int, CP: int, kw: dict, dummy: Tensor) -> dict:
        """Launch options of a static forward / reversed chain (chain._fwd_kernel MODE 0) split
        over SPLIT programs per sequence: on a GPU, for tiled chains only, the largest power of
        two G with 2 B G <= SMs (both directions' launches run side by side and every program
        of a split chain must be resident at once: it waits for the others every step) and at
        least split_min_elems ring elements per program (chain_split forces G, within the
        SMs). Each program holds KP / G slots: in registers up to split_reg_elems ring
        elements (TILE 0), else in memory, walked in tiles of at most that; at 4 warps up to
        2,048 ring elements, 8 up to 4,096, else 16 (chain_tile_warps forces them). On an
        H100 at B = 1, T = 1e6, K = 1000, C = 24 fwd+bwd went 8.71 s -> 3.76 s by this rule
        with the parts in memory (G = 32, 4 warps; benchmarks/split_chains.py; RESULTS-log.md,
        "Static chains split over programs") and 3.74 -> 3.27 s with them in registers; at
        (16, 20000, 2000, 13) (G = 4, 8,192 elements each) 227.7 -> 198.3 ms, and at K =
        4000 (16,384 elements each) 400.8 -> 377.4 ms (benchmarks/k_doubling.py; RESULTS-log.md,
        "The K-doubling row met", "The small call met"); at 32,768 (K = 8192) registers
        spilled (821 -> 1791 ms). Returns kw
        with TILE, SPLIT, xch (the parts' exchange), bar (the counters, zero) and
        num_warps."""
        dev = dummy.device
        G = 1
        if kw["TILE"] and dev.type == "cuda":
            room = _sm_count(dev) // (2 * B)
            if self.chain_split is not None:
                G = self.chain_split
            else:
                while 2 * G <= room and KP * CP // (2 * G) >= self.split_min_elems:
                    G *= 2
            G = max(1, min(G, room, KP))
        if G == 1:
            return kw
        per = KP * CP // G
        nw = self.chain_tile_warps or (4 if per <= 2048 else 8 if per <= 4096 else 16)
        tile = 0 if per <= self.split_reg_elems else min(kw["TILE"], KP // G)
        return dict(kw, TILE=tile, SPLIT=G, num_warps=nw, **_exchange_buffers(B, 4 * G * CP, dev))

    def join_parts(self, B: int, KP: int, CP: int, dummy: Tensor) -> tuple[int, int, Tensor | None]:
        """The static join's crossing sum split into tiles of join_tile_elems ring elements,
        one program each (chain._cross_part_kernel), for rings from join_parts_from: (tiles
        NT, slots per tile, the (B, NT, CP) parts buffer); (0, 0, None) below it (the join
        sums them itself, as before).
        The join is one program per sequence after both chains, so its O(K^2 C) sum is wall
        time: on an H100 at (16, 20000, 8192, 13) fwd+bwd 982.8 -> 910.8 ms, at K = 4000
        454.3 -> 432.5 ms (RESULTS-log.md, "The K-doubling row met")."""
        if KP * CP < self.join_parts_from:
            return 0, 0, None
        tile = max(1, min(KP, self.join_tile_elems // CP))
        nt = KP // tile
        return nt, tile, torch.empty(B * nt * CP, device=dummy.device, dtype=torch.float32)

    def segment_programs(self, KP: int, CP: int) -> int:
        """Backward segment programs per SM that segment_length aims for: 1 where the static
        backward runs 16 warps (tiled, or by chain_warps: a ring or a transition step of more
        than 8,192 elements), whose programs take an SM's registers each, else 2 (at 4 warps
        the small-shape backward compiles to ~255 registers a thread: two programs an SM).
        On an H100 (RESULTS-log.md, "The small call met") 1 against 2 at 16 warps ran (16,
        20000, K, 13) fwd+bwd 96.6 / 184.0 / 419.1 / 908.9 -> 94.0 / 183.1 / 401.9 / 820.3
        ms for K = 1000 / 2000 / 4000 / 8192; at 8 warps it gained 3% static but lost 2%
        periodic at (8, 20000, 100, 24), so stays 2."""
        if self.programs_per_sm is not None:
            return self.programs_per_sm
        warps = 16 if self.bwd_tile(KP, CP) else self.chain_warps(KP, CP)
        return 1 if warps >= 16 else 2

    def segment_length(self, T: int, K: int, B: int = 1, device=None, C: int = 1) -> int:
        """Checkpoint spacing P. ~sqrt(T K) balances checkpoints ((T/P) K C) against one
        segment's rows (P C). On a GPU the backward runs every segment of every sequence at
        once (its depth is ~2P steps plus a join of ~K), so P shrinks until there are at
        most segment_programs x SMs programs (B x ceil(T/P)), but not below min_segment
        positions. At most, not about: with the segments per sequence rounded up,
        (32, 300, 30, 39) had 32 x 9 = 288 backward programs for the 264 an H100 holds at
        once, and the last 24 ran as a second wave (RESULTS-log.md, "The small call met").
        The field `segment` forces P."""
        if self.segment is not None:
            return self.segment
        P = math.ceil(math.sqrt(T * min(K, T)))
        if device is not None and device.type == "cuda":
            per_seq = max(1, self.segment_programs(*_padded(T, K, C)) * _sm_count(device) // B)
            P = min(P, max(self.min_segment, math.ceil(T / per_seq)))
        return max(1, min(T, P))

    def folded(self, x: CRFInputs, scores, flags):
        """The Viterbi kernels' scores and flags with `allowed` folded into the scores (-inf
        where a label is not allowed: the very values common._emission makes of them), so the
        kernels compile without HAS_ALLOWED. Measured on an H100 (triton 3.6) at the gene
        model's shape, (100, 20000, 256, 37) periodic: the Viterbi chains took 1065 ms with
        HAS_ALLOWED and 413 ms without it, an all-True mask as slow as the real one (RESULTS-log.md,
        "Viterbi with a sequence mask"); the forward chains did not change (288 / 280 ms)."""
        if not flags["HAS_ALLOWED"] or not self.fold_mask:
            return scores, flags
        return scores.masked_fill(~x.allowed, float("-inf")), dict(flags, HAS_ALLOWED=False)

    def gamma_by_rows(self, CP: int) -> bool:
        """Which forward gamma variant (chain._fwd_kernel's docstring). Measured on an H200:
        reducing over the columns of the padded transpose is faster at C = 24 and C = 6
        (1.91 vs 2.39 and 2.17 vs 2.64 us per step), over the rows faster at C = 39 (3.08 vs
        3.72 us per step, padded to 64)."""
        return CP >= 64 if self.gamma_rows is None else self.gamma_rows

    def fwd_transition(self, tr: Tensor, CP: int) -> Tensor:
        """The forward kernel's transition operand: as given, or the -inf padded transpose."""
        if self.gamma_by_rows(CP):
            return tr.contiguous()
        C = tr.shape[0]
        out = torch.full((CP, CP), float("-inf"), device=tr.device, dtype=torch.float32)
        out[:C, :C] = tr.t()
        return out

    def budget(self, device) -> int:
        """rows_budget, or by device: 1/16 of a GPU's memory within [256 MB, 4 GB] (256 MB
        elsewhere). More rows per wave means fewer, fuller waves: at the gene model's
        posterior shape (66 x 20000, K 256, 37 labels, P = 3) 4 GB ran 1.32 the speed of
        256 MB on an H100 (RESULTS-log.md, "Annotation on one H100: decoding windows ...")."""
        if self.rows_budget is not None:
            return self.rows_budget
        if device.type != "cuda":
            return 256 << 20
        total = torch.cuda.get_device_properties(device).total_memory
        return min(4 << 30, max(256 << 20, total // 16))

    def rows_fit(self, x: CRFInputs, row_bytes: int) -> bool:
        """Whether the forward rows of every position of every sequence fit the rows budget
        (full_rows False: never)."""
        return (x.batch * x.T * row_bytes <= self.budget(x.scores.device)
                and self.full_rows is not False)

    def wave_width(self, x: CRFInputs, P: int, nseg: int, row_bytes: int) -> int:
        """Checkpoint segments per wave whose recomputed rows fit the rows budget (>= 1)."""
        return max(1, min(nseg, self.budget(x.scores.device) // (x.batch * P * row_bytes)))

    def end_tile(self, KP: int, CP: int) -> int:
        """Slots per tile of the end-indexed chain's ring in global memory (jit/end.py TILE), or 0
        for the ring in registers. Tiled from KP x CP = 16384 ring elements, where the
        register ring spills: on an H100, 64-slot tiles at 16 warps ran the periodic Viterbi
        1.57x and the posterior pass 1.13x faster at the gene shape (256 x 64) and the
        Viterbi 1.10x at 1024 x 16; at 128 x 32 the two were equal (RESULTS-log.md, "The
        end-indexed chain's ring in global memory, in tiles")."""
        if self.ring_tile is not None:
            return min(self.ring_tile, KP)
        if KP * CP >= self.chain_tile_from:
            return min(KP, max(64, self.end_tile_elems // CP))
        return min(64, KP) if KP * CP >= 16384 else 0

    def rev_opts(self, KP: int, CP: int, nw: int, B: int, dummy: Tensor, NP: int = 1) -> dict:
        """Launch options of the periodic family's reversed chain: chain_opts' tiles (with
        their `work` rings) from chain_tile_from, else the register ring at rev_chain_warps; for
        the logsumexp chains (NP given, > 1) at CP <= res_planes_max_cp that ring as NP
        residue planes of KQ = pow2(ceil(KP / NP)) rows (chain._fwd_kernel's docstring). On an
        H100 the planes ran forward+backward 128.2 -> 119.7 ms at (8, 20000, 100, 24) and
        238.8 -> 217.1 ms at (16, 20000, 1000, 16), the same bits (sha1 of log Z and every
        gradient), but the forward 3% slower at the 1-bp gene shape's CP = 64 in an earlier
        run (133.3 -> 138.2 ms; RESULTS-log.md, "The periodic reversed chain's ring as residue
        planes"). On a GPU with B (NP + 1) <= SMs (the other direction's B programs beside
        it; rev_split forces it either way) the planes are split over NP programs per
        sequence, one plane each, exchanging their parts every step. Up to 2,048 plane
        elements (KQ x CP) each program forms its residue's part of gamma (PARTG; 4 warps),
        beyond it all of gamma from the exchanged planes (8 warps; rev_part_gamma,
        rev_split_warps force them). On an H200 the reversed chain's kernel time went 110.8 ->
        64.5 ms at (8, 20000, 100, 24) and 172.2 -> 83.6 ms at (16, 20000, 1000, 16), where
        the parts took 122.9 (RESULTS-log.md, "The periodic chains' residue planes split over
        programs"). Where the parts are formed, the exchange is tagged (rev_tag; label-major
        with lazy_alpha) and the split programs load their rows a step ahead (prefetch): with
        lazy_alpha the chain went 64.5 -> 45.9 ms at (8, 20000, 100, 24); all of gamma per
        program (8 warps) ran 4% slower tagged (RESULTS-log.md, "Tagged exchanges"). Above
        res_planes_max_cp, up to split_planes_max_cp, the planes only where they are split,
        each program forming its part of gamma: at the fly training step's (16, 10000, 256,
        37) with sparse tables the chain went 102.8 -> 45.2 ms (RESULTS-log.md, "Wide residue
        planes split over programs")."""
        kw = self.chain_opts(KP, CP, self.rev_chain_warps(nw))
        dev = dummy.device
        wide = CP > self.res_planes_max_cp
        planes = (NP > 1 and not kw["TILE"]
                  and CP <= (self.split_planes_max_cp if wide else self.res_planes_max_cp))
        split = (planes and dev.type == "cuda" and B * NP <= _sm_count(dev)
                 and (B * (NP + 1) <= _sm_count(dev) if self.rev_split is None
                      else self.rev_split))
        planes = planes and (split or not wide)  # wide planes only split over programs
        kq = _pow2(-(-KP // NP)) if planes else 0
        kw = dict(kw, work=_work(kw["TILE"], B, KP, CP, dummy), KQ=kq, SPLIT=1,
                  LAZY=int(bool(self.lazy_alpha)))
        if not split:
            return kw
        part = (kq * CP <= 2048 or wide) if self.rev_part_gamma is None else \
            bool(self.rev_part_gamma)
        nw = self.rev_split_warps or (4 if part else 8)
        tag = part if self.rev_tag is None else bool(self.rev_tag)
        xt = int(tag and part and bool(self.lazy_alpha))
        return dict(kw, SPLIT=NP, PARTG=int(part), num_warps=nw, XT=xt, TAG=int(tag),
                    PREFETCH=int(bool(self.prefetch)),
                    **_exchange_buffers(B, 4 * _pow2(NP) * CP, dev, tag))

    def rev_chain_warps(self, nw: int) -> int:
        """Warps of the periodic family's reversed chain (_fwd_kernel NP > 1), given its
        caller's rule `nw`: at most 8. On an H100 (benchmarks/warps_probe.py --sections rev)
        8 warps against the caller's 16 ran the forward 1.21x and the Viterbi 1.47x faster at
        (16, 20000, 1000, 16) (the Viterbi's 32: 1.47x) and the forward 1.09x at the gene shape
        (64, 20000, 256, 37); 4 lost at both (2-8x slower), and at (8, 20000, 100, 24), where
        the rule gives 8, 16 and 32 ran 1.3-2.1x slower."""
        return self.rev_warps or min(nw, 8)

    def end_programs(self, B: int, KP: int, CP: int, NP: int, dev) -> int:
        """Programs per sequence of the end-indexed forward chain (MODE 0): NP (split_end.py)
        on a GPU at CP <= res_planes_max_cp (where the reversed chain's planes are on) with
        2 B NP <= SMs (both directions split, side by side; every program of a split chain
        waits for the others each step, so all must be resident), else 1. On an H200 that
        chain's kernel time went 68.5 -> 49.2 ms at (8, 20000, 100, 24) (8 warps) and 141.4
        -> 76.1 ms at (16, 20000, 1000, 16) (16 warps; at 8, fwd+bwd 151.5 against 143.4
        before alpha's row became a masked store; RESULTS-log.md, "The periodic chains' residue
        planes split over programs"); with alpha's row as a tagged word (end_tag) and the
        rows loaded a step ahead (prefetch), 47.3 -> 46.6 and 80.9 -> 69.5 ms (RESULTS-log.md,
        "Tagged exchanges"). Up to split_planes_max_cp the same (the gene shape's 64: 63.0 ->
        35.5 ms at (16, 10000, 256, 37) with sparse tables)."""
        top = max(self.res_planes_max_cp, self.split_planes_max_cp)
        if NP < 2 or CP > top or dev.type != "cuda" or B * NP > _sm_count(dev):
            return 1
        on = 2 * B * NP <= _sm_count(dev) if self.end_split is None else self.end_split
        return NP if on else 1

    def sparse_width(self, x: CRFInputs) -> int:
        """SP of the sparse transition tables (a power of two >= 2 and >= the most finite
        entries into or out of a label at one residue), or 0 for the dense tables: not
        periodic, CP < sparse_from_cp, or SP > sparse_below x CP. Reads the transition's
        finite pattern on the host (one synchronisation), so the caller runs it outside CUDA
        graph capture and a captured graph's key holds it."""
        if not x.periodic or x.duration_dependent:
            return 0
        _, CP = _shape(x)
        if CP < self.sparse_from_cp:
            return 0
        fin = torch.isfinite(x.transition)
        most = int(torch.maximum(fin.sum(2).amax(), fin.sum(1).amax()))
        sp = max(2, _pow2(most))
        return sp if sp <= self.sparse_below * CP else 0


DEFAULT = Tuning.from_env(os.environ.get("SEMISEG_TRITON_TUNING"))
