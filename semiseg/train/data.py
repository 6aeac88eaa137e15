"""Training data: the windows of a config's genome, their features and labels in memory,
and the reverse-complement (strand swap) augmentation.

`prepare(cfg)` opens a config's inputs; `split_regions` and `tile` make the training and
validation windows; `Dataset` loads them once and serves padded batches. The strand
flips come from genome.sequence.rc_columns and genome.scheme.strand_swap, which
annotation uses as well to average over both strands.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from .. import ui
from ..config.schema import Config
from ..errors import SemisegError
from ..genome.scheme import strand_swap
from ..genome.sequence import rc_columns

SEQUENCE_FEATURES = ("A", "C", "G", "T")


def track_specs(tracks: dict) -> list:
    """TrackSpecs from `inputs.tracks` ({name: path} or {name: {path, transform, ...}})."""
    from ..genome import TrackSpec

    specs = []
    for name, spec in tracks.items():
        if isinstance(spec, dict):
            d = dict(spec)
            path = d.pop("path")
            unknown = set(d) - {"transform", "mapq", "strand", "kind"}
            if unknown:
                raise SemisegError(f"inputs.tracks.{name}: unknown key(s) "
                                   f"{', '.join(sorted(unknown))} (valid: path, transform, "
                                   "mapq, strand, kind)")
            specs.append(TrackSpec(name, path, **d))
        else:
            specs.append(TrackSpec(name, spec))
    for s in specs:
        if not os.path.isfile(s.path):
            raise SemisegError(f"track {s.name}: file not found: {s.path}")
    return specs


def feature_columns(feature_names: list[str], use_sequence: bool) -> list[int]:
    """Indices of the GenomeData feature columns the model reads."""
    return [i for i, n in enumerate(feature_names) if use_sequence or n not in SEQUENCE_FEATURES]


@dataclass
class Window:
    chrom: str
    start: int
    end: int
    phase: int = 0  # windows.phases: the tiling it belongs to; -1 every epoch's (intron windows)


class Dataset:
    """Training/validation windows with features (bin_size resolution) and labels (CRF
    resolution), loaded once and kept in memory as numpy arrays."""

    def __init__(self, data, annotation, windows: list[Window], columns: list[int],
                 resolution: int, rc_columns: list[int] | None = None,
                 rc_labels: np.ndarray | None = None, pool: int = 1, on_load=None):
        self.windows = windows
        self.rc_columns, self.rc_labels, self.pool = rc_columns, rc_labels, pool
        self.cleanup = None  # the annotation clean-up (genome/cleanup.py), if any
        self.phase_sets: list[Dataset] = []  # windows.phases: the tilings 1.. (for_epoch)
        self.x, self.y = [], []
        for w in windows:
            feats, _ = data.load(w.chrom, w.start, w.end)
            self.x.append(np.ascontiguousarray(feats[:, columns], dtype=np.float32))
            self.y.append(annotation.labels(w.chrom, w.start, w.end, resolution=resolution))
            if on_load is not None:
                on_load()

    def __len__(self) -> int:
        return len(self.windows)

    def for_epoch(self, epoch: int) -> Dataset:
        """The windows epoch `epoch` (1, 2, ...) trains on: with windows.phases = N, the
        tiling (epoch - 1) % N (0: this Dataset) with every phase's intron windows; this
        Dataset itself where there is one tiling."""
        p = (epoch - 1) % (1 + len(self.phase_sets))
        if p == 0:
            return self
        other = self.phase_sets[p - 1]
        keep = self.subset([i for i, w in enumerate(self.windows) if w.phase < 0])
        return self._view(other.windows + keep.windows, other.x + keep.x, other.y + keep.y)

    def subset(self, idx: list[int]) -> Dataset:
        """This Dataset's windows idx (a view: the arrays are shared, not copied)."""
        return self._view([self.windows[i] for i in idx], [self.x[i] for i in idx],
                          [self.y[i] for i in idx])

    def _view(self, windows, x, y) -> Dataset:
        """A Dataset with these windows and arrays and this one's other settings."""
        view = object.__new__(Dataset)
        view.__dict__.update(self.__dict__)
        view.phase_sets = []
        view.windows, view.x, view.y = windows, x, y
        return view

    def batch(self, idx, flip=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Padded features (B, T, F), lengths (B,), labels (B, S) with -1 padding.

        flip: per item, whether to reverse-complement it (training augmentation): the
        window is reversed, A<->T and C<->G swap, and each stranded label becomes its
        other-strand twin. Only windows of whole CRF steps are flipped (so bins align).
        """
        xs = [self.x[i] for i in idx]
        ys = [self.y[i] for i in idx]
        if flip is not None and self.rc_columns is not None:
            for b, f in enumerate(flip):
                if f and len(xs[b]) % self.pool == 0:
                    xs[b] = xs[b][::-1, self.rc_columns]
                    if callable(self.rc_labels):  # gold frame codes (genemodel/frames.py)
                        ys[b] = self.rc_labels(ys[b])
                        continue
                    y = ys[b][::-1]
                    ys[b] = np.where(y >= 0, self.rc_labels[np.maximum(y, 0)], -1)
        T, S = max(len(x) for x in xs), max(len(y) for y in ys)
        F = xs[0].shape[1]
        x = np.zeros((len(xs), T, F), np.float32)
        y = np.full((len(ys), S), -1, np.int64)
        for b, (xi, yi) in enumerate(zip(xs, ys)):
            x[b, :len(xi)] = xi
            y[b, :len(yi)] = yi
        lengths = torch.tensor([len(xi) for xi in xs], dtype=torch.int64)
        return torch.from_numpy(x), lengths, torch.from_numpy(y)


def windows_line(train_ds: Dataset, valid_ds: Dataset, size: int) -> str:
    """The training log's line of window counts (with windows.phases, the other tilings')."""
    more, n = sum(map(len, train_ds.phase_sets)), len(train_ds.phase_sets)
    return (f"{len(train_ds)} training windows"
            + (f" (and {more} in {n} more tilings, one an epoch in turn)" if n else "")
            + f", {len(valid_ds)} validation windows of {size:,} bp")


def split_regions(cfg: Config, sizes: dict[str, int], log: bool = False) -> tuple[list, list]:
    """(train, valid) lists of (chrom, start, end) following the `windows` section;
    `windows.holdout` regions are cut out of both (`log`: say where a validation block
    moved beside the holdout; make_windows does, the other callers do not repeat it)."""
    from ..genome.windows import read_holdout, subtract_regions

    holdout = read_holdout(cfg.windows.holdout, sizes)
    train, valid = _split_regions(cfg, sizes)
    if holdout:
        kept = subtract_regions(valid, holdout)
        train = subtract_regions(train, holdout)
        if not train:
            raise SemisegError("windows.holdout: nothing is left to train on")
        w = cfg.windows
        if not w.valid_chroms and w.valid_offset is None:
            gone = {c for c, _, _ in valid} - {c for c, _, _ in kept}
            train, kept = _valid_beside_holdout(train, kept, gone, w.valid_fraction,
                                                cfg.model.resolution, log)
        valid = kept
    return train, valid


def _valid_beside_holdout(train: list, valid: list, chroms: set, frac: float,
                          res: int, log: bool) -> tuple[list, list]:
    """A chromosome whose default validation block (its last `frac`) lies wholly inside
    windows.holdout (a test region held out at its end, as fly's 3-4 Mb) would have no
    validation windows (no best epoch by validation, no calibration): its last `frac`
    outside the holdout validates instead, said in the log when `log`. (With
    windows.valid_offset or valid_chroms set, the split is the user's own and stays.)"""
    order = {c: i for i, c in enumerate(dict.fromkeys(c for c, _, _ in train))}
    train = list(train)
    for c in sorted(chroms):
        pieces = [r for r in train if r[0] == c]
        rest = int(sum(e - s for _, s, e in pieces) * frac) // res * res
        if not rest:
            continue
        moved = []
        for r in reversed(pieces):  # from the end of the chromosome's training sequence
            _, s, e = r
            take = min(rest, e - s)
            train.remove(r)
            if take < e - s:
                train.append((c, s, e - take))
            moved.append((c, e - take, e))
            rest -= take
            if not rest:
                break
        valid += sorted(moved)
        if log:
            ui.log(f"windows: the validation block of {c} (its last {frac:.0%}) lies "
                   f"inside windows.holdout; validation is the last {frac:.0%} of its "
                   "sequence outside it instead: "
                   + ", ".join(f"{cc}:{a:,}-{b:,}" for cc, a, b in sorted(moved)))
    # the pieces in their chromosome order again, each by its start (as they came)
    return sorted(train, key=lambda r: (order[r[0]], r[1])), valid


def _split_regions(cfg: Config, sizes: dict[str, int]) -> tuple[list, list]:
    chroms = cfg.windows.chroms or list(sizes)
    for c in list(chroms) + list(cfg.windows.valid_chroms):
        if c not in sizes:
            raise SemisegError(f"windows: chromosome {c!r} is not in the FASTA "
                               f"({', '.join(list(sizes)[:8])})")
    res = cfg.model.resolution
    if cfg.windows.valid_chroms:
        train = [(c, 0, sizes[c]) for c in chroms if c not in cfg.windows.valid_chroms]
        valid = [(c, 0, sizes[c]) for c in cfg.windows.valid_chroms]
    else:
        train, valid = [], []
        frac, off = cfg.windows.valid_fraction, cfg.windows.valid_offset
        for c in chroms:
            n = sizes[c]  # held out: [a, b), by default the last part (b = n)
            a = int(n * (1 - frac if off is None else off)) // res * res
            b = n if off is None or off + frac >= 1 - 1e-9 else int(n * (off + frac)) // res * res
            train += [(c, s, e) for s, e in ((0, a), (b, n)) if e > s]
            if b > a and frac > 0:
                valid.append((c, a, b))
    if not train:
        raise SemisegError("windows: no training chromosomes left after the validation split")
    return train, valid


def tile(regions: list, size: int, overlap: int, min_length: int,
         phase: int = 0, offset: int = 0) -> list[Window]:
    """Windows of `size` bp (stride size - overlap) over regions; the last one may be
    shorter; windows shorter than `min_length` are dropped. A later tiling (`phase`)
    starts each region's first window `offset` bp in (the bases before it are in the
    other tilings' windows)."""
    out = []
    step = size - overlap
    for chrom, start, end in regions:
        s = start + offset
        while s < end:
            e = min(s + size, end)
            if e - s >= min_length:
                out.append(Window(chrom, s, e, phase))
            if e == end:
                break
            s += step
    return out


def make_windows(cfg: Config, sizes: dict[str, int]) -> tuple[list[Window], list[Window],
                                                                list[str]]:
    """(training windows, validation windows, training chromosomes) of a config: the
    split of `split_regions`, tiled into `windows.size` windows (training windows shorter
    than a quarter window or 10 CRF steps are dropped)."""
    res = cfg.model.resolution
    train_regions, valid_regions = split_regions(cfg, sizes, log=True)
    min_len = min(cfg.windows.size // 4, 10 * res)
    tr = tile(train_regions, cfg.windows.size, cfg.windows.overlap, min_len)
    va = tile(valid_regions, cfg.windows.size, 0, res)
    if not tr:
        raise SemisegError("windows: no training windows (windows.size larger than the data?)")
    return tr, va, sorted({c for c, _, _ in train_regions})


def phase_windows(cfg: Config, sizes: dict[str, int]) -> list[list[Window]]:
    """windows.phases = N: the training tilings 1 .. N-1 (make_windows's is tiling 0),
    tiling p the same tiles begun p / N of a stride later in every training region
    (rounded to whole CRF steps)."""
    n, res = cfg.windows.phases, cfg.model.resolution
    if n <= 1:
        return []
    train_regions, _ = split_regions(cfg, sizes)
    min_len = min(cfg.windows.size // 4, 10 * res)
    step = cfg.windows.size - cfg.windows.overlap
    return [tile(train_regions, cfg.windows.size, cfg.windows.overlap, min_len, p,
                 round(p * step / n / res) * res) for p in range(1, n)]


def holdout_regions(cfg: Config, sizes: dict[str, int]) -> list:
    """The `windows.holdout` regions (chrom, start, end), merged, in genome order."""
    from ..genome.windows import read_holdout

    return read_holdout(cfg.windows.holdout, sizes)


def check_fasta(cfg: Config, data, windows: list[Window]) -> None:
    """Warn when a model that reads no sequence is given a FASTA that is all N on a
    training chromosome (a stand-in genome): annotate with it would write those
    chromosomes as gap rows."""
    from ..genome.windows import ChromSizes

    if cfg.inputs.sequence or isinstance(data.fasta, ChromSizes):
        return
    all_n = []
    for c in sorted({w.chrom for w in windows}):
        r = data.fasta.n_runs(c)
        if len(r) == 1 and r[0, 0] == 0 and r[0, 1] == data.chrom_sizes[c]:
            all_n.append(c)
    if all_n:
        ui.log(f"warning: inputs.fasta is all N on {', '.join(all_n[:8])}: the model "
               "reads no sequence, but annotate with this FASTA writes its N runs as "
               "gap rows; give inputs.chrom_sizes (and annotate --chrom-sizes) instead")


def check_signal(ds: Dataset, names: list[str]) -> None:
    """Refuse training windows with nothing to learn from, and say where some have none
    (an all-N FASTA with sequence: true, or tracks without a value on the training
    chromosomes, would train a model on zeros without a word). `names`: the model's
    feature columns; a window has input where a sequence column is not zero (a base
    other than N) or a track's missing column is below 1 (a value)."""
    seq = [i for i, n in enumerate(names) if n in SEQUENCE_FEATURES]
    miss = [i for i, n in enumerate(names) if n.endswith(".missing")]
    empty = [w for w, x in zip(ds.windows, ds.x)
             if not ((seq and x[:, seq].any()) or (miss and (x[:, miss] < 1).any()))]
    if not empty:
        return
    what = " and ".join((["no base other than N"] if seq else [])
                        + (["no track value"] if miss else []))
    chroms = sorted({w.chrom for w in empty})
    if len(empty) == len(ds.windows):
        raise SemisegError(
            f"no input to learn from: every training window has {what} "
            f"({', '.join(chroms[:8])}); check inputs.fasta, the tracks' chromosome names "
            "(inputs.alias) and what they cover; a tracks-only model may give "
            "inputs.chrom_sizes instead of a FASTA")
    ui.log(f"warning: {len(empty)} of {len(ds.windows)} training windows have {what} "
           f"(on {', '.join(chroms[:8])}{' ...' if len(chroms) > 8 else ''}); they teach "
           "the model only the labels there")


# labels.min_intron: learned needs this many training introns: the chance that an intron
# of the same genome is shorter than the shortest of n is about 1 / (n + 1), so from 100
# on at most ~1% of real introns fall under the learned floor (fly: 967 introns, 48 bp)
MIN_INTRON_MIN_N = 100


def learn_min_intron(cfg: Config, scheme, annotation, data):
    """(cfg, scheme) with labels.min_intron "learned" resolved: the shortest intron of the
    annotated transcripts (after the clean-up) lying inside the training regions, never
    the validation or held-out ones; with fewer than MIN_INTRON_MIN_N such introns, the
    scheme's own (logged). Both as they are for any other setting. The annotation is the
    one the scheme's own min_intron read; a validation transcript with a shorter intron
    is then masked by the gold-path rules, and named in the log."""
    import dataclasses

    if cfg.labels.min_intron != "learned":
        return cfg, scheme
    if scheme.kind != "gene_structure":
        raise SemisegError(f"labels.min_intron: learned needs a gene_structure scheme "
                           f"(introns read from a GFF3/GTF); {scheme.name!r} is "
                           f"{scheme.kind!r}")
    lengths = training_intron_lengths(cfg, scheme, annotation, data)
    if len(lengths) < MIN_INTRON_MIN_N:
        ui.log(f"labels.min_intron: learned: {len(lengths)} annotated intron(s) in the "
               f"training regions, fewer than the {MIN_INTRON_MIN_N} a floor needs; the "
               f"scheme's {scheme.min_intron} bp stays")
        m = scheme.min_intron
    else:
        m = int(min(lengths))
        ui.log(f"labels.min_intron: learned: {m} bp, the shortest of {len(lengths):,} "
               f"annotated introns in the training regions (the scheme's own: "
               f"{scheme.min_intron} bp)")
    return (dataclasses.replace(cfg, labels=dataclasses.replace(cfg.labels, min_intron=m)),
            dataclasses.replace(scheme, min_intron=m))


# crf.site_order: learned takes first-order site matrices from this many training introns
# on: a first-order column has 16 cells to count where an order-0 one has 4 (fly: 1,130
# donors in the training windows, order 1; yeast chrII: 22, order 0)
SITE_ORDER_MIN_N = 500


def learn_site_order(cfg: Config, scheme, annotation, data) -> Config:
    """cfg with crf.site_order "learned" resolved from the annotated introns inside the
    training regions (SITE_ORDER_MIN_N), logged; as it is for any other setting."""
    import dataclasses

    if cfg.crf.site_order != "learned":
        return cfg
    if scheme.kind != "gene_structure":
        raise SemisegError(f"crf.site_order: learned needs a gene_structure scheme "
                           f"(introns read from a GFF3/GTF); {scheme.name!r} is "
                           f"{scheme.kind!r}")
    n = len(training_intron_lengths(cfg, scheme, annotation, data))
    order = 1 if n >= SITE_ORDER_MIN_N else 0
    ui.log(f"crf.site_order: learned: {order} ({n:,} annotated introns in the training "
           f"regions; order 1 from {SITE_ORDER_MIN_N})")
    return dataclasses.replace(cfg, crf=dataclasses.replace(cfg.crf, site_order=order))


def training_intron_lengths(cfg: Config, scheme, annotation, data) -> list[int]:
    """The lengths of the annotated transcripts' introns (after the clean-up) lying inside
    the training regions, never the validation or held-out ones."""
    transcripts = annotated_transcripts(cfg, scheme, annotation)
    regions: dict[str, list[tuple[int, int]]] = {}
    for chrom, start, end in split_regions(cfg, data.chrom_sizes)[0]:
        regions.setdefault(chrom, []).append((start, end))
    return [b - a for t in transcripts for a, b in np.asarray(t.introns).reshape(-1, 2)
            .tolist() if any(s <= a and b <= e for s, e in regions.get(t.chrom, ()))]


def annotated_transcripts(cfg: Config, scheme, annotation) -> list:
    """The annotation's transcripts (genome/gff.Transcript): the clean-up's kept ones, or
    (an annotation read without it) the GFF3/GTF parsed again."""
    if getattr(annotation, "cleanup", None) is not None:
        return annotation.cleanup.kept
    from ..genome.gff import gff_transcripts, read_gff_rows

    rows, gtf = read_gff_rows(cfg.labels.annotation, annotation.chrom_sizes, cfg.inputs.alias)
    return gff_transcripts(rows, gtf, scheme, cfg.labels.annotation)


def frame_gold_for(cfg: Config, scheme, annotation, data):
    """Gold frame codes (genemodel/frames.py) for training the reading-frame gene model."""
    from ..genemodel.frames import UNKNOWN, FrameLayout
    from ..genemodel.gold import FrameGold

    path = cfg.labels.annotation
    if not path.lower().removesuffix(".gz").endswith((".gff", ".gff3", ".gtf")):
        raise SemisegError(f"crf.frames: the annotation must be GFF3 or GTF (transcripts "
                           f"with CDS rows), got {path}")
    transcripts = annotated_transcripts(cfg, scheme, annotation)
    gold = FrameGold(FrameLayout.from_scheme(scheme, exon_types=cfg.crf.exon_types),
                     annotation, transcripts, data.fasta,
                     min_intron=scheme.min_intron)
    cleanup = getattr(annotation, "cleanup", None)
    if cleanup is not None and cleanup.masks:
        # the clean-up's masks also inside the kept genes (where an isoform disagrees),
        # which frame_gold paints over with the kept gene's codes
        make = gold._chrom

        def chrom_codes(chrom):
            fresh = chrom not in gold.codes
            codes = make(chrom)
            if fresh:
                for a, b in cleanup.masks.get(chrom, []):
                    codes[a:b] = UNKNOWN
            return codes

        gold._chrom = chrom_codes
    return gold


def clear_of_rigid(gold, windows: list[Window]) -> tuple[list[Window], int]:
    """The gene model's windows with every edge inside a start or stop codon, or in an
    intron too near its splice bases, moved inwards to the nearest safe boundary
    (FrameGold.safe_cuts; deep inside a long intron an edge stays): a window
    only shrinks, so it never reaches into a neighbouring region (the validation block).
    Returns (windows, edges moved); a window left empty is dropped."""
    out, moved, cuts = [], 0, {}
    for w in windows:
        if w.chrom not in cuts:  # once per chromosome
            cuts[w.chrom] = gold.safe_cuts(w.chrom)
        ok = cuts[w.chrom]
        s, e = w.start, w.end
        while s < e and not ok[s]:
            s += 1
        while e > s and not ok[e]:
            e -= 1
        moved += (s != w.start) + (e != w.end)
        if e > s:
            out.append(Window(w.chrom, s, e, w.phase))
    return out, moved


def make_datasets(cfg: Config, data, annotation, scheme, columns: list[int],
                  train_windows: list[Window], valid_windows: list[Window],
                  on_load=None, phases: list[list[Window]] = ()) -> tuple[Dataset, Dataset]:
    """(training, validation) Datasets; the training one flips strands when
    `train.reverse_complement` is on, and holds the tilings `phases` (phase_windows) as
    Datasets of their own (Dataset.for_epoch). `on_load()` is called after each window."""
    res = cfg.model.resolution
    rc = {}
    gold = frame_gold_for(cfg, scheme, annotation, data) if cfg.crf.frames else annotation
    if cfg.train.reverse_complement:
        rc = {"rc_columns": rc_columns([data.feature_names[i] for i in columns]),
              "rc_labels": gold.layout.flip if cfg.crf.frames else strand_swap(scheme),
              "pool": res // cfg.inputs.bin_size}
    if cfg.crf.frames and cfg.windows.intron_windows:
        train_windows = train_windows + _intron_windows(cfg, gold, data)
    phases = [list(p) for p in phases]
    if cfg.crf.frames:
        train_windows, moved_t = clear_of_rigid(gold, train_windows)
        valid_windows, moved_v = clear_of_rigid(gold, valid_windows)
        for i, p in enumerate(phases):
            phases[i], moved = clear_of_rigid(gold, p)
            moved_t += moved
        if moved_t or moved_v:
            ui.log(f"{moved_t + moved_v} window edge(s) moved out of a codon or an intron "
                   "(a piece of one cannot be segmented)")
    train_ds = Dataset(data, gold, train_windows, columns, res, on_load=on_load, **rc)
    valid_ds = Dataset(data, gold, valid_windows, columns, res, on_load=on_load)
    train_ds.phase_sets = [Dataset(data, gold, p, columns, res, on_load=on_load, **rc)
                           for p in phases]
    if cfg.crf.frames:
        ui.log(gold.report.line())  # the chromosomes the windows read
        if cfg.crf.head == "semicrf":
            check_windows(cfg, gold, annotation, [train_ds, valid_ds, *train_ds.phase_sets])
    cleanup = getattr(annotation, "cleanup", None)
    if cleanup is not None:
        ui.log("annotation: " + cleanup.line())
    train_ds.cleanup = cleanup  # train/loop.py writes its list to the run folder
    return train_ds, valid_ds


def _intron_windows(cfg: Config, gold, data) -> list[Window]:
    """windows.intron_windows: the windows around the training annotation's long
    introns (genemodel/intronwindows.py), inside the training regions."""
    from ..genemodel.intronwindows import intron_windows

    train_regions, _ = split_regions(cfg, data.chrom_sizes)
    extra = intron_windows(gold.transcripts, train_regions, cfg.windows.size,
                           lambda c, a, b: Window(c, a, b, -1))  # in every epoch
    ui.log(f"{len(extra)} intron window(s) ({sum(w.end - w.start for w in extra):,} bp): "
           f"the annotation's introns over {cfg.windows.size // 2:,} bp with both exons")
    return extra


def check_windows(cfg: Config, gold, annotation, datasets) -> dict:
    """The gold-path check of the gene model's windows (genemodel/annotation_check.py): windows
    whose gold segmentation the grammar forbids get the offending transcripts masked
    (or are dropped), named in the log."""
    from ..genemodel.annotation_check import check_gold_paths, report
    from ..genome.cleanup import Cleanup

    if getattr(annotation, "cleanup", None) is None:
        annotation.cleanup = Cleanup()
    cleanup = annotation.cleanup
    before = len(cleanup.removed)
    stats = check_gold_paths(gold, datasets, cleanup, cfg.crf.max_duration,
                             tails=cfg.crf.run_tails)
    report(stats, cleanup)
    for line in _named(cleanup, before):
        ui.log(line)
    if not sum(len(ds) for ds in datasets[:1]):
        raise SemisegError("no training window is left after the gold-path check (every "
                           "window's gold segmentation is one the gene model forbids)")
    return stats


def _named(cleanup, start: int = 0) -> list[str]:
    """The clean-up's per-reason lines for the removals from index `start` on."""
    from ..genome.cleanup import Cleanup

    part = Cleanup(removed=cleanup.removed[start:], dropped_windows=cleanup.dropped_windows)
    return part.named()


def prepare(cfg: Config):
    """Open the inputs of a config: (GenomeData, Annotation, LabelScheme, columns)."""
    from ..config.load import config_scheme
    from ..genome import Fasta, GenomeData, read_annotation, sizes_with_extras
    from ..genome.windows import ChromSizes

    if cfg.inputs.fasta is None and cfg.inputs.chrom_sizes is None:
        raise SemisegError("inputs.fasta: a FASTA is needed (it defines the chromosomes; "
                           "a tracks-only model may give inputs.chrom_sizes instead)")
    paths = cfg.inputs.fasta if isinstance(cfg.inputs.fasta, list) else [cfg.inputs.fasta]
    for p in paths if cfg.inputs.fasta is not None else ():
        if not os.path.isfile(p):
            raise SemisegError(f"inputs.fasta: file not found: {p}")
    if cfg.labels.annotation is None:
        raise SemisegError("labels.annotation: training needs an annotation (GFF3/GTF/BED)")
    if not os.path.isfile(cfg.labels.annotation):
        raise SemisegError(f"labels.annotation: file not found: {cfg.labels.annotation}")
    scheme = config_scheme(cfg)
    if cfg.inputs.chrom_sizes is not None:
        try:
            fasta = ChromSizes(cfg.inputs.chrom_sizes)
        except SemisegError as err:
            raise SemisegError(f"inputs.chrom_sizes: {err}") from None
    else:
        fasta = Fasta(cfg.inputs.fasta)
    sizes, extras = sizes_with_extras(cfg.labels.annotation, fasta.chrom_sizes)
    if extras and not cfg.inputs.alias:
        ui.log(f"annotation chromosome(s) not in the FASTA, ignored: {', '.join(extras[:8])}"
               + (f" ... ({len(extras)})" if len(extras) > 8 else ""))
    elif cfg.inputs.alias:
        sizes = fasta.chrom_sizes  # with an alias map every name must resolve
    # training labels: the annotation cleaned up (genome/cleanup.py); with the gene
    # model also checked against its sequence rules
    fetch = None
    if cfg.crf.frames and cfg.inputs.sequence and not isinstance(fasta, ChromSizes):
        def fetch(chrom):
            size = fasta.chrom_sizes.get(chrom)
            return None if size is None else fasta.fetch(chrom, 0, size)
    annotation = read_annotation(cfg.labels.annotation, scheme, sizes, alias=cfg.inputs.alias,
                                 clean=True, fetch=fetch)
    if annotation.cleanup is not None:
        ui.log("annotation clean-up: " + annotation.cleanup.line().rsplit(";", 1)[0]
               + f"; {len(annotation.cleanup.spans)} kept")
        for line in annotation.cleanup.named():
            ui.log(line)
    # labels are read from `annotation` directly (at the CRF resolution), so GenomeData
    # gets none: it only builds features
    data = GenomeData(fasta, tracks=track_specs(cfg.inputs.tracks), annotation=None,
                      resolution=cfg.inputs.bin_size, softmask=cfg.inputs.softmask,
                      alias=cfg.inputs.alias)
    columns = feature_columns(data.feature_names, cfg.inputs.sequence)
    return data, annotation, scheme, columns
