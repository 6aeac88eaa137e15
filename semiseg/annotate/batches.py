"""How `semiseg annotate` cuts work into semi-CRF calls: batches of short contigs, the
decoding windows of a long sequence, and how many windows go into one call."""

from __future__ import annotations

import numpy as np
import torch


def groups(items: list, res: int, window: int, max_steps: int, batch_steps: int):
    """Consecutive short items (each with .start, .end) batched together; long items
    alone."""
    group: list = []
    total = 0
    for it in items:
        L = it.end - it.start
        steps = -(-L // res)
        short = L <= window and steps <= max_steps and steps <= batch_steps
        if not short:
            if group:
                yield group
                group, total = [], 0
            yield [it]
            continue
        if group and (len(group) + 1) * max(total, steps) > batch_steps:
            yield group
            group, total = [], 0
        group.append(it)
        total = max(total, steps)
    if group:
        yield group


def default_overlap(max_steps: int, K: int) -> int:
    """Steps by which decoding windows overlap when annotate.decode_overlap is 0: 8 K (a
    window's kept centre then has 4 K of context on each side), at most a quarter of a
    window. On yeast chrI and chrII the gene model (K = 256) decoded in windows of 20,000
    steps overlapping by 1,000 or 2,000 steps gave the whole-chromosome labels at every
    base; by 500, 47 bases differed (benchmarks/RESULTS-log.md, "Annotation on one H100:
    decoding windows ...")."""
    return max(1, min(max_steps // 4, 8 * K))


def _context(W: int, overlap: int) -> int:
    """Steps of context on each side of a window's kept centre: half the overlap, which
    is at most W - 1."""
    return min(W - 1, overlap) // 2


def windows(S: int, W: int, overlap: int) -> list[tuple[int, int, int, int]]:
    """Decoding windows of at most W steps over S steps: (cs, ce, ws, we) = the kept
    centre [cs, ce) and the window [ws, we), neighbours overlapping by ~`overlap`."""
    half = _context(W, overlap) if W < S else 0
    core = W - 2 * half
    out = []
    for cs in range(0, S, core):
        ce = min(cs + core, S)
        out.append((cs, ce, max(0, cs - half), min(S, ce + half)))
    return out


def gpu_windows(S: int, W: int, overlap: int, per_call: int, sms: int):
    """Decoding windows for a GPU with `sms` SMs, `per_call` windows per semi-CRF call:
    among window counts from the fewest (windows(S, W, overlap)) up to the next multiple
    of per_call, each with its windows as short as it allows, the one with the least
    modelled time. Model: the kernels run one program per window and direction, one per
    SM, so a call of b windows, the longest T steps, takes ~T ceil(2 b / sms)
    step-times. E.g. 2.5 M steps, W 20,000, overlap 2,048, 132 SMs: 140 windows of
    20,000 (calls of 132 + 8: 3 x 20,000) become 198 of 14,674 (132 + 66: 3 x 14,674)."""
    fewest = windows(S, W, overlap)
    n0 = len(fewest)
    if n0 <= 1 or per_call < 1:
        return fewest
    half = _context(W, overlap)
    ov = 2 * half

    def cost(core):
        cs = np.arange(0, S, core)
        length = np.minimum(S, np.minimum(cs + core, S) + half) - np.maximum(0, cs - half)
        first = np.arange(0, len(cs), per_call)
        b = np.diff(np.append(first, len(cs)))
        return int((np.maximum.reduceat(length, first) * -(-2 * b // sms)).sum())

    core0 = W - ov  # the fewest windows' core
    cores = sorted({core0} | {-(-S // n) for n in range(n0, -(-n0 // per_call) * per_call + 1)},
                   reverse=True)  # the fewest windows first: ties keep fewer
    best = min(cores, key=cost)
    return fewest if best >= core0 else windows(S, best + ov, overlap)


def windows_per_call(k: int, sms: int | None) -> int:
    """Decoding windows per semi-CRF call from the batch_steps budget (k windows): on a
    GPU (`sms` SMs; None elsewhere) with at least as many as its SMs, a multiple of the
    SM count (rounded down). The kernels run one program per sequence and direction, so a
    batch that is a multiple of the SMs fills every round of programs: on an H100 (132
    SMs) the gene model's decode of 132 windows of 20,000 steps ran 1.52 M steps/s
    against 1.26 M for 100 windows (benchmarks/RESULTS-log.md, "Annotation on one H100:
    decoding windows ...")."""
    if sms and k >= sms:
        return k // sms * sms
    return max(1, k)


def plan(S: int, W: int, overlap: int, k: int, device: torch.device):
    """(windows, windows per call) to decode S steps in windows of at most W steps on
    `device`, k windows per call at most: on a GPU, calls that fill its SMs and window
    counts that leave no short call (gpu_windows); elsewhere the fewest windows (a CPU's
    time is the number of steps)."""
    if device.type != "cuda":
        return windows(S, W, overlap), windows_per_call(k, None)
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    per_call = windows_per_call(k, sms)
    return gpu_windows(S, W, overlap, per_call, sms), per_call
