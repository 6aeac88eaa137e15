"""`semiseg annotate`: segment a genome with a trained model.

Settings come from the checkpoint (inputs, resolution, label scheme, track statistics,
the `annotate` section); flags override the `annotate` section only. Chromosomes are
processed one at a time, in FASTA order:

1. Emissions: the encoder runs over overlapping windows of `annotate.window` bp; each
   window keeps its centre and drops `annotate.context` bp on each side (except at the
   chromosome ends), so every position is scored with full context.
2. Decoding: when the chromosome (or region) has at most `annotate.max_decode_steps`
   CRF steps it is decoded as one sequence (exact Viterbi segmentation and posteriors
   over the whole chromosome, no window edges). Otherwise it is decoded in windows of
   that many steps overlapping by a quarter, and each window keeps its centre.
   Models trained with `crf.centering: mean` always decode in training-size windows.
3. Consecutive short contigs are batched together (variable lengths) up to
   `annotate.batch_steps` CRF steps per batch.

Outputs: PREFIX.bed (BED9), PREFIX.browser.bed, PREFIX.gff3, PREFIX.posterior.LABEL.bw,
PREFIX.boundary.bw, PREFIX.entropy.bw, PREFIX.boundary_entropy.bw (written by
semiseg.genome's OutputWriter), PREFIX.summary.tsv (segments and bp per label) and, with
`--samples N`, PREFIX.samples.bed, all complete or none (temporary names, renamed at the
end). The BED and GFF3 scores are exact run posteriors, the entropy tracks come from the
stitched marginals, and samples are exact posterior samples of each decoded sequence;
semiseg/uncertainty.py says how each is defined with windowed decoding.
"""

from __future__ import annotations

import os
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import __version__, ui, uncertainty
from .checkpoint import (
    amp_enabled,
    build_model,
    checkpoint_config,
    checkpoint_scheme,
    load_checkpoint,
    pick_device,
)
from .errors import SemisegError
from .trainingdata import rc_columns, strand_swap


@dataclass
class Item:
    """One sequence to decode: [start, end) of a chromosome."""

    chrom: str
    start: int
    end: int


def parse_tracks(pairs: list[str]) -> dict[str, str]:
    """["NAME=PATH", ...] -> {name: path} (SemisegError on a malformed or missing entry)."""
    out = {}
    for p in pairs:
        name, sep, path = p.partition("=")
        if not sep or not name or not path:
            raise SemisegError(f"--track {p!r}: expected NAME=PATH")
        if name in out:
            raise SemisegError(f"--track {name}: given twice")
        if not os.path.isfile(path):
            raise SemisegError(f"--track {name}: file not found: {path}")
        out[name] = path
    return out


def read_regions(path: str, sizes: dict[str, int], res: int = 1) -> list[Item]:
    """Regions of a BED file (first three columns), widened to multiples of `res` bp,
    merged where they overlap, in FASTA order."""
    if not os.path.isfile(path):
        raise SemisegError(f"--regions: file not found: {path}")
    by_chrom: dict[str, list[tuple[int, int]]] = {}
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            f = line.split("\t")
            if len(f) < 3:
                raise SemisegError(f"{path}:{n}: expected chrom, start, end")
            try:
                s, e = int(f[1]), int(f[2])
            except ValueError:
                raise SemisegError(f"{path}:{n}: start and end must be integers") from None
            if f[0] not in sizes:
                raise SemisegError(f"{path}:{n}: chromosome {f[0]!r} is not in the FASTA "
                                   f"({', '.join(list(sizes)[:8])})")
            if not 0 <= s < e <= sizes[f[0]]:
                raise SemisegError(f"{path}:{n}: region [{s}, {e}) is outside {f[0]} "
                                   f"(length {sizes[f[0]]})")
            e = min(sizes[f[0]], -(-e // res) * res)
            by_chrom.setdefault(f[0], []).append((s // res * res, e))
    items = []
    for chrom in sizes:
        iv = sorted(by_chrom.get(chrom, []))
        merged: list[list[int]] = []
        for s, e in iv:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        items += [Item(chrom, s, e) for s, e in merged]
    if not items:
        raise SemisegError(f"--regions: {path} has no regions")
    return items


class Annotator:
    """A trained model ready to annotate: encoder windows, decoding, posteriors."""

    def __init__(self, ckpt: dict, data, device: torch.device, window: int, context: int,
                 max_decode_steps: int, batch_steps: int, reverse_complement: bool = False,
                 samples: int = 0, seed: int = 0):
        self.model, self.cfg = build_model(ckpt)
        self.model.to(device).eval()
        self.data = data
        self.columns = ckpt["columns"]
        self.device = device
        self.res = self.cfg.model.resolution
        self.bin = self.cfg.inputs.bin_size
        self.window, self.context = window, context
        self.max_steps = max_decode_steps
        if self.cfg.crf.centering == "mean":
            self.max_steps = self.cfg.windows.size // self.res
        self.batch_steps = batch_steps
        self.samples, self.seed = samples, seed
        self.amp = amp_enabled(self.cfg, device)
        self.rc = None
        if reverse_complement:
            swap = (self.model.channel_swap if getattr(self.model, "frames", False) else
                    torch.as_tensor(strand_swap(checkpoint_scheme(ckpt))))
            self.rc = (rc_columns(ckpt["feature_names"]), swap.to(device))

    def _load(self, chrom: str, start: int, end: int) -> np.ndarray:
        feats, _ = self.data.load(chrom, start, end)
        return np.ascontiguousarray(feats[:, self.columns], dtype=np.float32)

    @torch.no_grad()
    def _encode(self, x: np.ndarray, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        xt = torch.from_numpy(x).to(self.device)
        lt = torch.tensor(lengths, dtype=torch.int64, device=self.device)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16,
                            enabled=self.amp):
            em, hid, steps = self.model(xt, lt)
        em = em.float()
        if self.rc is not None:
            em = (em + self._encode_rc(x, lengths, steps, em.shape[1])) / 2
        return em, (hid.float() if hid is not None else None)

    def _encode_rc(self, x: np.ndarray, lengths: list[int], steps, S: int) -> torch.Tensor:
        """Emissions of the reverse complement, mapped back to the forward strand (steps
        reversed, stranded labels swapped). Each sequence is padded to whole CRF steps
        first, so its steps line up with the forward ones."""
        columns, swap = self.rc
        pool = self.model.pool
        padded = [int(n) * pool for n in steps.tolist()]
        xr = np.zeros((len(lengths), max(padded), x.shape[2]), np.float32)
        for b, (L, P) in enumerate(zip(lengths, padded)):
            xr[b, P - L:P] = x[b, :L][::-1][:, columns]
        xt = torch.from_numpy(xr).to(self.device)
        lt = torch.tensor(padded, dtype=torch.int64, device=self.device)
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16,
                            enabled=self.amp):
            em_rc, _, _ = self.model(xt, lt)
        em_rc = em_rc.float()[..., swap]
        out = torch.zeros(len(lengths), S, em_rc.shape[-1], device=em_rc.device)
        for b, n in enumerate(steps.tolist()):
            out[b, :n] = em_rc[b, :n].flip(0)
        return out

    def emissions(self, item: Item) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Emissions (S, C) and hidden states (S, H) or None for one long sequence, from
        overlapping encoder windows whose centres are kept."""
        L = item.end - item.start
        S = -(-L // self.res)
        core = self.window - 2 * self.context
        if L <= self.window or core <= 0:
            x = self._load(item.chrom, item.start, item.end)
            em, hid = self._encode(x[None], [len(x)])
            return em[0, :S], (hid[0, :S] if hid is not None else None)
        em_out = hid_out = None
        for cs in range(0, L, core):  # core [cs, ce) in bp relative to item.start
            ce = min(cs + core, L)
            ws, we = max(0, cs - self.context), min(L, ce + self.context)
            x = self._load(item.chrom, item.start + ws, item.start + we)
            em, hid = self._encode(x[None], [len(x)])
            a, b = (cs - ws) // self.res, (cs - ws) // self.res + -(-(ce - cs) // self.res)
            if em_out is None:
                em_out = em.new_empty(S, em.shape[-1])
                hid_out = hid.new_empty(S, hid.shape[-1]) if hid is not None else None
            s0 = cs // self.res
            em_out[s0:s0 + b - a] = em[0, a:b]
            if hid is not None:
                hid_out[s0:s0 + b - a] = hid[0, a:b]
        return em_out, hid_out

    @torch.no_grad()
    def decode(self, em: torch.Tensor, hid, lengths: torch.Tensor, runs: bool = True,
               seed: int = 0):
        """Viterbi labels (B, S), label posteriors (B, S, C), boundary posteriors (B, S),
        run posteriors of the Viterbi runs per step (a list of (L_b,) arrays; None when
        `runs` is False) and posterior samples (samples[b][i], steps; None without
        --samples)."""
        crf = self.model.crf
        seg = crf.decode(em, lengths, hidden=hid)
        post, bnd = crf.marginals(em, lengths, hidden=hid)
        runp = (uncertainty.per_step_run_posteriors(crf, em, hid, lengths, seg.labels)
                if runs else None)
        smp = (uncertainty.draw_samples(crf, em, hid, lengths, self.samples, seed)
               if self.samples else None)
        return seg.labels, post, bnd, runp, smp

    def decode_long(self, em: torch.Tensor, hid, seed: int = 0):
        """Decode (S, C) emissions in overlapping windows of max_steps, keeping centres.
        Run posteriors come from the window whose centre holds a run's midpoint, when the
        run lies inside that window off its inner edges (else NaN; uncertainty.py)."""
        S = em.shape[0]
        W = self.max_steps
        ov = max(1, W // 4) if W < S else 0
        core = W - 2 * (ov // 2) if ov else W
        half = (W - core) // 2
        labels = np.empty(S, np.int64)
        post = None  # (S, labels): the labels are not the emission channels (frames)
        bnd = np.empty(S, np.float32)
        samples = [[] for _ in range(self.samples)] if self.samples else None
        windows = []
        for cs in range(0, S, core):
            ce = min(cs + core, S)
            ws, we = max(0, cs - half), min(S, ce + half)
            windows.append((cs, ce, ws, we))
            lab, p, b, _, smp = self.decode(
                em[None, ws:we], None if hid is None else hid[None, ws:we],
                torch.tensor([we - ws], device=em.device), runs=False, seed=seed + cs)
            labels[cs:ce] = lab[0, cs - ws:ce - ws].cpu().numpy()
            if post is None:
                post = np.empty((S, p.shape[-1]), np.float32)
            post[cs:ce] = p[0, cs - ws:ce - ws].cpu().numpy()
            bnd[cs:ce] = b[0, cs - ws:ce - ws].cpu().numpy()
            if smp is not None:
                for i, rows in enumerate(uncertainty.clip_samples(smp[0], cs - ws, ce - ws, ws)):
                    samples[i] += rows
        runp = np.full(S, np.nan)
        rs, re_ = uncertainty.run_spans(labels)
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
        return labels, post, bnd, runp, samples

    def run_long(self, item: Item):
        em, hid = self.emissions(item)
        S = em.shape[0]
        seed = self.seed + zlib.crc32(f"{item.chrom}:{item.start}".encode())
        if S <= self.max_steps:
            lab, post, bnd, runp, smp = self.decode(
                em[None], None if hid is None else hid[None],
                torch.tensor([S], device=em.device), seed=seed)
            return (lab[0].cpu().numpy(), post[0].cpu().numpy(), bnd[0].cpu().numpy(),
                    runp[0], None if smp is None else smp[0], True)
        lab, post, bnd, runp, smp = self.decode_long(em, hid, seed=seed)
        return lab, post, bnd, runp, smp, False

    def run_batch(self, items: list[Item]):
        """Several short sequences in one batch (each fits one encoder window)."""
        xs = [self._load(it.chrom, it.start, it.end) for it in items]
        T = max(len(x) for x in xs)
        x = np.zeros((len(xs), T, xs[0].shape[1]), np.float32)
        for i, xi in enumerate(xs):
            x[i, :len(xi)] = xi
        em, hid = self._encode(x, [len(xi) for xi in xs])
        steps = torch.tensor([-(-(it.end - it.start) // self.res) for it in items],
                             device=self.device)
        seed = self.seed + zlib.crc32(f"{items[0].chrom}:{items[0].start}".encode())
        lab, post, bnd, runp, smp = self.decode(em, hid, steps, seed=seed)
        out = []
        for i, n in enumerate(steps.tolist()):
            out.append((lab[i, :n].cpu().numpy(), post[i, :n].cpu().numpy(),
                        bnd[i, :n].cpu().numpy(), runp[i], None if smp is None else smp[i]))
        return out


def _groups(items: list[Item], res: int, window: int, max_steps: int, batch_steps: int):
    """Consecutive short items batched together; long items alone."""
    group: list[Item] = []
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


def write_summary(path: str, names: list[str], counts: dict, meta: dict) -> None:
    """PREFIX.summary.tsv: segments and bp per label (written atomically)."""
    total_bp = sum(c["bp"] for c in counts.values()) or 1
    lines = [f"# semiseg {meta['version']} model {meta['model_hash']} resolution "
             f"{meta['resolution']} bp", "label\tsegments\tbp\tfraction"]
    for n in names:
        c = counts.get(n, {"segments": 0, "bp": 0})
        lines.append(f"{n}\t{c['segments']}\t{c['bp']}\t{c['bp'] / total_bp:.6f}")
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def annotate(model: str, fasta: str, out: str, tracks: list[str] = (),
             regions: str | None = None, chroms: list[str] | None = None,
             device: str = "auto", window: int | None = None, context: int | None = None,
             max_decode_steps: int | None = None, batch_steps: int | None = None,
             alias: dict | None = None, threads: int | None = None,
             reverse_complement: str | None = None, samples: int = 0,
             seed: int = 0) -> list[str]:
    """Annotate `fasta` with the model checkpoint `model`; returns the files written.

    samples: draw this many exact posterior samples per sequence (PREFIX.samples.bed);
    seed: their random seed (the same seed gives the same samples)."""
    from .genome import Fasta, GenomeData, OutputWriter, labels_to_segments

    if threads:
        torch.set_num_threads(threads)
    ckpt = load_checkpoint(model)
    dev = pick_device(device)
    if not os.path.isfile(fasta):
        raise SemisegError(f"--fasta: file not found: {fasta}")
    scheme = checkpoint_scheme(ckpt)
    given = parse_tracks(list(tracks))
    trained = [t["name"] for t in ckpt["genome"].get("tracks", [])]
    if sorted(given) != sorted(trained):
        raise SemisegError(
            f"the model was trained with tracks [{', '.join(trained) or 'none'}] but "
            f"[{', '.join(given) or 'none'}] were given (use --track NAME=PATH for each)")
    fa = Fasta(fasta)
    data = GenomeData.from_config(ckpt["genome"], fa, track_paths=given or None, alias=alias)
    sizes = dict(fa.chrom_sizes)
    if chroms:
        missing = [c for c in chroms if c not in sizes]
        if missing:
            raise SemisegError(f"--chroms: {', '.join(missing)} not in {fasta} "
                               f"({', '.join(list(sizes)[:8])})")
    mcfg = checkpoint_config(ckpt)
    res = mcfg.model.resolution
    wanted = set(chroms or ())
    if regions:
        items = read_regions(regions, sizes, res)
        if chroms:
            items = [it for it in items if it.chrom in wanted]
    else:
        items = [Item(c, 0, L) for c, L in sizes.items() if not chroms or c in wanted]
    if not items:
        raise SemisegError("nothing to annotate (no chromosome left after --chroms/--regions)")
    per_chrom = Counter(it.chrom for it in items)  # items per chromosome (linear time:
    out_sizes = {c: sizes[c] for c in sizes if c in per_chrom}  # 10^5 scaffolds are fine)

    acfg = mcfg.annotate
    rc_mode = reverse_complement or acfg.reverse_complement
    if rc_mode not in ("auto", "on", "off"):
        raise SemisegError(f"--reverse-complement: expected auto, on or off, got {rc_mode!r}")
    use_rc = rc_mode == "on" or (rc_mode == "auto" and mcfg.train.reverse_complement)
    ann = Annotator(ckpt, data, dev, window or acfg.window, acfg.context if context is None
                    else context, max_decode_steps or acfg.max_decode_steps,
                    batch_steps or acfg.batch_steps, reverse_complement=use_rc,
                    samples=samples, seed=seed)
    if samples < 0:
        raise SemisegError(f"--samples: expected a number >= 0, got {samples}")
    sample_rows: list = []
    if ann.window % res or ann.context % res or ann.window <= 2 * ann.context:
        raise SemisegError(f"--window ({ann.window}) and --context ({ann.context}) must be "
                           f"multiples of the resolution ({res} bp), window > 2 * context")
    names = list(scheme.names)
    counts = {n: {"segments": 0, "bp": 0} for n in names}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    meta = {"version": __version__, "model_hash": ckpt["model_hash"], "resolution": res}
    ui.log(f"model {model} ({ckpt['model_hash']}), {len(items)} sequence(s) on "
           f"{len(out_sizes)} chromosome(s), resolution {res} bp, device {dev.type}"
           + ("; emissions averaged over both strands" if use_rc else ""))
    total_bp = sum(it.end - it.start for it in items)
    t0 = time.perf_counter()
    by_chrom: dict[str, list] = {}
    pending = {c: per_chrom[c] for c in out_sizes}
    written = []
    with OutputWriter(out, scheme, out_sizes, resolution=res, version=__version__,
                      model_hash=ckpt["model_hash"], entropy=True) as writer, \
            ui.progress() as bar:
        task = bar.add_task("annotating", total=total_bp, unit="bp", info="")
        for group in _groups(items, res, ann.window, ann.max_steps, ann.batch_steps):
            if len(group) == 1:
                it = group[0]
                lab, post, bnd, runp, smp, whole = ann.run_long(it)
                how = ("as one sequence" if whole else
                       f"in overlapping windows of {ann.max_steps:,} steps (centres kept)")
                ui.log(f"{it.chrom}:{it.start:,}-{it.end:,} ({len(lab):,} steps) decoded {how}")
                results = [(it, lab, post, bnd, runp, smp)]
            else:
                ui.log(f"{len(group)} short sequences decoded together in one batch")
                results = [(it, *r) for it, r in zip(group, ann.run_batch(group))]
            for it, lab, post, bnd, runp, smp in results:
                by_chrom.setdefault(it.chrom, []).append((it, lab, post, bnd, runp))
                if smp is not None:
                    s0 = it.start // res
                    sample_rows.append((it.chrom, min(it.end, sizes[it.chrom]),
                                        [[(a + s0, d, c) for a, d, c in rows] for rows in smp]))
                pending[it.chrom] -= 1
                bar.update(task, advance=it.end - it.start, info=it.chrom)
            for chrom in list(pending):
                if pending[chrom]:
                    break
                _emit(writer, chrom, out_sizes[chrom], by_chrom.pop(chrom, []), res,
                      names, counts, fa, labels_to_segments)
                del pending[chrom]
        summary = f"{out}.summary.tsv"
        write_summary(summary, names, counts, meta)
        written.append(summary)
        if samples:
            path = f"{out}.samples.bed"
            uncertainty.write_samples(path, sample_rows, names, list(scheme.colors), res)
            written.append(path)
    secs = time.perf_counter() - t0
    ui.log(f"annotated {total_bp:,} bp in {secs:.1f} s ({total_bp / max(secs, 1e-9):,.0f} bp/s)")
    for suffix in ["bed", "browser.bed", "gff3", "boundary.bw", "entropy.bw",
                   "boundary_entropy.bw"] + [
            f"posterior.{n}.bw" for n in names]:
        p = f"{out}.{suffix}"
        if os.path.exists(p):
            written.append(p)
    return written


def _emit(writer, chrom: str, length: int, parts: list, res: int, names: list[str],
          counts: dict, fa, labels_to_segments) -> None:
    """Assemble one chromosome from its decoded parts and hand it to the writer. Positions
    outside the decoded regions are written as gaps."""
    S = -(-length // res)
    C = len(names)
    lab = np.full(S, -1, np.int64)
    post = np.zeros((S, C), np.float32)
    bnd = np.zeros(S, np.float32)
    runp = np.full(S, np.nan)
    gaps = []
    prev_end = 0
    for it, lb, p, b, rp in sorted(parts, key=lambda r: r[0].start):
        s0 = it.start // res
        lab[s0:s0 + len(lb)] = lb
        post[s0:s0 + len(lb)] = p
        bnd[s0:s0 + len(lb)] = b
        runp[s0:s0 + len(lb)] = rp
        if it.start > prev_end:
            gaps.append((prev_end, it.start))
        prev_end = it.end
    if prev_end < length:
        gaps.append((prev_end, length))
    n_runs = fa.n_runs(chrom, min_length=max(100, res))
    all_gaps = np.asarray(gaps, np.int64).reshape(-1, 2)
    if len(n_runs):
        all_gaps = np.concatenate([all_gaps, np.asarray(n_runs, np.int64).reshape(-1, 2)])
        all_gaps = all_gaps[np.argsort(all_gaps[:, 0], kind="stable")]
    segments = labels_to_segments(lab, start=0, resolution=res, end=length)
    for s, e, c in segments.tolist():
        if c >= 0:
            counts[names[c]]["segments"] += 1
            counts[names[c]]["bp"] += e - s
    # the run posterior of each output run (uncertainty.py); runs of label -1 have none
    first = (segments[:, 0] // res).astype(np.int64)
    run_rows = np.column_stack([segments[:, :2].astype(np.float64),
                                np.where(segments[:, 2] >= 0, runp[first], np.nan)])
    writer.add(chrom, segments, posteriors=post, boundary=bnd,
               gaps=all_gaps if len(all_gaps) else None, run_posteriors=run_rows,
               entropy=uncertainty.entropy_tracks(post, bnd))


def merge(parts: list[str], out: str) -> list[str]:
    """Join annotations of disjoint chromosome sets (PART.bed, ... from `annotate --chroms`)
    into one (OUT.bed, ...), in the order given. Used by the Snakefile's gather step.
    Every output is written to a temporary name and renamed once complete."""
    import glob

    import pyBigWig

    if not parts:
        raise SemisegError("merge: no inputs")
    for p in parts:
        for suffix in ("bed", "browser.bed", "gff3", "summary.tsv", "boundary.bw"):
            if not os.path.isfile(f"{p}.{suffix}"):
                raise SemisegError(f"merge: {p}.{suffix} is missing (not a complete annotation)")
    labels = sorted(f[len(parts[0]) + len(".posterior."):-len(".bw")]
                    for f in glob.glob(f"{glob.escape(parts[0])}.posterior.*.bw"))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp: dict[str, str] = {}

    def target(suffix: str) -> str:
        final = f"{out}.{suffix}"
        tmp[final] = f"{out}.tmp.{suffix}"
        return tmp[final]

    try:
        for suffix in ("bed", "browser.bed"):
            with open(target(suffix), "w") as fh:
                for i, p in enumerate(parts):
                    with open(f"{p}.{suffix}") as src:
                        for line in src:
                            header = line.startswith(("#", "track", "browser"))
                            # PREFIX.bed stays plain BED9 (even from parts written by
                            # older versions); the browser BED keeps the first track line
                            if not header or (i == 0 and suffix == "browser.bed"):
                                fh.write(line)
        heads, regions, body = [], [], []
        for i, p in enumerate(parts):
            with open(f"{p}.gff3") as src:
                for line in src:
                    if line.startswith("##sequence-region"):
                        regions.append(line)
                    elif line.startswith("#"):
                        if i == 0 and line not in heads:
                            heads.append(line)
                    else:
                        body.append(line)
        gff_version = [h for h in heads if h.startswith("##gff-version")]
        with open(target("gff3"), "w") as fh:
            fh.writelines(gff_version + regions + [h for h in heads if h not in gff_version]
                          + body)
        counts: dict[str, list[int]] = {}
        comment = ""
        for p in parts:
            with open(f"{p}.summary.tsv") as src:
                for line in src:
                    if line.startswith("#"):
                        comment = comment or line
                        continue
                    f = line.rstrip("\n").split("\t")
                    if f[0] == "label":
                        continue
                    c = counts.setdefault(f[0], [0, 0])
                    c[0] += int(f[1])
                    c[1] += int(f[2])
        total = sum(c[1] for c in counts.values()) or 1
        with open(target("summary.tsv"), "w") as fh:
            fh.write(comment + "label\tsegments\tbp\tfraction\n")
            fh.writelines(f"{n}\t{segs}\t{bp}\t{bp / total:.6f}\n"
                          for n, (segs, bp) in counts.items())
        extra = [s for s in ("entropy.bw", "boundary_entropy.bw")
                 if all(os.path.isfile(f"{p}.{s}") for p in parts)]
        if all(os.path.isfile(f"{p}.samples.bed") for p in parts):
            with open(target("samples.bed"), "w") as fh:
                for i, p in enumerate(parts):
                    with open(f"{p}.samples.bed") as src:
                        fh.writelines(line for line in src if i == 0 or not line.startswith("#"))
        for suffix in ["boundary.bw"] + extra + [f"posterior.{n}.bw" for n in labels]:
            sources = [pyBigWig.open(f"{p}.{suffix}") for p in parts]
            try:
                header, seen = [], set()
                for s in sources:
                    header += [(c, n) for c, n in s.chroms().items() if c not in seen]
                    seen.update(s.chroms())
                bw = pyBigWig.open(target(suffix), "w")
                bw.addHeader(header)
                for s in sources:
                    for c in s.chroms():
                        iv = s.intervals(c) or ()
                        if iv:
                            bw.addEntries([c] * len(iv), [a for a, _, _ in iv],
                                          ends=[b for _, b, _ in iv],
                                          values=[float(v) for _, _, v in iv])
                bw.close()
            finally:
                for s in sources:
                    s.close()
    except BaseException:
        for t in tmp.values():
            if os.path.exists(t):
                os.remove(t)
        raise
    for final, t in tmp.items():
        os.replace(t, final)
    return list(tmp)
