"""The annotator: a trained model ready to annotate (annotate/run.py runs it over a
genome): encoder windows over a sequence (with the reverse strand averaged in),
exact decoding of a sequence whole or in windows (centre-keeping, or certified:
annotate/seams.py), posteriors, samples, and batches of short sequences decoded together.
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from ..checkpoint import Checkpoint, build_model
from ..genome._util import runs
from ..genome.scheme import strand_swap
from ..genome.sequence import rc_columns
from ..model import steps_for
from ..runtime import amp_enabled, release_freed_memory
from . import batches, spill, uncertainty
from .background import ahead


@dataclass
class Item:
    """One sequence to decode: [start, end) of a chromosome."""

    chrom: str
    start: int
    end: int


def _reverse_rows(x: torch.Tensor, end: torch.Tensor, length: torch.Tensor,
                  width: int) -> torch.Tensor:
    """(B, width, F): row b holds x[b, :length[b]] reversed, ending at position end[b]
    (zeros elsewhere): out[b, p] = x[b, end[b] - 1 - p] where that is in [0, length[b])."""
    B, T, F = x.shape
    src = end[:, None] - 1 - torch.arange(width, device=x.device)[None, :]
    ok = (src >= 0) & (src < length[:, None])
    rows = torch.gather(x, 1, src.clamp(0, T - 1)[..., None].expand(B, width, F))
    return torch.where(ok[..., None], rows, torch.zeros((), dtype=x.dtype, device=x.device))


class Annotator:
    """A trained model ready to annotate: encoder windows, decoding, posteriors."""

    def __init__(self, ckpt: Checkpoint, data, device: torch.device, window: int, context: int,
                 max_decode_steps: int, batch_steps: int, reverse_complement: bool = False,
                 samples: int = 0, seed: int = 0, decode_overlap: int = 0,
                 bf16: bool = False, certified_seams: bool = False):
        self.model, self.cfg = build_model(ckpt)
        self.model.to(device).eval()
        self.data = data
        self.columns = ckpt.data["columns"]
        self.device = device
        self.res = self.cfg.model.resolution
        self.bin = self.cfg.inputs.bin_size
        self.window, self.context = window, context
        self.max_steps = max_decode_steps
        if self.cfg.crf.centering == "mean":
            self.max_steps = self.cfg.windows.size // self.res
        self.batch_steps = batch_steps
        self.overlap = decode_overlap  # 0: batches.default_overlap
        # long sequences of the gene model in windows whose seams are proven exact
        # (annotate/seams.py, docs/decoding.md); their counts, summed over sequences
        self.certified, self.seam_stats = certified_seams, None
        # encoder windows per call on a long sequence: the same budget as a batch of
        # short contigs (annotate.batch_steps CRF steps), at least one window
        self.encode_windows = max(1, batch_steps * self.res // window)
        self.io_lock = threading.Lock()  # FASTA and track handles: one reader at a time
        self.samples, self.seed = samples, seed
        self.hinted = False  # the long-chain hint (annotate._annotate_groups) was given
        # progress(stage, fraction) after each encoder chunk ("encode") and semi-CRF call
        # ("decode") of one long sequence (annotate/progress.py), or None
        self.progress = None
        # float32 encoder by default: the same checkpoint gives the same genes on CPU and
        # GPU (bfloat16 moved near-tied fly decisions; docs/gene_model.md); bf16=True
        # trades that for speed where the model was trained with train.amp
        self.amp = bf16 and amp_enabled(self.cfg, device)
        if device.type == "cuda":  # TF32 convolutions round like bfloat16's mantissa
            torch.backends.cudnn.allow_tf32 = bool(self.amp)
            torch.backends.cuda.matmul.allow_tf32 = bool(self.amp)
        self.rc = None
        if reverse_complement:
            swap = (self.model.channel_swap if getattr(self.model, "frames", False) else
                    torch.as_tensor(strand_swap(ckpt.scheme)))
            self.rc = (rc_columns(ckpt.data["feature_names"]), swap.to(device))

    def _load(self, chrom: str, start: int, end: int) -> np.ndarray:
        with self.io_lock:
            feats, _ = self.data.load(chrom, start, end)
        return np.ascontiguousarray(feats[:, self.columns], dtype=np.float32)

    def load_batch(self, regions: list[tuple[str, int, int]]) -> tuple[np.ndarray, list[int]]:
        """Features of several regions, zero-padded to one (B, T, F) array, and lengths."""
        xs = [self._load(*r) for r in regions]
        x = np.zeros((len(xs), max(len(xi) for xi in xs), xs[0].shape[1]), np.float32)
        for i, xi in enumerate(xs):
            x[i, :len(xi)] = xi
        return x, [len(xi) for xi in xs]

    @torch.no_grad()
    def _encode(self, x: np.ndarray, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        xt = torch.from_numpy(x).to(self.device)
        lt = torch.tensor(lengths, dtype=torch.int64, device=self.device)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16,
                            enabled=self.amp):
            em, hid, _ = self.model(xt, lt)
        em = em.float()
        if self.rc is not None:
            em = (em + self._encode_rc(xt, lengths, em.shape[1])) / 2
        return em, (hid.float() if hid is not None else None)

    def _encode_rc(self, xt: torch.Tensor, lengths: list[int], S: int) -> torch.Tensor:
        """Emissions of the reverse complement, mapped back to the forward strand (steps
        reversed, stranded labels swapped). Each sequence is padded to whole CRF steps
        first, so its steps line up with the forward ones. Built on the device, with no
        host sync: each row reads its source position (padded length - 1 - position)."""
        columns, swap = self.rc
        pool = self.model.pool
        steps = [steps_for(n, pool) for n in lengths]
        dev = xt.device
        padded = [n * pool for n in steps]
        pt = torch.tensor(padded, device=dev)
        xr = _reverse_rows(xt, pt, torch.tensor(lengths, device=dev), max(padded))
        xr = xr[..., torch.as_tensor(columns, device=dev)]
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16,
                            enabled=self.amp):
            em_rc, _, _ = self.model(xr, pt)
        em_rc = em_rc.float()[..., swap]
        n = torch.tensor(steps, device=dev)
        return _reverse_rows(em_rc, n, n, width=S)

    def _chunks(self, item: Item) -> list[list[tuple[int, int, int, int]]]:
        """The encoder windows of a sequence longer than one window, in chunks of
        encode_windows: (core start, core end, window start, window end), bp from
        item.start; [] when it is one window."""
        L = item.end - item.start
        core = self.window - 2 * self.context
        if L <= self.window or core <= 0:
            return []
        wins = []
        for cs in range(0, L, core):
            ce = min(cs + core, L)
            wins.append((cs, ce, max(0, cs - self.context), min(L, ce + self.context)))
        k = self.encode_windows
        return [wins[i:i + k] for i in range(0, len(wins), k)]

    def _load_chunk(self, item: Item, chunk) -> tuple[np.ndarray, list[int]]:
        return self.load_batch([(item.chrom, item.start + ws, item.start + we)
                                for _, _, ws, we in chunk])

    def load_first(self, item: Item):
        """The features emissions(item) encodes first (a whole short sequence, or the first
        chunk of a long one's windows), for a reader thread to read them ahead."""
        chunks = self._chunks(item)
        return (self._load_chunk(item, chunks[0]) if chunks
                else self._load(item.chrom, item.start, item.end))

    def emissions(self, item: Item, first=None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Emissions (S, C) and hidden states (S, H) or None for one long sequence, from
        overlapping encoder windows whose centres are kept; `first`: its load_first, when
        it was read ahead."""
        S = -(-(item.end - item.start) // self.res)
        chunks = self._chunks(item)
        if not chunks:
            x = self.load_first(item) if first is None else first
            em, hid = self._encode(x[None], [len(x)])
            self._report("encode", 1.0)
            return em[0, :S], (hid[0, :S] if hid is not None else None)
        em_out = hid_out = None
        # the next chunks' features are read while this one is encoded
        loaded = ahead(lambda i: first if i == 0 and first is not None else
                       self._load_chunk(item, chunks[i]), range(len(chunks)))
        for chunk, (x, lens) in zip(chunks, loaded):
            em, hid = self._encode(x, lens)
            for j, (cs, ce, ws, _) in enumerate(chunk):
                a = (cs - ws) // self.res
                b = a + -(-(ce - cs) // self.res)
                if em_out is None:  # (a long sequence's: in a file while spilling)
                    em_out = spill.empty((S, em.shape[-1]), em.dtype, em.device)
                    hid_out = (spill.empty((S, hid.shape[-1]), hid.dtype, hid.device)
                               if hid is not None else None)
                s0 = cs // self.res
                em_out[s0:s0 + b - a] = em[j, a:b]
                if hid is not None:
                    hid_out[s0:s0 + b - a] = hid[j, a:b]
            self._report("encode", chunk[-1][1] / (item.end - item.start))
        return em_out, hid_out

    def _report(self, stage: str, fraction: float) -> None:
        if self.progress is not None:
            self.progress(stage, fraction)

    @torch.no_grad()
    def decode(self, em: torch.Tensor, hid, lengths: torch.Tensor, runs: bool = True,
               seed: int = 0):
        """Viterbi labels (B, S), label posteriors (B, S, C), per-step signals (B, S, 3:
        the boundary posterior, the label entropy and the boundary entropy, computed here
        on the decoding device: entropies are per position, so those of stitched windows
        equal those of stitched marginals), run posteriors of the Viterbi runs per step (a
        list of (L_b,) arrays; None when `runs` is False) and posterior samples
        (samples[b][i], steps; None without --samples)."""
        crf = self.model.crf
        if hasattr(crf, "decode_with_marginals"):  # the gene model: one posterior pass
            seg, post, bnd = crf.decode_with_marginals(em, lengths, hidden=hid)
        else:
            seg = crf.decode(em, lengths, hidden=hid)
            post, bnd = crf.marginals(em, lengths, hidden=hid)
        sig = torch.stack([bnd, *uncertainty.entropy_tracks(post, bnd)], -1)
        runp = (uncertainty.per_step_run_posteriors(crf, em, hid, lengths, seg.labels)
                if runs else None)
        smp = (uncertainty.draw_samples(crf, em, hid, lengths, self.samples, seed)
               if self.samples else None)
        return seg.labels, post, sig, runp, smp

    def decode_long(self, em: torch.Tensor, hid, seed: int = 0):
        """Decode (S, C) emissions in overlapping windows of max_steps, keeping centres.
        Run posteriors come from the window whose centre holds a run's midpoint, when the
        run lies inside that window off its inner edges (else NaN; annotate/uncertainty.py)."""
        if self._certified_gene():
            from . import posterior_seams  # seams checked and proven (docs/decoding.md)
            labels, post, sig, windows = posterior_seams.annotate_long(self, em, hid)
            return labels, post, sig, self._run_posteriors(em, hid, labels, windows), None
        S = em.shape[0]
        W = self.max_steps
        labels = np.empty(S, np.int64)
        post = None  # (S, labels): the labels are not the emission channels (frames)
        sig = np.empty((S, 3), np.float32)  # boundary posterior and the two entropies
        samples = [[] for _ in range(self.samples)] if self.samples else None
        K = getattr(self.model.crf, "max_duration", 1)
        ov = self.overlap or batches.default_overlap(W, K)
        # several windows per semi-CRF call (the batch_steps budget; batches.plan fits
        # them to a GPU's SMs); one at a time with samples, whose seed is per window
        windows, k = batches.plan(S, W, ov, 1 if self.samples else self.batch_steps // W,
                                  em.device)
        for i in range(0, len(windows), k):
            chunk = windows[i:i + k]
            n = max(we - ws for _, _, ws, we in chunk)
            em_b = em.new_zeros(len(chunk), n, em.shape[-1])
            hid_b = None if hid is None else hid.new_zeros(len(chunk), n, hid.shape[-1])
            for j, (_, _, ws, we) in enumerate(chunk):
                em_b[j, :we - ws] = em[ws:we]
                if hid is not None:
                    hid_b[j, :we - ws] = hid[ws:we]
            lab, p, b, _, smp = self.decode(
                em_b, hid_b, torch.tensor([we - ws for _, _, ws, we in chunk],
                                          device=em.device),
                runs=False, seed=seed + chunk[0][0])
            lab, p, b = lab.cpu().numpy(), p.cpu().numpy(), b.cpu().numpy()
            if post is None:
                post = np.empty((S, p.shape[-1]), np.float32)
            for j, (cs, ce, ws, _) in enumerate(chunk):
                labels[cs:ce] = lab[j, cs - ws:ce - ws]
                post[cs:ce] = p[j, cs - ws:ce - ws]
                sig[cs:ce] = b[j, cs - ws:ce - ws]
            if smp is not None:
                cs, ce, ws, _ = chunk[0]
                for i_s, rows in enumerate(uncertainty.clip_samples(smp[0], cs - ws, ce - ws,
                                                                    ws)):
                    samples[i_s] += rows
            self._report("decode", chunk[-1][1] / S)
        return labels, post, sig, self._run_posteriors(em, hid, labels, windows), samples

    def _run_posteriors(self, em, hid, labels, windows):
        """Run posteriors per step of windowed labels (decode_long's docstring)."""
        S = em.shape[0]
        runp = np.full(S, np.nan)
        if not uncertainty.has_run_posteriors(self.model.crf):
            return runp
        rs, re_, _ = runs(labels)
        mid = (rs + re_ - 1) // 2
        for cs, ce, ws, we in windows:
            pick = ((mid >= cs) & (mid < ce) & (rs >= ws) & (re_ <= we)
                    & ((rs > ws) | (ws == 0)) & ((re_ < we) | (we == S)))
            spans = [(0, int(a) - ws, int(z) - ws) for a, z in zip(rs[pick], re_[pick])]
            lab_w = torch.from_numpy(labels[None, ws:we]).to(em.device)
            p = uncertainty.window_run_posteriors(
                self.model.crf, em[None, ws:we], None if hid is None else hid[None, ws:we],
                torch.tensor([we - ws], device=em.device), lab_w, spans)
            for (_, a, z), v in zip(spans, p.tolist()):
                runp[a + ws:z + ws] = v
        return runp

    def _certified_gene(self) -> bool:
        """Whether long sequences go to the gene model's certified decode."""
        return (self.certified and not self.samples
                and hasattr(self.model.crf, "decode_with_marginals"))

    def _whole_steps(self) -> int:
        """The longest sequence run_long decodes as one: max_steps, but the certified
        gene decode's window on a CUDA device (posterior_seams.long_window), where
        windows side by side run faster than one chain."""
        if self._certified_gene():
            from . import posterior_seams
            return posterior_seams.long_window(self)
        return self.max_steps

    def run_long(self, item: Item, first=None):
        """Decode one sequence alone (whole, or in windows); `first`: its load_first."""
        em, hid = self.emissions(item, first)
        S = em.shape[0]
        seed = self.seed + zlib.crc32(f"{item.chrom}:{item.start}".encode())
        if S <= self._whole_steps():
            lab, post, sig, runp, smp = self.decode(
                em[None], None if hid is None else hid[None],
                torch.tensor([S], device=em.device), seed=seed)
            out = (lab[0].cpu().numpy(), post[0].cpu().numpy(), sig[0].cpu().numpy(),
                   runp[0], None if smp is None else smp[0], True)
            self._report("decode", 1.0)
            return out
        release_freed_memory()  # the encoder's temporaries (runtime.py)
        lab, post, sig, runp, smp = self.decode_long(em, hid, seed=seed)
        return lab, post, sig, runp, smp, False

    def run_batch(self, items: list[Item], loaded=None):
        """Several short sequences in one batch (each fits one encoder window); `loaded`:
        their load_batch, when it was read ahead."""
        x, lengths = loaded or self.load_batch([(it.chrom, it.start, it.end) for it in items])
        em, hid = self._encode(x, lengths)
        steps = torch.tensor([-(-(it.end - it.start) // self.res) for it in items],
                             device=self.device)
        seed = self.seed + zlib.crc32(f"{items[0].chrom}:{items[0].start}".encode())
        lab, post, sig, runp, smp = self.decode(em, hid, steps, seed=seed)
        # one copy of each result to the host, then views per sequence (a copy per
        # sequence cost ~1 ms each for a batch of 500 contigs)
        lab, post, sig = lab.cpu().numpy(), post.cpu().numpy(), sig.cpu().numpy()
        return [(lab[i, :n], post[i, :n], sig[i, :n], runp[i],
                 None if smp is None else smp[i]) for i, n in enumerate(steps.tolist())]
