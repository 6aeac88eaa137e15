"""The max-sum of one long sequence on a CUDA device in certified windows decoded side by
side (issue 42: the posterior decode's Viterbi was one chain of the whole sequence, 17 s
of a 4 Mb fly sequence's 39 s on an H100, benchmarks/annotate_profile.py).

maxsum_windows.py's scheme, with the windows on the device: every window [ws, we) of
`window` steps reaching `overlap` steps into both neighbours is decoded at once from its
*free* entry (periodic.viterbi_tables, one program per window), and where each window's
frontier tracebacks meet is found beside its backpointers (crf/triton/frontier.py:
seams._coalesce on the device), and the traceback from there is walked there too
(frontier.trace). Its labels and the boundaries it passes come to the host, where the
seams are certified in order exactly as maxsum_windows.py does it (its module docstring
has the proof): a window whose traceback from its meeting point (t0, c0) passes the
certified entry (p, e) gives the labels up to t0, and (t0, c0) is the next entry. Where that fails,
the seam is certified from (p, e) as seams.certify_step does it, by a window decoded on
the device from that entry (viterbi_tables' init_rows: the transition out of e), widened
until its tracebacks meet. So the labels are the whole-sequence Viterbi's (ties aside,
as in seams.py), and device memory is bounded by the steps of one call.

Periodic transitions (the gene model's posterior decode) only; no proj_end / end.
"""

from __future__ import annotations

import numpy as np
import torch

from ..crf.inputs import check_inputs
from .long_terms import PeriodicRows
from .seams import SeamStats, check_window, widen_until_certified


class _Calls:
    """The windows' device results (_Decoder.windows), computed a call at a time (calls
    of windows whose count x longest stays within `call_steps`), on the host."""

    def __init__(self, dec: _Decoder, ext: list, call_steps: int):
        self.dec, self.ext, self.done = dec, ext, {}
        self.calls, cur, longest = [], [], 0
        for j, (a, b) in enumerate(ext):
            longest2 = max(longest, b - a)
            if cur and (len(cur) + 1) * longest2 > call_steps:
                self.calls.append(cur)
                cur, longest2 = [], b - a
            cur.append(j)
            longest = longest2
        if cur:
            self.calls.append(cur)
        self.call_of = {j: i for i, c in enumerate(self.calls) for j in c}

    def get(self, j: int):
        if j not in self.done:
            self.done.clear()  # the windows of earlier calls have been passed
            js = self.calls[self.call_of[j]]
            rows = self.dec.windows([self.ext[i] for i in js], [None] * len(js))
            self.done.update(zip(js, rows, strict=True))
        return self.done[j]


class _Decoder:
    """One sequence's max-sum inputs, and its windows decoded on the device."""

    def __init__(self, scores, transition, duration_bias, allowed, proj_start, device):
        self.dev = torch.device(device)
        self.f = scores
        self.T, self.C = scores.shape
        self.tr = torch.as_tensor(transition, dtype=torch.float32, device=self.dev)
        self.db = torch.as_tensor(duration_bias, dtype=torch.float32, device=self.dev)
        self.K = self.db.shape[0]
        self.ok, self.ps = allowed, proj_start

    def _rows(self, x, idx: torch.Tensor):
        if x is None:
            return None
        if isinstance(x, PeriodicRows):
            return x.pattern.to(self.dev)[idx % x.pattern.shape[0]]
        x = torch.as_tensor(x)
        if x.device.type == self.dev.type:
            return x[idx]
        return x[idx.cpu()].to(self.dev)

    def windows(self, spans: list, entries: list):
        """Decode windows spans [(a, b)] at once, each from its entry (None: free, or the
        sequence start at a = 0; e >= 0: after a segment of label e). Returns per window
        (a, n, labels, starts, t0, c0): (t0, c0) the frontier's meeting point, or at the
        sequence end the last boundary and best label (c0 -1: no allowed path);
        labels (n,) and starts (n + 1,) the traceback from there (frontier.trace)."""
        from ..crf.triton import DEFAULT, periodic
        from ..crf.triton.frontier import coalesce, trace
        from ..crf.triton.schedule import _pow2

        lens = [b - a for a, b in spans]
        B, n = len(spans), max(lens)
        start = torch.tensor([a for a, _ in spans], device=self.dev)
        idx = (start[:, None] + torch.arange(n, device=self.dev)).clamp(max=self.T - 1)
        lengths = torch.tensor(lens, device=self.dev)
        x = check_inputs(self._rows(self.f, idx), self.tr, self.db, lengths,
                         allowed=self._rows(self.ok, idx), proj_start=self._rows(self.ps, idx))
        NPP, CP = _pow2(self.tr.shape[0]), _pow2(self.C)
        init = torch.full((B, NPP, CP), float("-inf"), device=self.dev)
        for i, e in enumerate(entries):
            if e is None:
                init[i, :self.tr.shape[0], :self.C] = 0.0  # free (zeros: no start scores)
            else:
                init[i, :self.tr.shape[0], :self.C] = self.tr[:, e, :]
        t = DEFAULT
        sp = t.sparse_width(x) if t.sparse_viterbi else 0
        bp_d, bp_c, a_end = periodic.viterbi_tables(t, x, sp, init)
        tops = coalesce(bp_d, bp_c, lengths, (lengths - self.K).clamp(min=1))
        # at the sequence end: the last boundary and its best label (end scores 0)
        last = a_end[:, :self.C]
        best = last.argmax(-1)
        ok = torch.isfinite(last.gather(1, best[:, None])[:, 0])
        at_end = (start + lengths) == self.T
        tops[:, 0] = torch.where(at_end, lengths, tops[:, 0])
        tops[:, 1] = torch.where(at_end, torch.where(ok, best, -1), tops[:, 1])
        labels, starts = trace(bp_d, bp_c, tops)
        tops, labels, starts = tops.cpu().numpy(), labels.cpu().numpy(), starts.cpu().numpy()
        return [(a, lens[i], labels[i], starts[i], int(tops[i, 0]), int(tops[i, 1]))
                for i, (a, _) in enumerate(spans)]


def device_certified_viterbi(scores, transition, duration_bias, *, allowed=None,
                             proj_start=None, window: int, overlap: int, call_steps: int,
                             device, stats: SeamStats | None = None,
                             progress=None) -> np.ndarray:
    """maxsum_windows.parallel_certified_viterbi's labels (T,) int64 (-1 everywhere where
    no segmentation is allowed) from windows decoded side by side on `device` (module
    docstring), calls of at most `call_steps` steps. scores (T, C) float32 and allowed
    (T, C) bool on the device or the host, proj_start (T, C) or PeriodicRows, transition
    (Q, C, C), duration_bias (K, C). Seams certified from the side-by-side windows count
    in stats.side, the others as seams.certify_step counts them."""
    check_window(window, overlap)
    stats = stats if stats is not None else SeamStats()
    dec = _Decoder(scores, transition, duration_bias, allowed, proj_start, device)
    T = dec.T
    ext = [(max(0, a - overlap), min(T, a + window + overlap)) for a in range(0, T, window)]
    calls = _Calls(dec, ext, max(call_steps, window + 2 * overlap))
    labels = np.full(T, -1, np.int64)
    p, e, k = 0, -1, 0
    while p < T:
        while k < len(ext) and ext[k][1] < T and _reach(calls.get(k)) <= p:
            k += 1  # passed: it cannot certify beyond p
        w = calls.get(k) if k < len(ext) else None
        if w is not None and _through(w, p, e):
            ws, n, lab, _, t0, c0 = w
            labels[p:ws + t0] = lab[p - ws:t0]
            p, e = ws + t0, (c0 if ws + n < T else -1)
            if p < T:
                stats.side += 1
                stats.points.append((p, e))
        else:
            p, e = _certify_step(dec, p, e, labels, window, overlap, stats)
            if p < 0:
                return np.full(T, -1, np.int64)
        if progress is not None and p < T:
            progress(p / T)
    return labels


def _reach(w) -> int:
    """The boundary window w can certify up to (its start where its tracebacks do not
    meet or nothing is allowed)."""
    ws, _, _, _, t0, c0 = w
    return ws + t0 if t0 > 0 and c0 >= 0 else ws


def _through(w, p: int, e: int) -> bool:
    """Whether w, decoded from its free entry, certifies from the entry (p, e): it starts
    before p (or at the sequence start, p = 0) and its traceback from its meeting point
    passes (p, e): a segment starts at p and the one before it has label e
    (maxsum_windows.py's proof)."""
    ws, _, lab, starts, t0, c0 = w
    if not (0 < ws < p or ws == p == 0) or t0 <= p - ws or c0 < 0:
        return False
    j = p - ws
    return j == 0 or (bool(starts[j]) and int(lab[j - 1]) == e)


def _certify_step(dec: _Decoder, p: int, e: int, labels: np.ndarray, window: int,
                  overlap: int, stats: SeamStats) -> tuple[int, int]:
    """seams.certify_step with the window decoded on the device from the entry (p, e)
    (seams.widen_until_certified): the next certified (p', e'), its labels written;
    (T, -1) at the sequence end, (-1, -1) where no segmentation is allowed."""

    def decode(we):
        ((_, n, lab, _, t0, c0),) = dec.windows([(p, we)], [None if p == 0 else e])

        def fill(t, c, out):  # the window's traceback from (t, c) = (t0, c0) or (n, c0)
            out[:t] = lab[:t]

        return n, t0, c0, fill, None

    t0, c0, _ = widen_until_certified(decode, p, dec.T, window, overlap, labels, stats)
    if p + t0 == dec.T:
        return (-1, -1) if c0 < 0 else (dec.T, -1)
    return p + t0, c0
