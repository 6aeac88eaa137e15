"""The gene model's posterior decode of a long sequence in windows (issue 42;
docs/decoding.md): posteriors from overlapping windows, each seam checked, then the
posterior decode's max-sum over the stitched posteriors, in windows decoded side by side
and certified in order: on a CUDA device there (device_maxsum.py), else on the host's
cores (maxsum_windows.py, seams.py), or whole on a CPU whose posteriors went whole, up
to DEVICE_MAXSUM steps. A sequence longer than TERMS_CHUNK has its head terms,
marginals and max-sum scores computed in chunks (long_terms.py), so device memory does
not grow with it.

The gene model decodes by a max-sum over internal-label posteriors under the grammar's
masks (genemodel/head.FrameHead._decode_posteriors), so seams.certified_viterbi
certifies that decode's seams over stitched posteriors. The posteriors themselves come
from overlapping windows. Every seam is certified from the two windows' and their
intersection's boundary marginals (posterior_bound.py; docs/decoding.md): at the cut
chosen, every stitched posterior is proved within `tol` of the two windows' posteriors
decoded as one window; where no cut is, the overlap at that seam is doubled (its two
windows again), and past `max_widen` doublings the two windows become one.
"""

from __future__ import annotations

import numpy as np
import torch

from ..runtime import release_freed_memory
from . import posterior_bound, spill
from .device_maxsum import device_certified_viterbi
from .long_terms import PeriodicRows, chunked_terms, rows_of
from .maxsum_windows import parallel_certified_viterbi
from .posterior_bound import WindowPass, posteriors_and_ends
from .seams import POSTERIOR_TOL, SeamStats

# A seam whose bound exceeds this at the first width is a dependence reaching far past
# the overlap, not rounding: the sequence's posteriors are computed whole at once
# instead of after max_widen doublings that would not close it. Only the time depends
# on it (either way the result is the whole-sequence one or certified within
# POSTERIOR_TOL). Measured (docs/decoding.md): yeast chrII's first-width failures were
# at most 3.5e-3 and closed on widening; fly's reached 0.4-0.87 and stayed above 0.05
# at 4x the overlap (16,384 steps).
POSTERIOR_FAR = 0.05
# On a CUDA device the gene model's long sequences are decoded in posterior windows of
# at most GPU_WINDOW steps, GPU_STEPS steps of windows a call (long_window)
GPU_WINDOW = 65_536
GPU_STEPS = 2_621_440
# On a CPU they are at most CPU_WINDOW steps, and a sequence goes whole at once (the
# far-seam shortcut of stitched_posteriors) only up to twice that: the host's posterior
# pass holds ~2.1 KB a step of the fly gene model (the numba backend's float64 rows)
# beside ~0.5 KB a step of head terms, and 4 Mb of fly (two windows of max_decode_steps,
# a far seam, then the whole sequence) was killed for memory on a 24 GB machine
# (RESULTS-log.md, "Host memory of the CPU's certified decode").
CPU_WINDOW = 1_048_576
# ... and at most SPILL_WINDOW steps while a sequence's arrays are in files (spill.py):
# the window's own pass (~3.1 KB a step of fly, twice that where a seam merges two) is
# then most of the memory the run takes; 8 Mb of fly spilled with windows of 1,048,576
# steps peaked at 6.7 GB of its own memory
SPILL_WINDOW = 524_288
# On a CUDA device a seam that does not certify at the first width merges its two
# windows at once (no doubling first): the posterior calls are latency-bound chains, so
# each round costs its longest window's length whatever the windows' number, and rounds
# of doubling that end in a merge anyway cost more than the merge. 4 Mb of fly on an
# H200 (benchmarks/fly_decode_profile.py --max-widen 2,1,0,2,0): the posteriors took
# 21.9 and 19.8 s with 2 doublings, 17.2 with 1, 15.0 and 16.4 with none (the same bound
# and the same largest difference from the whole sequence's). On a CPU (throughput-bound)
# windows stay within max_decode_steps as long as doubling can close a seam: 2 doublings.
GPU_MAX_WIDEN = 0
CPU_MAX_WIDEN = 2
# On a CUDA device a call of a merge round takes GPU_MERGE_FACTOR times the first
# width's steps: its windows are few and long, and the call's time is its longest
# chain's whatever their number (4 Mb of fly: 13 merged windows of ~400 k steps ran as
# two calls of ~7 s each; RESULTS-log.md, "Posterior windows and overlaps on the GPU").
# 2: on an H100, 4 Mb of fly in 10.85 s against 11.36 s at 1 (medians of 4 alternating
# runs), the same BED and GFF3 rows, peak device memory 9.15 against 8.27 GiB
# (benchmarks/gpu_merge_factor.py; RESULTS.md, "Annotate throughput and memory")
GPU_MERGE_FACTOR = 2
# The longest sequence whose head terms stay on a CUDA device (_whole_terms), and whose
# whole-sequence max-sum runs on a CPU whose posteriors went whole (its backpointers and
# scores take ~1.4 KB a step); on a CUDA device the max-sum runs in certified windows
# side by side there (device_maxsum.py), in calls of a bounded number of steps
DEVICE_MAXSUM = 4_194_304
# The host's max-sum windows (maxsum_windows.py) are at most this long: each window in
# flight holds its max-sum scores and backpointers (~1.2 KB a step of the fly model), and
# 2 x threads of them run ahead, so windows of the CPU's 1,048,576-step posterior windows
# took the max-sum of 2.4 Mb of fly to a 17.2 GB peak; 65,536 is the length measured on
# the 2-core CPU (benchmarks/maxsum_windows_cpu.py: 128,953 steps/s on 2 threads)
HOST_MAXSUM_WINDOW = 65_536
# A long sequence's head terms are computed this many steps at a time (long_terms.py),
# each chunk reading TERMS_CONTEXT steps (or more, to the ORFs' ends) on either side;
# computed whole they peaked at ~1.9 KB a step (22 GB for 12 Mb of fly on a GPU)
TERMS_CHUNK = 2_097_152
# ... and SPILL_CHUNK while the sequence's arrays are in files (spill.py): a chunk's
# terms' temporaries (~2 KB a step of fly) were then the run's peak (4.8 GB of its own
# memory for 8 Mb of fly in chunks of TERMS_CHUNK)
SPILL_CHUNK = 262_144
TERMS_CONTEXT = 32_768


def _chunk() -> int:
    """The steps of a long sequence's chunks of terms, marginals and scores: TERMS_CHUNK,
    at most SPILL_CHUNK while its arrays are in files."""
    return min(TERMS_CHUNK, SPILL_CHUNK) if spill.active() else TERMS_CHUNK


def posterior_windows(S: int, W: int, overlap: int, period: int = 1):
    """(cs, ce, ws, we) windows over S steps: kept centres [cs, ce) of W - overlap steps
    (the last may be shorter), each window reaching about overlap / 2 past its centre on
    both sides, every window start a multiple of `period` (frames of the gene model)."""
    half = max(1, overlap // 2)
    core = max(1, W - 2 * half)
    out = []
    for cs in range(0, S, core):
        ce = min(cs + core, S)
        ws = max(0, cs - half)
        ws -= ws % period
        out.append((cs, ce, ws, min(S, ce + half)))
    return out


def stitched_posteriors(head, em: torch.Tensor, W: int, overlap: int, per_call: int,
                        tol: float = POSTERIOR_TOL, max_widen: int = 2,
                        stats: SeamStats | None = None, backend: str = "auto",
                        progress=None, far: float = POSTERIOR_FAR,
                        probe: int | None = None, windows_out: list | None = None,
                        whole_cap: int | None = None, merge_factor: int = 1):
    """The gene model's internal-label posteriors (S, C), `allowed` (S, C) and
    `proj_start` (S, C) of one long sequence from overlapping windows, every seam
    certified (module docstring; seams may cut within half of each neighbouring
    window's kept span of their place, so they stay in order). `windows_out`, when
    given, receives the final windows as (kept start, kept end, start, end).

    Long windows (W > 2 * `probe`, 4 x the overlap by default): the first seam is tried
    first with two short windows reaching `probe` steps to either side of it; if even
    they certify no cut and their bound exceeds `far`, or a seam of the full windows
    does at the first width, the sequence is computed whole at once
    (widening or merging windows that long costs as much), if it has at most
    `whole_cap` steps (None: any length); else its seams widen and merge as any other's.
    A later round's calls (widened, merged windows) take `merge_factor` x the first's
    steps. Only the time (and memory) depends on probe, far, whole_cap, merge_factor."""
    stats = stats if stats is not None else SeamStats()
    S = em.shape[0]
    terms = _whole_terms(head, em)  # each window's terms are sliced from these
    release_freed_memory()  # the terms' temporaries (runtime.py)
    wins = posterior_windows(S, W, overlap, period=3)
    K = terms["duration_bias"].shape[0]

    def whole(report=True):  # (report: progress, where no window reported it yet)
        return _whole(head, terms, stats, windows_out, backend,
                      progress if report else None)

    if len(wins) == 1:
        return whole()
    probe = 4 * overlap if probe is None else probe
    long_windows = W > 2 * probe and (whole_cap is None or S <= whole_cap)
    if long_windows:
        cut, d = _probe_first_seam(head, terms, wins, overlap, probe, backend, tol)
        if cut is None and not d <= far:
            stats.post_whole += len(wins) - 1
            stats.post_probes.append(d)
            return whole()
    # a call's steps: per_call windows of the first width (widened ones go fewer a call)
    call_steps = per_call * max(we - ws for _, _, ws, we in wins)
    # the windows' extents [ws, we); per seam: where it may cut (fixed, so seams stay in
    # order), its place, overlap and widenings
    span = [[cs, ce] for cs, ce, _, _ in wins]
    ext = [[ws, we] for _, _, ws, we in wins]
    rng = [_seam_range(span, b) for b in range(len(wins) - 1)]
    at = [span[b + 1][0] for b in range(len(wins) - 1)]
    seam_ov = [overlap] * (len(wins) - 1)
    widened = [0] * (len(wins) - 1)
    cache: dict = {}  # extent -> WindowPass (windows and their intersections)
    checked: dict = {}  # (seam range, both extents) -> (cut or None, bound)

    def check(b):
        key = (*rng[b], *ext[b], *ext[b + 1])
        if key not in checked:
            checked[key] = posterior_bound.seam_cut(
                *rng[b], K, cache[tuple(ext[b])], cache[tuple(ext[b + 1])],
                cache[(ext[b + 1][0], ext[b][1])], tol)
        return checked[key]

    first = True
    while True:
        keep = _seam_rows(ext)
        cache = {k: w for k, w in cache.items() if k in keep and _covers(w, *keep[k])}
        _compute_ext(head, terms, [e for e in keep if e not in cache], cache, call_steps
                     * (1 if first else merge_factor), backend, progress if first else None, keep)
        res = [check(b) for b in range(len(ext) - 1)]
        bad = [b for b, (cut, _) in enumerate(res) if cut is None]
        if first:
            stats.post_first += len(res) - len(bad)
            stats.post_first_diffs += [d for _, d in res]
            first = False
            if long_windows and any(not res[b][1] <= far for b in bad):
                stats.post_whole += len(bad)
                return whole(report=False)
        if not bad:
            break
        for b in reversed(bad):  # right to left: a merge shifts the seams after it
            grown = _widened(ext, b, at[b], seam_ov[b], S) if widened[b] < max_widen else None
            if grown is not None:
                widened[b] += 1
                seam_ov[b] *= 2
                ext[b][1], ext[b + 1][0] = grown
            else:  # windows b and b + 1 become one: that seam is decoded as one
                stats.post_whole += 1
                ext[b] = [ext[b][0], ext[b + 1][1]]
                del ext[b + 1], rng[b], at[b], seam_ov[b], widened[b]
        if len(ext) == 1:
            return whole(report=False)
    stats.post_widened += sum(1 for w in widened if w) if len(ext) > 1 else 0
    cuts = [cut for cut, _ in res]
    stats.post_max_diff = max([stats.post_max_diff, *(d for _, d in res)])
    final = [(0 if i == 0 else cuts[i - 1], S if i == len(ext) - 1 else cuts[i], *ext[i])
             for i in range(len(ext))]
    cache = {k: w for k, w in cache.items() if list(k) in ext}  # no intersections
    if windows_out is not None:
        windows_out[:] = final
    return _stitch_final(cache, final, S, terms)


def _widened(ext, b: int, at: int, seam_ov: int, S: int):
    """Seam b's two windows reaching twice as far across it (its overlap seam_ov
    doubled): (the left window's new end, the right window's new start), or None where
    the right window would then start before the left one or the left end after the
    right one (their intersection must be [right start, left end), as posterior_bound
    reads it; an overlap near half the window allows it): that seam merges instead."""
    ws = max(0, at - seam_ov)
    a_end, b_start = min(S, max(ext[b][1], at + seam_ov)), min(ext[b + 1][0], ws - ws % 3)
    return (a_end, b_start) if ext[b][0] <= b_start and a_end <= ext[b + 1][1] else None


def _whole(head, terms, stats, windows_out, backend, progress):
    """The posteriors of the whole sequence as one window (stitched_posteriors)."""
    S = terms["scores"].shape[1]
    stats.post_seqs_whole += 1
    if windows_out is not None:
        windows_out[:] = [(0, S, 0, S)]
    cache: dict = {}
    _compute_ext(head, terms, [(0, S)], cache, S, backend, progress)
    return _stitch_final(cache, [(0, S, 0, S)], S, terms)


def _seam_range(span, b) -> tuple[int, int]:
    """Where seam b may cut: within half of each neighbouring window's kept span of its
    nominal place, so that the cuts stay in order."""
    m = span[b + 1][0]
    return m - (m - span[b][0]) // 2, m + (span[b + 1][1] - m) // 2


def _seam_rows(ext) -> dict:
    """What the seams of windows with extents `ext` read: extent -> (posteriors kept?,
    the row ranges whose boundary marginals are kept). A window keeps its posteriors
    and its overlaps with its neighbours; each seam's intersection window, all its
    rows (posterior_bound.py)."""
    keep: dict = {}

    def want(e, post, rows):
        old = keep.get(e, (False, []))
        keep[e] = (old[0] or post, old[1] + [rows] if rows else old[1])

    for i, (ws, we) in enumerate(ext):
        want((ws, we), True, None)
        if i + 1 < len(ext):
            inter = (ext[i + 1][0], we)
            want((ws, we), False, inter)
            want(tuple(ext[i + 1]), False, inter)
            want(inter, False, inter)
    return keep


def _covers(w: WindowPass, post: bool, rows: list) -> bool:
    """Whether window pass w holds its posteriors (if `post`) and the boundary marginals
    of each row range in `rows` (a widened neighbour reaches further into a window that
    itself did not change: its pass is computed again)."""
    return (w.post is not None or not post) and all(
        any(a <= lo and hi <= b for a, b in w.ends) for lo, hi in rows)


def _compute_ext(head, terms, exts, cache, call_steps, backend, progress, keep=None):
    """Posterior passes of the windows with extents `exts`, longest first, into
    cache[extent] (a posterior_bound.WindowPass on the host), keeping what `keep` names
    (_seam_rows; default: the posteriors alone, and allowed and proj_start are the whole
    sequence's terms': _stitch_final). A semi-CRF call takes windows while their count
    times the longest stays within `call_steps` (at least one): widened and merged
    windows are longer than the first ones, and as many of them a call as of those took
    27 GB at 50 Mb of fly."""
    keep = keep or {}
    exts = sorted(set(exts), key=lambda e: e[0] - e[1])
    groups, i0 = [], 0
    while i0 < len(exts):
        n = max(1, call_steps // (exts[i0][1] - exts[i0][0]))
        groups.append(exts[i0:i0 + n])
        i0 += n
    done = 0
    for group in groups:
        t = _window_terms(terms, group)
        g, e = posteriors_and_ends(t, backend, any(keep.get(x, (True, []))[1] for x in group))
        del t
        for j, (ws, we) in enumerate(group):  # one copy each, into host memory
            post, rows = keep.get((ws, we), (True, []))
            if any(not ws <= a < b <= we for a, b in rows):  # a bug, not bad input
                raise AssertionError(f"rows {rows} outside window [{ws}, {we})")
            cache[(ws, we)] = WindowPass(
                ws, we, _host_copy(g[j, :we - ws]) if post else None,
                {(a, b): e[j, a - ws:b - ws].to("cpu", copy=True) for a, b in rows})
        del g, e
        done += len(group)
        if progress is not None:
            progress(min(1.0, done / len(exts)))


def _stitch_final(cache, final, S, terms):
    """The posteriors over [0, S) from windows (kept start, kept end, start, end) whose
    extents are in `cache` (emptied as it goes), and the whole sequence's allowed and
    proj_start (PeriodicRows) from its `terms`, all on the host."""
    g0 = cache[tuple(final[0][2:])].post
    g = spill.empty((S, g0.shape[-1]), g0.dtype)
    for cs, ce, ws, we in final:
        g[cs:ce] = cache.pop((ws, we)).post[cs - ws:ce - ws]
    return g, terms["allowed"][0].cpu(), terms["proj_start"].cpu()


def _whole_terms(head, em: torch.Tensor) -> dict:
    """The head's terms of the whole sequence (S, channels), computed once. The windows'
    terms are slices of them: a term reads sequence around its position (the ORF-length
    score reads the whole ORF, codon masks the next bases), so terms computed from a
    window's own bases alone differ near its edges from the whole sequence's, beyond
    what the seam checks compare (a yeast window's last 49 steps: 0.21). A sequence
    longer than TERMS_CHUNK has them computed in chunks, each with context reaching the
    ends of its ORFs (long_terms.py), kept on a CUDA device up to DEVICE_MAXSUM steps
    and in host memory beyond. proj_start is kept as its three rows (PeriodicRows)."""
    with torch.no_grad():
        if em.shape[0] > _chunk():
            return chunked_terms(head, em, _chunk(), TERMS_CONTEXT,
                                 keep_on_device=em.shape[0] <= DEVICE_MAXSUM)
        t = head._terms(em[None], torch.tensor([em.shape[0]], device=em.device))
        t["proj_start"] = PeriodicRows(head.proj_start_pattern().to(em.device), em.shape[0])
        return t


def _window_terms(full: dict, spans) -> dict:
    """The terms of windows [(ws, we)] of the whole sequence's terms `full`: the
    per-position ones sliced and padded to the longest window (past a window's length
    the kernels read nothing), the others shared; on the device of the shared ones (a
    long sequence's per-position terms are in host memory: _whole_terms)."""
    S = full["scores"].shape[1]
    dev = full["transition"].device
    if list(spans) == [(0, S)] and full["scores"].device == dev:
        return dict(full, proj_start=rows_of(full["proj_start"])[None])
    n = max(we - ws for ws, we in spans)
    t = dict(full)
    for key in ("scores", "allowed", "proj_start"):
        x = full[key]
        out = torch.zeros(len(spans), n, x.shape[-1], dtype=x.dtype, device=dev)
        for j, (ws, we) in enumerate(spans):
            rows = x[ws:we] if isinstance(x, PeriodicRows) else x[0, ws:we]
            out[j, :we - ws] = rows.to(dev, non_blocking=True)
        t[key] = out
    t["lengths"] = torch.tensor([we - ws for ws, we in spans], device=dev)
    return t


def _probe_first_seam(head, terms, wins, overlap, probe, backend, tol):
    """posterior_bound.seam_cut of two short windows across the first seam of `wins`:
    [m - probe, m + overlap / 2) and [m - overlap / 2, m + probe), m the seam, starts on
    the frame period (3)."""
    S = terms["scores"].shape[1]
    m, half = wins[1][0], max(1, overlap // 2)
    left = max(0, m - probe)
    left -= left % 3
    right = max(0, m - half)
    right -= right % 3
    ext = [(left, min(S, m + half)), (right, min(S, m + probe))]
    keep = _seam_rows(ext)
    cache: dict = {}
    _compute_ext(head, terms, list(keep), cache, 2 * max(b - a for a, b in ext), backend,
                 None, keep)
    return posterior_bound.seam_cut(right, min(S, m + half), terms["duration_bias"].shape[0],
                     cache[ext[0]], cache[ext[1]], cache[(ext[1][0], ext[0][1])], tol)


def gene_decode(head, em: torch.Tensor, W: int, overlap: int, per_call: int,
                tol: float = POSTERIOR_TOL, stats: SeamStats | None = None,
                backend: str = "auto", progress=None, post_overlap: int | None = None,
                windows_out: list | None = None, max_widen: int = CPU_MAX_WIDEN,
                whole_cap: int | None = None, merge_factor: int = 1):
    """The gene model's posterior decode of one long sequence (S, channels) in certified
    windows: (scheme labels (S,) int64, scheme-label marginals (S, labels), boundary
    marginals (S,)), as FrameHead.decode_with_marginals gives for the whole sequence.
    Posterior windows of W steps overlap by `post_overlap` (default `overlap`), a seam
    not certified doubled up to `max_widen` times before its windows merge; the
    posterior decode's Viterbi runs in certified windows of W steps (at most
    HOST_MAXSUM_WINDOW) reaching `overlap` steps into their neighbours, decoded side by
    side on a CUDA device (device_maxsum.py, calls of per_call x W steps; whole there it
    took 17 s of 4 M steps of fly on an H100) or on the host (maxsum_windows.py; 12 M
    steps of fly in 27.6 s on 16 cores), or whole on a CPU whose posteriors went whole
    (up to DEVICE_MAXSUM steps)."""
    stats = stats if stats is not None else SeamStats()
    S = em.shape[0]
    done = [0.0]

    def part(lo, hi):  # progress(fraction) of the whole decode, never going back
        def report(f):
            done[0] = max(done[0], lo + (hi - lo) * f)
            progress(done[0])
        return None if progress is None else report

    whole_before = stats.post_seqs_whole
    codes = head._stop_codes(em[None], None)
    g, ok, ps = stitched_posteriors(head, em, W, post_overlap or overlap, per_call, tol,
                                    stats=stats, backend=backend, progress=part(0.0, 0.8),
                                    windows_out=windows_out, max_widen=max_widen,
                                    whole_cap=whole_cap, merge_factor=merge_factor)
    release_freed_memory()  # the posterior windows' passes (runtime.py)
    whole = stats.post_seqs_whole > whole_before and em.device.type != "cuda"
    post, bnd = _marginals(head, g, em.device)
    if whole and S <= DEVICE_MAXSUM and torch.get_num_threads() == 1:
        # a CPU of one thread whose posteriors were computed as one window held the
        # whole sequence's posterior pass, whose rows outweigh a Viterbi's backpointers:
        # its Viterbi runs whole too, as the whole decode's does (exact either way).
        # With more threads the certified windows below run side by side: yeast chrII
        # on the 2-core CPU 12.45 -> 12.10 s in one process, the same rows (RESULTS-log,
        # "The CPU's max-sum in windows side by side")
        lab = _device_viterbi(head, g, ok, ps, em.device, backend, codes)
    else:
        scores = _decode_scores(head, g)  # (on g's device)
        del g  # the max-sum and the split stops read the decode's scores only
        if em.device.type == "cuda":
            lab = device_certified_viterbi(
                scores, head.decode_tmask, head.decode_dmask, allowed=ok, proj_start=ps,
                window=min(W, HOST_MAXSUM_WINDOW), overlap=overlap,
                call_steps=per_call * W, device=em.device, stats=stats,
                progress=part(0.8, 1.0))
        else:
            lab, _ = parallel_certified_viterbi(
                scores, head.decode_tmask, head.decode_dmask, allowed=ok,
                proj_start=ps, window=min(W, HOST_MAXSUM_WINDOW), overlap=overlap,
                stats=stats, progress=part(0.8, 1.0))
        if codes is not None:  # as _decode_posteriors does
            from ..genemodel.splitstops import exclude_split_stops
            lab = exclude_split_stops(head, lab, scores, ok, ps, codes[0].cpu().numpy(),
                                      backend, head.split_stop_counts, scored=True)
    lab_t = torch.from_numpy(lab)
    out = torch.where(lab_t >= 0, head.collapse_idx.cpu()[lab_t.clamp(min=0)], lab_t)
    return out.numpy(), post, bnd


def _decode_scores(head, g: torch.Tensor) -> torch.Tensor:
    """head.decode_posteriors of one sequence's posteriors g (S, C) on the host,
    TERMS_CHUNK steps at a time (it is per position; whole it holds three copies)."""
    out = spill.empty(g.shape, g.dtype)
    n = _chunk()
    for a in range(0, g.shape[0], n):
        out[a:a + n] = head.decode_posteriors(g[a:a + n]).cpu()
    return out


def _marginals(head, g: torch.Tensor, device) -> tuple[torch.Tensor, torch.Tensor]:
    """head._marginals_from of one sequence's posteriors g (S, C): scheme-label and
    boundary marginals (S, labels), (S,), computed on `device`; a sequence longer than
    TERMS_CHUNK in chunks (starting on the frame period, each reading the step before
    it for the boundary term), into host memory."""
    S = g.shape[0]
    if S <= _chunk():
        post, bnd = head._marginals_from(g[None].to(device), torch.tensor([S], device=device))
        return post[0], bnd[0]
    n = _chunk()
    step = n - n % 3
    posts = bnds = None
    for a in range(0, S, step):
        lo, b = max(0, a - 3), min(S, a + step)
        post, bnd = head._marginals_from(g[None, lo:b].to(device),
                                         torch.tensor([b - lo], device=device))
        if posts is None:  # (in files while spilling)
            posts, bnds = spill.empty((S, post.shape[-1]), post.dtype), spill.empty(S, bnd.dtype)
        posts[a:b] = post[0, a - lo:]
        bnds[a:b] = bnd[0, a - lo:]
    return posts, bnds


def _device_viterbi(head, g, ok, ps, device, backend: str, codes=None) -> np.ndarray:
    """FrameHead._decode_posteriors of one whole sequence's posteriors g (S, C) on
    `device` (with its bases `codes` (1, S): split stops taken out): internal labels
    (S,) int64."""
    t = {"lengths": torch.tensor([g.shape[0]], device=device),
         "allowed": ok[None].to(device), "proj_start": rows_of(ps)[None].to(device)}
    seg = head._decode_posteriors(t, g[None].to(device), backend, codes)
    return seg.labels[0].cpu().numpy().astype(np.int64)


def _cpu_window(spilling: bool) -> int:
    """The CPU's posterior window: CPU_WINDOW, SPILL_WINDOW while spilling."""
    return SPILL_WINDOW if spilling else CPU_WINDOW


def long_window(ann, spilling: bool | None = None) -> int:
    """Steps of the posterior windows of ann's certified gene decode: ann.max_steps,
    but at most GPU_WINDOW on a CUDA device, where windows side by side in one call run
    far faster than one long chain (4 Mb of fly on an H200: the whole posterior pass
    88 s, windows of 65,536 steps 40 a call 4.3 s; docs/decoding.md), and at most
    CPU_WINDOW on a CPU, whose posterior pass holds the window's rows in host memory
    (SPILL_WINDOW while the sequence's arrays are in files: spill.py; `spilling` None:
    whether they are now)."""
    if ann.device.type == "cuda":
        return min(ann.max_steps, GPU_WINDOW)
    return min(ann.max_steps,
               _cpu_window(spill.active() if spilling is None else spilling))


def annotate_long(ann, em: torch.Tensor, hid):
    """Annotator.decode_long for the gene model in certified windows of long_window(ann)
    steps: (labels (S,), scheme-label posteriors (S, labels), signals (S, 3), windows
    for the run posteriors). Posterior windows overlap by ann.overlap (0: min(W / 4,
    64 K)), the host's Viterbi windows by ann.overlap (0: batches.default_overlap).
    The seam counts are added to ann.seam_stats."""
    from . import batches

    head = ann.model.crf
    W = long_window(ann)
    K = getattr(head, "max_duration", 1)
    ov = ann.overlap or batches.default_overlap(W, K)
    post_ov = ann.overlap or max(1, min(W // 4, 64 * K))
    budget = ann.batch_steps if ann.device.type != "cuda" else max(ann.batch_steps, GPU_STEPS)
    per_call = max(1, budget // W)
    st = SeamStats()
    report = getattr(ann, "_report", None)
    wins: list = []
    labels, post, bnd = gene_decode(
        head, em, W, ov, per_call, stats=st, post_overlap=post_ov, windows_out=wins,
        max_widen=GPU_MAX_WIDEN if ann.device.type == "cuda" else CPU_MAX_WIDEN,
        whole_cap=None if ann.device.type == "cuda" else 2 * _cpu_window(spill.active()),
        merge_factor=GPU_MERGE_FACTOR if ann.device.type == "cuda" else 1,
        progress=None if report is None else (lambda f: report("decode", f)))
    if getattr(ann, "seam_stats", None) is None:
        ann.seam_stats = SeamStats()
    ann.seam_stats.add(st)
    sig = _signals(post, bnd)
    return (labels, post.cpu().numpy().astype(np.float32, copy=False), sig, wins)


def _signals(post: torch.Tensor, bnd: torch.Tensor) -> np.ndarray:
    """The per-step signals (S, 3) of a long sequence's marginals on the host: the
    boundary posterior and the two entropies (per position), TERMS_CHUNK steps at a time
    into one array (in a file while spilling)."""
    from . import uncertainty

    S = post.shape[0]
    sig = spill.np_empty((S, 3), np.float32)
    n = _chunk()
    for a in range(0, S, n):
        p, b = post[a:a + n], bnd[a:a + n]
        sig[a:a + len(p)] = torch.stack([b, *uncertainty.entropy_tracks(p, b)], -1).cpu().numpy()
    return sig


def _host_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of x in host memory (in a file while spilling and big enough)."""
    out = spill.empty(x.shape, x.dtype)
    out.copy_(x)
    return out
