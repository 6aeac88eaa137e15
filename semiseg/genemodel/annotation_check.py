"""Before the first epoch: is every window's gold path one the gene model allows?

The gene model's loss is log Z - log Z(gold), where log Z(gold) sums over the
segmentations that agree with the window's gold codes and obey the grammar (periodic
transitions, fixed codon and splice-site durations, the sequence's own stop / start
codons and GT..AG sites). Where none does, log Z(gold) = -inf and the loss is infinite.
The annotation clean-up (genome/cleanup.py) removes the structures it knows the grammar
forbids; this check asks the model itself, over the same terms and gold mask as the
loss's constrained log-partition (FrameHead._terms, as FrameHead.nll calls it), on the
sequence alone: a fresh head, zero emissions, so only the masks decide whether a
segmentation exists. It runs the max-sum (crf.viterbi), whose best score is -inf
exactly where that log-partition is, at half its cost. Learned scores are finite, so a
window that passes here has a finite loss with any parameters. Only each window's gene
pieces (gene_pieces: long runs of known intergenic bases cut out, exactly) go through
it, each distinct piece once (the tilings of windows.phases repeat many).

A window that fails is localised: the kept gene spans (cleanup.Cleanup.spans) that
overlap it are masked (unknown) together, then unmasked one by one while the window
stays allowed; those left are the offending transcripts, masked on the chromosome's gold
codes (every window that reads them sees it) and named in the log. A window still not
allowed with all of them masked is dropped. Training runs the check on the CPU (the
numba backend, float64); `check_gold_paths` takes another device.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
import torch

from .. import ui
from ..genome.cleanup import GOLD_PATH, Cleanup, Removed
from .frames import UNKNOWN


def fresh_head(layout, max_duration: int):
    """A FrameHead with every learned score 0: only the grammar's masks are left."""
    from .head import FrameHead

    return FrameHead(layout, max_duration)


def gold_best(head, x: torch.Tensor, lengths: torch.Tensor, y: torch.Tensor,
              backend: str = "auto") -> torch.Tensor:
    """The best gold-constrained segmentation's score (B,) of padded features x (B, T, F;
    the first four columns are the one-hot sequence, as the Segmenter reads them) and
    gold codes y (B, T), -1 padded, with zero emissions: -inf exactly where log Z(gold),
    the constrained half of FrameHead.nll over the same terms and mask, is -inf (the
    max and the log-sum-exp of a set of finite path scores are finite alike). The
    max-sum, not the log-partition, because it is the cheaper pass: 33.5 s against
    68.9 s for the fly config's windows on the 2-core CPU."""
    B, T, _ = x.shape
    em = torch.cat([torch.zeros(B, T, head.n_channels, dtype=torch.float32, device=x.device),
                    x[..., :4].to(torch.float32)], -1)
    with torch.no_grad():
        t = head._terms(em, lengths)
        gold = torch.as_tensor(head.layout.gold_mask(y.cpu().numpy()),
                               device=x.device) & t["allowed"]
        pad = torch.arange(T, device=x.device)[None, :] >= lengths[:, None]
        gold |= pad[..., None]
        from ..crf import viterbi

        return viterbi(t["scores"], t["transition"], t["duration_bias"], lengths,
                       start=t["start"], end=t["end"], proj_start=t["proj_start"],
                       allowed=gold, backend=backend).score


MARGIN = 4  # bases of known outside code on each side of a cut (a codon's reach is 2)


def gene_pieces(layout, y: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) pieces of a window's gold codes `y` that decide whether its gold path
    is allowed: every run of more than 2 * MARGIN known outside codes (intergenic, UTR:
    one exact outside label) is cut out but for MARGIN bases at each end, and pieces
    without a gene code are left out. Exact: an outside label may end and begin
    anywhere (outside -> outside is allowed at every duration and the sequence never
    forbids it), so the window's gold path exists iff each piece's does; and a cut
    MARGIN bases from every gene code leaves the sequence mask of the gene bases as it
    is in the window (a codon reaches 2 bases, a splice base 1). Unknown stretches are
    never cut (a gene may run through them)."""
    outside = np.asarray([f < 0 for f in layout.frame] + [False])
    y = np.asarray(y, np.int64)
    known_out = (y >= 0) & outside[np.where(y >= 0, y, len(layout))]
    gene = ((y >= 0) & ~known_out) | (y <= -2)  # INTRON_ANY codes are negative too
    d = np.diff(np.concatenate([[0], known_out.astype(np.int8), [0]]))
    pieces, a = [], 0
    for s, e in zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()):
        if e - s > 2 * MARGIN:
            pieces.append((a, s + MARGIN if s > 0 else 0))
            a = e - MARGIN if e < len(y) else len(y)
    pieces.append((a, len(y)))
    cum = np.concatenate([[0], np.cumsum(gene)])
    return [(a, b) for a, b in pieces if b > a and cum[b] > cum[a]]


def _key(xp: np.ndarray, yp: np.ndarray) -> bytes:
    """A digest of a gene piece's inputs (one-hot sequence, gold codes): pieces with the
    same digest have the same answer (the check reads nothing else of them)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(xp, np.float32).tobytes())
    h.update(np.ascontiguousarray(yp, np.int64).tobytes())
    return h.digest()


class _Checker:
    def __init__(self, head, device, batch: int):
        self.head, self.device, self.batch = head, device, batch
        self.calls = 0
        self.bases = 0  # bases run through the max-sum
        self.pieces = 0  # gene pieces asked about, and of them answered by `known`
        self.reused = 0
        self.known: dict[bytes, bool] = {}  # _key -> allowed

    def allowed(self, ds, idx: list[int]) -> np.ndarray:
        """(len(idx),) bool: whether each window's gold path is allowed, in both
        orientations where the Dataset flips strands (training augmentation), from its
        gene pieces (gene_pieces) as sequences of their own, batched by length. A piece
        already answered (the same bases and codes in another window: the tilings of
        windows.phases repeat most pieces) is not run again."""
        lay = self.head.layout
        want: dict[bytes, list[int]] = {}  # piece -> positions in idx that read it
        items = []  # (key, one-hot (T, 4), gold codes relative to the piece), new pieces
        for k, j in enumerate(idx):
            x, y = ds.x[j], np.asarray(ds.y[j], np.int64)
            flip = ds.rc_columns is not None and len(x) % ds.pool == 0
            for a, b in gene_pieces(lay, y):
                yp = lay.shift(y[a:b], a)
                both = [(x[a:b, :4], yp)]
                if flip:  # as Dataset.batch flips a window
                    both.append((x[a:b][::-1][:, ds.rc_columns][:, :4], ds.rc_labels(yp)))
                for xp, yq in both:
                    key = _key(xp, yq)
                    self.pieces += 1
                    if key in self.known or key in want:
                        self.reused += 1
                    else:
                        items.append((key, xp, yq))
                    want.setdefault(key, []).append(k)
        items.sort(key=lambda it: len(it[2]))
        for i in range(0, len(items), self.batch):
            part = items[i:i + self.batch]
            T = len(part[-1][2])
            x = torch.zeros(len(part), T, 4)
            y = torch.full((len(part), T), -1, dtype=torch.int64)
            for r, (_, xp, yp) in enumerate(part):
                x[r, :len(yp)] = torch.from_numpy(np.ascontiguousarray(xp, np.float32))
                y[r, :len(yp)] = torch.from_numpy(np.asarray(yp, np.int64))
            lengths = torch.tensor([len(it[2]) for it in part])
            z = gold_best(self.head, x.to(self.device), lengths.to(self.device),
                          y.to(self.device))
            self.calls += 1
            self.bases += int(lengths.sum())
            for (key, _, _), fin in zip(part, torch.isfinite(z).cpu().tolist()):
                self.known[key] = fin
        ok = np.ones(len(idx), bool)
        for key, ks in want.items():
            if not self.known[key]:
                ok[ks] = False
        return ok


def check_gold_paths(gold, datasets, cleanup: Cleanup | None, max_duration: int,
                     device: str | torch.device = "cpu", batch: int = 16,
                     tails: bool = False) -> dict:
    """Check (and repair) every window of `datasets` (train.data.Dataset with gold
    frame codes from `gold`, a frames.FrameGold); updates the Datasets' labels, drops
    windows that cannot be repaired, records both in `cleanup` and returns
    {"windows", "failed", "masked", "dropped", "bases" (run through the max-sum),
    "pieces" (gene pieces asked about), "reused" (of them, answered by an identical one),
    "seconds", "cpu_seconds"}. `tails`: check under the grammar with run tails
    (crf.run_tails), the one such a model's loss uses."""
    t0, c0 = time.perf_counter(), time.process_time()
    device = torch.device(device)
    layout = gold.layout
    if tails:  # the model's own grammar (crf.run_tails): the gold codes are the same
        import copy

        layout = copy.deepcopy(layout)
        layout.add_tails()
    head = fresh_head(layout, max_duration).to(device)
    chk = _Checker(head, device, batch)
    cleanup = cleanup if cleanup is not None else Cleanup()
    n_windows = sum(len(ds) for ds in datasets)
    failed = []
    for ds in datasets:
        ok = chk.allowed(ds, list(range(len(ds))))
        failed += [(ds, int(i)) for i in np.flatnonzero(~ok)]
    masked: dict[str, list] = {}  # chrom -> [(lo, hi)] masked here
    drop: dict[int, set] = {}  # id(ds) -> window indices
    for ds, i in failed:
        w = ds.windows[i]
        culprits = _localise(chk, gold, ds, i, cleanup)
        if culprits is None:
            drop.setdefault(id(ds), set()).add(i)
            cleanup.dropped_windows.append(f"{w.chrom}:{w.start}-{w.end}")
            continue
        for tid in culprits:
            chrom, lo, hi = cleanup.spans.pop(tid)
            why = _diagnose(gold, ds, i, lo, hi)
            gold.codes[chrom][lo:hi] = UNKNOWN
            masked.setdefault(chrom, []).append((lo, hi))
            cleanup.removed.append(Removed(tid, chrom, lo, hi, GOLD_PATH,
                                           f"window {w.chrom}:{w.start}-{w.end}{why}"))
            cleanup.kept = [t for t in cleanup.kept if t.id != tid]
    for ds in datasets:  # every window that reads a masked span gets the new codes
        for j, w in enumerate(ds.windows):
            if any(lo < w.end and hi > w.start for lo, hi in masked.get(w.chrom, [])):
                ds.y[j] = gold.labels(w.chrom, w.start, w.end)
        gone = drop.get(id(ds), set())
        if gone:
            keep = [j for j in range(len(ds)) if j not in gone]
            ds.windows = [ds.windows[j] for j in keep]
            ds.x = [ds.x[j] for j in keep]
            ds.y = [ds.y[j] for j in keep]
    return {"windows": n_windows, "failed": len(failed), "bases": chk.bases,
            "pieces": chk.pieces, "reused": chk.reused,
            "masked": sum(len(v) for v in masked.values()),
            "dropped": sum(len(v) for v in drop.values()),
            "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}


def _localise(chk: _Checker, gold, ds, i: int, cleanup: Cleanup) -> list[str] | None:
    """The kept transcripts whose masking makes window i allowed (a minimal set, found
    by masking all that overlap it and unmasking one at a time), or None."""
    w = ds.windows[i]
    cands = sorted((tid for tid, (c, lo, hi) in cleanup.spans.items()
                    if c == w.chrom and lo < w.end and hi > w.start),
                   key=lambda tid: cleanup.spans[tid][1:])
    base = gold.codes[w.chrom][w.start:w.end]
    saved = ds.y[i]

    def ok(chosen) -> bool:
        codes = base.astype(np.int64)
        for tid in chosen:
            _, lo, hi = cleanup.spans[tid]
            codes[max(lo, w.start) - w.start:min(hi, w.end) - w.start] = UNKNOWN
        ds.y[i] = gold.layout.shift(codes, w.start)
        try:
            return bool(chk.allowed(ds, [i])[0])
        finally:
            ds.y[i] = saved

    if ok([]):  # repaired already by a transcript masked for another window
        return []
    chosen = list(cands)
    if not cands or not ok(chosen):
        return None
    for tid in cands:
        rest = [c for c in chosen if c != tid]
        if ok(rest):
            chosen = rest
    return chosen


def _diagnose(gold, ds, i: int, lo: int, hi: int) -> str:
    """Where the sequence forbids the window's gold codes inside [lo, hi), if anywhere
    (the first such base), as text for the log."""
    from .seqmask import sequence_allowed

    w, lay = ds.windows[i], gold.layout
    onehot = ds.x[i][:, :4]
    codes = np.where(onehot.max(-1) > 0.5, onehot.argmax(-1), 4).astype(np.int64)
    allowed = sequence_allowed(lay, torch.as_tensor(codes)).numpy()
    y = np.asarray(ds.y[i])
    a, b = max(lo, w.start) - w.start, min(hi, w.end) - w.start
    bad = np.flatnonzero(~(lay.gold_mask(y[a:b]) & allowed[a:b]).any(-1))
    if not len(bad):
        return "; a structure the grammar forbids"
    p = a + int(bad[0])
    return f"; {lay.names[y[p]]} at {w.chrom}:{w.start + p} is not allowed by the sequence"


def report(stats: dict, cleanup: Cleanup) -> None:
    """The check's log lines."""
    ui.log(f"gold-path check: {stats['windows']} windows against the model's grammar in "
           f"{stats['seconds']:.1f} s ({stats['cpu_seconds']:.1f} s CPU): "
           f"{stats['failed']} not allowed"
           + (f", {stats['masked']} transcript(s) masked, {stats['dropped']} window(s) "
              "dropped" if stats["failed"] else ""))
