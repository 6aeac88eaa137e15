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
   that many steps overlapping by `annotate.decode_overlap` steps (default 8 K, at most
   a quarter of a window: annotate/batches.py), and each window keeps its centre; the gene
   model's windows are certified instead (annotate/seams.py, docs/decoding.md: the whole-sequence
   labels, every seam proven; --no-certified-seams: the old centre-keeping windows).
   Models trained with `crf.centering: mean` always decode in training-size windows.
3. Consecutive short contigs are batched together (variable lengths) up to
   `annotate.batch_steps` CRF steps per batch.

Outputs: PREFIX.bed (BED9), PREFIX.browser.bed, PREFIX.gff3, PREFIX.posterior.LABEL.bw,
PREFIX.boundary.bw, PREFIX.entropy.bw, PREFIX.boundary_entropy.bw (written by
semiseg.genome's OutputWriter), PREFIX.summary.tsv (segments and bp per label) and, with
`--samples N`, PREFIX.samples.bed: a whole set or nothing (written into a staging folder,
moved into place at the end replacing the prefix's previous set, under a lock file:
annotate/outputset.py). The BED and GFF3 scores are exact run posteriors, the entropy
tracks come from the stitched marginals, and samples are exact posterior samples of each
decoded sequence; semiseg/annotate/uncertainty.py says how each is defined with windowed
decoding.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import __version__, ui
from ..checkpoint import Checkpoint, load_checkpoint
from ..errors import SemisegError
from ..genemodel.generules import dropped_lines, dropping, gene_rules, set_donor_motif
from ..runtime import pick_device, return_freed_memory
from . import batches, gaps, provenance, spill, uncertainty
from .annotator import Annotator, Item
from .background import ahead
from .emit import LocalWriter
from .memory import check_host_memory, heap_too_dear
from .outputset import ANNOTATION_FILES, OutputSet, check_inputs_kept, output_folder
from .progress import BpProgress


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
            if not s < e:
                raise SemisegError(f"{path}:{n}: region [{s}, {e}) is empty: the start must "
                                   "be below the end (BED: 0-based start, end exclusive)")
            if s < 0 or e > sizes[f[0]]:
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


# where each chromosome's files are written (annotate/emit.py): "thread" (a background thread,
# while the next is decoded) or "inline" (this thread); None = the thread on CUDA devices,
# inline on the CPU, where the decoder needs both cores (the thread was 4x slower on 2
# cores: background.Behind). Tests and benchmarks set it.
WRITER: str | None = None


def track_paths(pairs: list[str], sheet: str | None, trained: list[dict]) -> dict[str, str]:
    """{name: path} of the --track NAME=PATH pairs and the --track-sheet FILE (a TSV of
    name, path[, transform, kind, mapq, strand]: genome/tracks.read_track_sheet). A
    sheet's other columns must agree with the model's tracks (the model's settings are
    used; a sheet written for training can be given as it is)."""
    from ..genome.tracks import read_track_sheet

    given = parse_tracks(pairs)
    if sheet is None:
        return given
    model = {t["name"]: t for t in trained}
    for name, spec in read_track_sheet(sheet).items():
        if name in given:
            raise SemisegError(f"--track-sheet {sheet}: track {name} is also given by --track")
        if isinstance(spec, dict):
            for key, value in spec.items():
                if key != "path" and name in model and model[name].get(key) != value:
                    raise SemisegError(
                        f"--track-sheet {sheet}: track {name} has {key} {value!r} but the "
                        f"model was trained with {model[name].get(key)!r}")
            spec = spec["path"]
        given[name] = spec
    return given


@dataclass(frozen=True)
class AnnotateOptions:
    """Every setting of `semiseg annotate` but the model, the FASTA and the output prefix.
    None: the model's own setting (its config's `annotate` section)."""

    # what to annotate
    chrom_sizes: str | None = None  # instead of a FASTA: a chrom-sizes file or .fai, for
    # a model that reads no sequence (docs/chromatin.md)
    tracks: tuple[str, ...] | list[str] = ()  # NAME=PATH per track of the model
    track_sheet: str | None = None  # a TSV of track name and path, with or instead of tracks
    alias: dict | None = None  # {name in a track file: name in the FASTA}
    regions: str | None = None  # a BED of regions (default: everything)
    chroms: list[str] | None = None
    # where it runs
    device: str = "auto"
    threads: int | None = None
    bf16: bool = False
    # windows
    window: int | None = None
    context: int | None = None
    max_decode_steps: int | None = None
    batch_steps: int | None = None
    decode_overlap: int | None = None  # 0: batches.default_overlap
    reverse_complement: str | None = None  # auto, on or off
    certified_seams: bool = True
    # the gene model (genemodel/: firstatg, orffill, generules; docs/gene_model.md)
    intron_penalty: float | None = None  # log-score taken from each intron
    intron_rate: float | None = None
    branch_penalty: float | None = None  # ... from each intron without a branch point
    first_atg: bool | None = None  # start codons at the first ATG of their ORF
    long_orfs: int | None = None  # intergenic ORFs of this many codons called genes (0: off)
    donor_motif: str | None = None  # introns begin with this IUPAC motif ("": any GT)
    split_stops: bool | None = None  # stops split by an intron taken out of genes
    min_gene_score: float | None = None  # genes under this mean posterior not called
    max_masked_cds: float | None = None  # genes more soft-masked than this not called
    # outputs
    samples: int = 0  # exact posterior samples per sequence (PREFIX.samples.bed)
    seed: int = 0
    signal_precision: float | None = None  # bigWig values rounded to multiples of this
    genetic_code: int = 1  # NCBI table of PREFIX.proteins.fa


def annotate(model: str | Checkpoint, fasta: str | None, out: str,
             options: AnnotateOptions | None = None, **settings) -> list[str]:
    """Annotate `fasta` with `model` (a Checkpoint, or a checkpoint's path, run folder or
    shipped name) into the files PREFIX.* of `out`; returns the files written.

    `options` (AnnotateOptions), or its fields as keywords (`device="cpu"`), hold every
    other setting."""
    opts = options if options is not None else AnnotateOptions(**settings)
    if options is not None and settings:
        raise TypeError("annotate: give options or keyword settings, not both")
    ckpt = model if isinstance(model, Checkpoint) else None
    model = ckpt.path if ckpt is not None else model
    # as given, for the provenance (PREFIX.json)
    given_options = {"model": model, "fasta": fasta, "out": out, **dataclasses.asdict(opts)}
    from ..genome.codes import genetic_code as genetic_code_table

    code = genetic_code_table(opts.genetic_code)  # a bad table number fails before any work
    if opts.threads:
        torch.set_num_threads(opts.threads)
    if (fasta is None) == (opts.chrom_sizes is None):
        raise SemisegError("give --fasta FILE or --chrom-sizes FILE (one of them)")
    check_inputs_kept(out, ANNOTATION_FILES, [
        ("--fasta", fasta), ("--chrom-sizes", opts.chrom_sizes), ("--regions", opts.regions),
        ("--track-sheet", opts.track_sheet),
        ("--model", os.fspath(model) if isinstance(model, (str, os.PathLike)) else None),
        *(("--track", t.partition("=")[2]) for t in opts.tracks)])
    ckpt = ckpt or load_checkpoint(model)
    dev = pick_device(opts.device)
    fa, data, given = _open_genome(ckpt, fasta, opts)
    sizes = dict(fa.chrom_sizes)
    res = ckpt.config.model.resolution
    items = _items(fa, sizes, res, opts, fasta or opts.chrom_sizes)
    per_chrom = Counter(it.chrom for it in items)  # items per chromosome (linear time:
    out_sizes = {c: sizes[c] for c in sizes if c in per_chrom}  # 10^5 scaffolds are fine)
    if not _reads_sequence(ckpt.config) and opts.chrom_sizes is None:
        _warn_all_n(fa, out_sizes)
    given_items, given_bp = len(items), sum(it.end - it.start for it in items)
    # N runs written as gap rows are not encoded or decoded: the pieces between them are
    # annotated as sequences of their own (annotate/gaps.py); a chromosome may have none left
    items = gaps.cut(items, fa, res)
    ann = _annotator(ckpt, data, dev, opts)
    spill_dir, spill_min = None, spill.MIN_BYTES  # (made inside the output folder's block)
    if ann._certified_gene():  # a sequence too long for this machine's memory: its
        from .posterior_seams import DEVICE_MAXSUM, long_window  # arrays go to files

        folder = os.environ.get("SEMISEG_SPILL_DIR") or str(Path(out).parent.resolve())
        spill_window = long_window(ann, spilling=True)  # (its windows if it spills)
        line, spills = check_host_memory(ann.model.crf, items, res, dev,
                                         device_steps=DEVICE_MAXSUM, window=long_window(ann),
                                         spill_window=spill_window,
                                         spill_dir=spill.nearest_existing(folder))
        if line:
            ui.log(line)
        if os.environ.get("SEMISEG_SPILL") == "always":  # (every such array, any size)
            spills, spill_min = True, 0
        spill_dir = folder if spills else None
        if spills and heap_too_dear(ann.model.crf, spill_window):
            return_freed_memory()  # (the heap's kept pages: memory.py)
    rules, precision = _gene_model_settings(ann.model.crf, ckpt, opts)
    if ann.window % res or ann.context % res or ann.window <= 2 * ann.context:
        raise SemisegError(f"--window ({ann.window}) and --context ({ann.context}) must be "
                           f"multiples of the resolution ({res} bp), window > 2 * context")
    with output_folder(Path(out).parent):  # made here: removed again if left empty
        if spill_dir:  # the output's by default: made here, so it too goes if left empty
            spill.make_folder(spill_dir)
        prov = provenance.collect(given_options, version=__version__, model=model,
                                  model_hash=ckpt.model_hash, fasta=fasta, tracks=given,
                                  regions=opts.regions, scheme=ckpt.scheme.name, resolution=res,
                                  genetic_code=code,
                                  extra_inputs={"chrom_sizes": opts.chrom_sizes,
                                                "track_sheet": opts.track_sheet})
        prov["options_in_effect"] = _in_effect(ann, rules, precision, opts)
        _log_start(model, ckpt, ann, rules, given_items, len(out_sizes), dev)
        total_bp = sum(it.end - it.start for it in items)
        if total_bp < given_bp:
            ui.log(f"{given_bp - total_bp:,} bp in N runs of {gaps.gap_min(res)}+ bp cut out "
                   f"(gap rows, not decoded): {len(items)} piece(s) of {total_bp:,} bp to "
                   "annotate")
        writer_args = {"prefix": out, "scheme": ckpt.scheme, "chrom_sizes": out_sizes,
                       "resolution": res, "version": __version__,
                       "model_hash": ckpt.model_hash, "entropy": True,
                       "signal_precision": precision, "genetic_code": opts.genetic_code,
                       "proteins": fasta is not None, "stranded_bed": True,
                       "provenance": provenance.header_fields(prov)}
        with spill.spilling(spill_dir, spill_min) if spill_dir else contextlib.nullcontext():
            return _write(out, ann, fa, items, sizes, out_sizes, writer_args, rules, prov,
                          opts, given_bp)


def _reads_sequence(cfg) -> bool:
    return cfg.inputs.sequence or cfg.inputs.softmask or cfg.crf.frames


def _open_genome(ckpt: Checkpoint, fasta: str | None, opts: AnnotateOptions):
    """(the FASTA or chrom sizes, GenomeData of the model's inputs, {track: path})."""
    from ..genome import Fasta, GenomeData, check_chroms
    from ..genome.escapes import check_bed_names
    from ..genome.windows import ChromSizes

    if opts.chrom_sizes is not None:
        if _reads_sequence(ckpt.config):
            raise SemisegError("--chrom-sizes: the model reads the sequence; give --fasta")
        if not os.path.isfile(opts.chrom_sizes):
            raise SemisegError(f"--chrom-sizes: file not found: {opts.chrom_sizes}")
    elif not os.path.isfile(fasta):
        raise SemisegError(f"--fasta: file not found: {fasta}")
    given = track_paths(list(opts.tracks), opts.track_sheet, ckpt.genome.get("tracks", []))
    trained = [t["name"] for t in ckpt.genome.get("tracks", [])]
    if sorted(given) != sorted(trained):
        raise SemisegError(
            f"the model was trained with tracks [{', '.join(trained) or 'none'}] but "
            f"[{', '.join(given) or 'none'}] were given (use --track NAME=PATH for each, "
            "or --track-sheet FILE)")
    fa = ChromSizes(opts.chrom_sizes) if opts.chrom_sizes is not None else Fasta(fasta)
    data = GenomeData.from_config(ckpt.genome, fa, track_paths=given or None,
                                  alias=opts.alias)
    sizes = dict(fa.chrom_sizes)
    check_chroms(opts.chroms, sizes, fasta or opts.chrom_sizes)
    # before any work: names BED cannot hold
    check_bed_names(sizes, fasta or opts.chrom_sizes, set(opts.chroms) if opts.chroms else None)
    return fa, data, given


def _items(fa, sizes: dict[str, int], res: int, opts: AnnotateOptions, source: str) -> list:
    """The sequences to annotate (--regions, --chroms; empty records left out)."""
    wanted = set(opts.chroms or ())
    if opts.regions:
        items = read_regions(opts.regions, sizes, res)
        if opts.chroms:
            items = [it for it in items if it.chrom in wanted]
    else:
        items = [Item(c, 0, L) for c, L in sizes.items() if not opts.chroms or c in wanted]
    empty = [it.chrom for it in items if it.end <= it.start]
    if empty:  # an empty FASTA record has nothing to annotate; it is left out of every file
        ui.log(f"{len(empty)} empty sequence(s) left out: {', '.join(empty[:5])}"
               + (" ..." if len(empty) > 5 else ""))
        items = [it for it in items if it.end > it.start]
    if not items:
        raise SemisegError("nothing to annotate (no chromosome left after --chroms/--regions)")
    return items


def _annotator(ckpt: Checkpoint, data, dev, opts: AnnotateOptions) -> Annotator:
    """The model on `dev` with the windows of the options, else of the model's config."""
    acfg = ckpt.config.annotate
    rc_mode = opts.reverse_complement or acfg.reverse_complement
    if rc_mode not in ("auto", "on", "off"):
        raise SemisegError(f"--reverse-complement: expected auto, on or off, got {rc_mode!r}")
    use_rc = rc_mode == "on" or (rc_mode == "auto" and ckpt.config.train.reverse_complement)
    ann = Annotator(ckpt, data, dev, opts.window or acfg.window,
                    acfg.context if opts.context is None else opts.context,
                    opts.max_decode_steps or acfg.max_decode_steps,
                    opts.batch_steps or acfg.batch_steps, reverse_complement=use_rc,
                    samples=opts.samples, seed=opts.seed,
                    decode_overlap=(acfg.decode_overlap if opts.decode_overlap is None
                                    else opts.decode_overlap), bf16=opts.bf16,
                    certified_seams=opts.certified_seams)
    if ann.overlap < 0 or ann.overlap >= ann.max_steps:
        raise SemisegError(f"--decode-overlap: expected 0 (automatic) or a "
                           f"number of steps below --max-decode-steps ({ann.max_steps}), "
                           f"got {ann.overlap}")
    if opts.samples < 0:
        raise SemisegError(f"--samples: expected a number >= 0, got {opts.samples}")
    return ann


def _gene_model_settings(crf, ckpt: Checkpoint, opts: AnnotateOptions):
    """Set the gene model's annotate-time penalties and donor motif on its head `crf`;
    returns (its gene rules or None, the bigWig precision)."""
    acfg = ckpt.config.annotate
    _set_penalty(crf, "intron_penalty", acfg.intron_penalty, opts.intron_penalty,
                 hasattr(crf, "intron_penalty"),
                 "only the gene model (crf.frames with the semi-CRF head) has introns to "
                 "penalise")
    _set_penalty(crf, "intron_rate", acfg.intron_rate, opts.intron_rate,
                 hasattr(crf, "intron_rate"),
                 "only the gene model (crf.frames with the semi-CRF head) has introns")
    _set_penalty(crf, "branch_penalty", acfg.branch_penalty, opts.branch_penalty,
                 getattr(crf, "sites", None) is not None,
                 "only the gene model trained with crf.site_scores: true has a "
                 "branch-point matrix", infinite=True)
    set_donor_motif(crf, acfg.donor_motif, opts.donor_motif)
    if hasattr(crf, "split_stops"):
        crf.split_stops = acfg.split_stops if opts.split_stops is None else opts.split_stops
    rules = gene_rules(ckpt.scheme, ckpt.config.model.resolution, acfg.first_atg,
                       opts.first_atg, acfg.long_orfs, opts.long_orfs,
                       acfg.min_gene_score, opts.min_gene_score,
                       acfg.max_masked_cds, opts.max_masked_cds)
    precision = _at_least_zero("--signal-precision", acfg.signal_precision
                               if opts.signal_precision is None else opts.signal_precision)
    return rules, precision


def _in_effect(ann: Annotator, rules, precision: float, opts: AnnotateOptions) -> dict:
    """The settings the run used (where an option was None: the model's)."""
    crf = ann.model.crf
    return provenance._plain({
        "window": ann.window, "context": ann.context, "max_decode_steps": ann.max_steps,
        "batch_steps": ann.batch_steps, "decode_overlap": ann.overlap,
        "reverse_complement": ann.rc is not None, "signal_precision": precision,
        "encoder_scale": getattr(crf, "encoder_scale", None),
        "intron_penalty": getattr(crf, "intron_penalty", None),
        "intron_rate": getattr(crf, "intron_rate", None),
        "branch_penalty": getattr(crf, "branch_penalty", None),
        "donor_motif": getattr(crf, "donor_motif", None),
        "split_stops": getattr(crf, "split_stops", None),
        "first_atg": bool(rules and rules.first_atg),
        "long_orfs": rules.long_orfs if rules else 0,
        "min_gene_score": rules.min_gene_score if rules else 0.0,
        "max_masked_cds": rules.max_masked_cds if rules else 1.0, "samples": opts.samples,
        "seed": opts.seed})


def _log_start(model: str, ckpt: Checkpoint, ann: Annotator, rules, n_items: int,
               n_chroms: int, dev) -> None:
    crf = ann.model.crf
    ui.log(f"model {model} ({ckpt.model_hash}"
           + (f", an ensemble of {ckpt.members} models" if ckpt.members else "")
           + f"), {n_items} sequence(s) on "
           f"{n_chroms} chromosome(s), resolution {ckpt.config.model.resolution} bp, "
           f"device {dev.type}"
           + ("; emissions averaged over both strands" if ann.rc is not None else "")
           + (f"; encoder scale {crf.encoder_scale:.3f} (calibrated)"
              if getattr(crf, "encoder_scale", 1.0) != 1.0 else "")
           + "".join(f"; {attr.replace('_', ' ')} {getattr(crf, attr):g}"
                     for attr in ("intron_penalty", "intron_rate", "branch_penalty")
                     if 0 < getattr(crf, attr, 0) < math.inf)
           + ("; introns need a branch point"
              if getattr(crf, "branch_penalty", 0) == math.inf else "")
           + (f"; introns begin {crf.donor_motif}" if getattr(crf, "donor_motif", "") else "")
           + ("; start codons moved to the first ATG of their ORF"
              if rules and rules.first_atg else "")
           + (f"; intergenic ORFs of {rules.long_orfs}+ codons called genes"
              if rules and rules.long_orfs else "")
           + "".join(f"; {d}" for d in dropping(rules)))


def _write(out: str, ann: Annotator, fa, items: list, sizes: dict[str, int],
           out_sizes: dict[str, int], writer_args: dict, rules, prov: dict,
           opts: AnnotateOptions, given_bp: int) -> list[str]:
    """Decode `items` and write the whole set PREFIX.* (staged, moved into place at the
    end replacing the prefix's previous set: annotate/outputset.py); returns its files."""
    res = writer_args["resolution"]
    names = list(writer_args["scheme"].names)
    counts = {n: {"segments": 0, "bp": 0} for n in names}
    meta = {"version": __version__, "model_hash": writer_args["model_hash"], "resolution": res}
    total_bp = sum(it.end - it.start for it in items)
    sample_rows: list = []
    t0 = time.perf_counter()
    by_chrom: dict[str, list] = {}
    pieces = Counter(it.chrom for it in items)
    pending = {c: pieces[c] for c in out_sizes}  # 0: all N, written as gap rows
    mode = WRITER or ("thread" if ann.device.type == "cuda" else "inline")
    with OutputSet(out, legacy=ANNOTATION_FILES) as outputs:
        stage = outputs.prefix
        sink = LocalWriter(dict(writer_args, prefix=stage), fa, ann.io_lock, res, names,
                           counts, rules, threaded=mode == "thread",
                           budget_bp=2 * ann.batch_steps * res,
                           run_scores=uncertainty.has_run_posteriors(ann.model.crf))
        with sink, ui.progress() as bar:
            task = bar.add_task("annotating", total=total_bp, unit="bp", info="")
            prog = BpProgress(bar, task, total_bp)
            groups = list(batches.groups(items, res, ann.window, ann.max_steps,
                                         ann.batch_steps))
            # a reader thread reads the next batches of short contigs, and the first
            # encoder windows of the next long sequence (emissions reads its other windows
            # ahead the same way), while this thread encodes and decodes
            loaded = ahead(lambda g: ann.load_first(g[0]) if len(g) == 1 else
                           ann.load_batch([(it.chrom, it.start, it.end) for it in g]), groups)
            try:
                _annotate_groups(ann, groups, loaded, sink, prog, by_chrom, pending,
                                 sample_rows, sizes, out_sizes, res)
                sink.finish()
            finally:
                loaded.close()
            write_summary(f"{stage}.summary.tsv", names, counts, meta)
            if opts.samples:
                uncertainty.write_samples(f"{stage}.samples.bed", sample_rows, names,
                                          list(writer_args["scheme"].colors), res)
        secs = time.perf_counter() - t0
        ui.log(f"annotated {total_bp:,} bp in {secs:.1f} s "
               f"({total_bp / max(secs, 1e-9):,.0f} bp/s)"
               + (f"; {given_bp - total_bp:,} bp of N written as gaps"
                  if total_bp < given_bp else ""))
        if ann.seam_stats is not None:  # certified windows (annotate/seams.py)
            ui.log(ann.seam_stats.line() + "; " + ann.seam_stats.posterior_line())
        for line in dropped_lines(rules, sink.writer):
            ui.log(line)
        stopped = sink.writer.internal_stop_genes
        if stopped:
            ui.log(f"warning: {len(stopped)} predicted gene(s) read a stop codon inside "
                   f"their CDS (the gene model forbids standard-code stops within an exon "
                   f"only: a codon split by an intron, or a stop of another "
                   f"--genetic-code, can be one): "
                   f"{', '.join(stopped[:5])}{' ...' if len(stopped) > 5 else ''} "
                   f"(internal_stops in {out}.proteins.fa)"
                   + ("" if getattr(ann.model.crf, "split_stops", True) else
                      "; --split-stops decodes the loci of split ones again without"))
        counts = getattr(ann.model.crf, "split_stop_counts", {})
        if getattr(ann.model.crf, "split_stops", False):
            ui.log(f"split stop codons: {counts.get('found', 0)} taken out, "
                   f"{counts.get('left', 0)} left (genemodel/splitstops.py)")
        # PREFIX.json: the provenance and every file of the set
        provenance.write_sidecar(f"{stage}.json", prov, outputs.staged_files())
    return outputs.files


def _warn_all_n(fa, sizes: dict[str, int]) -> None:
    """A model that reads no sequence, given a FASTA that is all N on some chromosomes
    (a stand-in genome): those are written as one gap row each; say so."""
    if len(sizes) > 1000:  # a fragmented assembly, not a stand-in genome: no scan
        return
    all_n = []
    for c, n in sizes.items():
        r = fa.n_runs(c)
        if len(r) == 1 and r[0, 0] == 0 and r[0, 1] == n:
            all_n.append(c)
    if all_n:
        ui.log(f"warning: the FASTA is all N on {', '.join(all_n[:8])}"
               + (" ..." if len(all_n) > 8 else "") + ": written as gap rows although the "
               "model reads only tracks; annotate with --chrom-sizes instead of --fasta")


def _set_penalty(head, attr: str, configured: float, given: float | None, exists: bool,
                 why: str, infinite: bool = False) -> None:
    """Set a gene-model head's annotate-time penalty `attr` from the command line (`given`)
    or the checkpoint's annotate section (`configured`). A model without it (`exists`
    False) ignores a configured value (e.g. an argmax head trained from the demo config),
    but asking for one on the command line is an error saying `why`."""
    flag = "--" + attr.replace("_", "-")
    value = _at_least_zero(flag, configured if given is None else given, infinite)
    if not exists:
        if given:
            raise SemisegError(f"{flag}: {why}")
        return
    if value:
        setattr(head, attr, value)


def _at_least_zero(flag: str, value: float, infinite: bool = False) -> float:
    if not (value >= 0 and (math.isfinite(value) or infinite)):
        what = "a number >= 0 or inf" if infinite else "a finite number >= 0"
        raise SemisegError(f"{flag}: expected {what}, got {value}")
    return float(value)


LONG_CHAIN = 200_000  # CRF steps above which a whole-sequence decode on a GPU gets a hint


def _annotate_groups(ann, groups, loaded, sink, prog, by_chrom, pending,
                     sample_rows, sizes, out_sizes, res) -> None:
    """Decode each group (a long sequence, or short ones in one batch) and hand every
    chromosome to the writer once all its parts are decoded (a chromosome with no part,
    all N, when those before it are); `prog`: progress.BpProgress."""

    def flush():
        for chrom in list(pending):
            if pending[chrom]:
                break
            sink.submit(chrom, out_sizes[chrom], by_chrom.pop(chrom, []))
            del pending[chrom]

    for group, x in zip(groups, loaded):
        if len(group) == 1:
            it = group[0]
            prog.start(it.end - it.start, it.chrom)
            ann.progress = prog.stage
            try:
                lab, post, sig, runp, smp, whole = ann.run_long(it, x)
            finally:
                ann.progress = None
            how = ("as one sequence" if whole else
                   f"in certified windows of {ann._whole_steps():,} steps (seams checked: "
                   "docs/decoding.md)" if ann.seam_stats is not None and not smp else
                   f"in overlapping windows of {ann.max_steps:,} steps (centres kept)")
            ui.log(f"{it.chrom}:{it.start:,}-{it.end:,} ({len(lab):,} steps) decoded {how}")
            if whole and ann.device.type == "cuda" and len(lab) > LONG_CHAIN and not ann.hinted:
                ann.hinted = True  # once per run
                ui.log(f"  (on a GPU one sequence is one chain, {LONG_CHAIN:,}+ steps run at "
                       "about CPU speed; --max-decode-steps 20000 decodes in windows, "
                       "several times faster: docs/gpu.md)")
            results = [(it, lab, post, sig, runp, smp)]
        else:
            ui.log(f"{len(group)} short sequences decoded together in one batch")
            results = [(it, *r) for it, r in zip(group, ann.run_batch(group, x))]
        for it, lab, post, sig, runp, smp in results:
            by_chrom.setdefault(it.chrom, []).append((it.start, it.end, lab, post, sig, runp))
            if smp is not None:
                s0 = it.start // res
                sample_rows.append((it.chrom, min(it.end, sizes[it.chrom]),
                                    [[(a + s0, d, c) for a, d, c in rows] for rows in smp]))
            pending[it.chrom] -= 1
            prog.done(it.end - it.start, it.chrom)
        flush()
    flush()

