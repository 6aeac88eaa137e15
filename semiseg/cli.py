"""The `semiseg` command line: one thin function per command, no logic here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from . import __version__
from .errors import SemisegError

app = typer.Typer(
    name="semiseg",
    help="Genome segmentation with a neural encoder and an exact semi-Markov CRF.",
    epilog="Start with:\n\n"
           "  semiseg demo demo_out\n"
           "  semiseg annotate --model yeast --fasta genome.fa --out ann/genome\n\n"
           "semiseg COMMAND --help shows each command's options and examples; guides in "
           "docs/ (README.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"semiseg {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    _state["debug"] = debug


# ----------------------------------------------------------------------------- commands
_QUIET = typer.Option(False, "--quiet", "-q", help="No progress bars or log lines.")
_THREADS = typer.Option(
    None, "--threads", min=1,
    help="CPU threads for torch (default 1 on CPU: faster for the semi-CRF's many "
         "small operations).")
_DEVICE = typer.Option(None, "--device", help="auto, cpu or cuda (train: default the "
                                             "config's device key; others: auto).")


# One example (or two) per command, shown at the end of its --help (typer's epilog: blank
# lines separate paragraphs, a single line break is kept).
_EXAMPLES = {
    "train": "Examples:\n\n"
             "  semiseg train --config configs/demo.yaml --out runs/yeast\n"
             "  semiseg train -c my.yaml -o runs/a --set train.epochs=10 --device cuda\n\n"
             "Guide: docs/train.md; every config key: docs/configuration.md.",
    "annotate": "Examples:\n\n"
                "  semiseg annotate --model yeast --fasta genome.fa --out ann/genome\n"
                "  semiseg annotate -m runs/a/best.pt -f genome.fa -o ann/chr2 --chroms chr2\n\n"
                "Guide: docs/annotate.md; the output files: docs/outputs.md.",
    "ensemble": "Examples:\n\n"
                "  semiseg ensemble runs/seed0 runs/seed1 runs/seed2 --out ens.pt\n"
                "  semiseg annotate --model ens.pt --fasta genome.fa --out ann/genome\n\n"
                "docs/commands.md, \"semiseg ensemble\".",
    "merge": "Example:\n\n"
             "  semiseg merge ann/chrI ann/chrII --out ann/genome\n\n"
             "docs/commands.md, \"semiseg merge\".",
    "shard": "Examples:\n\n"
             "  semiseg shard --fasta genome.fa --out shards --shard-size 50e6\n"
             "  semiseg annotate -m yeast -f genome.fa --regions shards/0000.bed "
             "-o ann/0000\n\n"
             "docs/commands.md, \"semiseg shard\"; the Snakefile does this for you: "
             "docs/pipeline.md.",
    "evaluate": "Examples:\n\n"
                "  semiseg evaluate --pred ann/genome.bed --truth genes.gff3 --out eval/genome\n"
                "  semiseg evaluate -p ann/genome.bed -t genes.gff3 --tolerance 0 "
                "--regions test.bed\n\n"
                "docs/commands.md, \"semiseg evaluate\".",
    "demo": "Examples:\n\n"
            "  semiseg demo demo_out\n"
            "  semiseg demo demo_out --train --threads 2\n\n"
            "The data (yeast chrI, chrII and SGD's annotation) come with the package. "
            "docs/demo.md.",
    "models": "Examples:\n\n"
              "  semiseg models\n"
              "  semiseg models --json\n\n"
              "A name listed here works wherever a checkpoint does (annotate --model yeast).",
    "plot": "Examples:\n\n"
            "  semiseg plot -p demo_out/annotation.bed -r chrI:130000-160000 -o region.png\n"
            "  semiseg plot -p ann/genome.bed -r chr2:0-50000 -t genes.gff3 "
            "--posteriors ann/genome -o chr2.pdf\n\n"
            "docs/commands.md, \"semiseg plot\".",
}
_ADVANCED = "Advanced"  # annotate --help: the options most runs leave alone
_GENE_MODEL = "Gene model (defaults: the model's own)"


def _setup(quiet: bool, threads: int | None) -> None:
    from . import ui

    ui.set_quiet(quiet)
    import torch

    torch.set_num_threads(threads or 1)


@app.command(epilog=_EXAMPLES["train"])
def train(
    config: Path = typer.Option(..., "--config", "-c", help="YAML config (see configs/)."),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder (created)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/last.pt."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete the run in OUT "
                                   "(checkpoints, metrics, config) and start again."),
    seed: int | None = typer.Option(None, "--seed", help="Overrides train.seed."),
    epochs: int | None = typer.Option(None, "--epochs", help="Overrides train.epochs."),
    device: str | None = _DEVICE,
    set_: list[str] = typer.Option([], "--set", help="Override any key: --set train.lr=1e-3 "
                                                     "(repeatable)."),
    threads: int | None = _THREADS,
    quiet: bool = _QUIET,
) -> None:
    """Train a model; writes OUT/best.pt, OUT/last.pt, OUT/config.yaml, OUT/metrics.tsv."""
    from .config.load import load_config
    from .train.loop import train as train_job

    _setup(quiet, threads)
    overrides = list(set_)
    overrides += [f"train.seed={seed}"] if seed is not None else []
    overrides += [f"train.epochs={epochs}"] if epochs is not None else []
    overrides += [f"device={device}"] if device is not None else []
    train_job(load_config(config, overrides), out, resume=resume, overwrite=overwrite)


@app.command(epilog=_EXAMPLES["annotate"])
def annotate(
    model: Path = typer.Option(..., "--model", "-m",
                               help="Checkpoint, run folder or shipped model name "
                                    "(semiseg models)."),
    fasta: Path | None = typer.Option(None, "--fasta", "-f", help="Genome FASTA to "
                                                                  "annotate."),
    chrom_sizes: Path | None = typer.Option(
        None, "--chrom-sizes", help="Chrom sizes or .fai instead of --fasta (tracks-only "
                                    "models)."),
    track_sheet: Path | None = typer.Option(
        None, "--track-sheet", help="TSV of tracks (name, path) instead of --track."),
    out: str = typer.Option(..., "--out", "-o", help="Output prefix (PREFIX.bed, ...)."),
    track: list[str] = typer.Option([], "--track", "-t",
                                    help="NAME=PATH per track of the model (repeatable)."),
    regions: Path | None = typer.Option(None, "--regions", help="BED of regions to annotate "
                                                                   "(default: everything)."),
    chroms: list[str] = typer.Option([], "--chroms", help="Chromosomes to annotate (a,b)."),
    intron_penalty: float | None = typer.Option(
        None, "--intron-penalty", rich_help_panel=_GENE_MODEL,
        help="Log-score taken from each intron."),
    intron_rate: float | None = typer.Option(
        None, "--intron-rate", rich_help_panel=_GENE_MODEL,
        help="Log-score per base inside an intron (>= 0)."),
    branch_penalty: float | None = typer.Option(
        None, "--branch-penalty", rich_help_panel=_GENE_MODEL,
        help="Log-score from each intron without a branch point (inf: none)."),
    donor_motif: str | None = typer.Option(
        None, "--donor-motif", rich_help_panel=_GENE_MODEL,
        help="IUPAC motif introns must begin with (e.g. GTANG)."),
    first_atg: bool | None = typer.Option(
        None, "--first-atg/--no-first-atg", rich_help_panel=_GENE_MODEL,
        help="Start codons at the first ATG of their ORF."),
    long_orfs: int | None = typer.Option(
        None, "--long-orfs", rich_help_panel=_GENE_MODEL,
        help="Intergenic ORFs of N+ codons called genes."),
    min_gene_score: float | None = typer.Option(
        None, "--min-gene-score", rich_help_panel=_GENE_MODEL,
        help="Genes whose mean posterior is below this: not called."),
    max_masked_cds: float | None = typer.Option(
        None, "--max-masked-cds", rich_help_panel=_GENE_MODEL,
        help="Genes with more of their CDS soft-masked: not called (1: off)."),
    split_stops: bool | None = typer.Option(
        None, "--split-stops/--allow-split-stops", rich_help_panel=_GENE_MODEL,
        help="Take stop codons split by an intron out of genes."),
    genetic_code: int = typer.Option(
        1, "--genetic-code", rich_help_panel=_GENE_MODEL,
        help="NCBI table for PREFIX.proteins.fa."),
    window: int | None = typer.Option(None, "--window", min=1, rich_help_panel=_ADVANCED,
                                      help="Encoder window, bp."),
    context: int | None = typer.Option(None, "--context", rich_help_panel=_ADVANCED,
                                       help="Context dropped at each side of a window, bp."),
    max_decode_steps: int | None = typer.Option(
        None, "--max-decode-steps", min=1, rich_help_panel=_ADVANCED,
        help="Decode sequences up to this many steps whole."),
    batch_steps: int | None = typer.Option(
        None, "--batch-steps", min=1, rich_help_panel=_ADVANCED,
        help="CRF steps per batch; raise it to fill a GPU."),
    decode_overlap: int | None = typer.Option(
        None, "--decode-overlap", min=0, rich_help_panel=_ADVANCED,
        help="Decoding-window overlap, steps (0: auto)."),
    reverse_complement: str | None = typer.Option(
        None, "--reverse-complement", rich_help_panel=_ADVANCED,
        help="auto, on or off: average both strands."),
    samples: int = typer.Option(0, "--samples", min=0, rich_help_panel=_ADVANCED,
                                help="Also write N posterior samples."),
    seed: int = typer.Option(0, "--seed", rich_help_panel=_ADVANCED,
                             help="Random seed of --samples."),
    signal_precision: float | None = typer.Option(
        None, "--signal-precision", rich_help_panel=_ADVANCED,
        help="Round bigWig values to this (0: exact)."),
    certified_seams: bool = typer.Option(
        True, "--certified-seams/--no-certified-seams", rich_help_panel=_ADVANCED,
        help="Windows with proven seams."),
    bf16: bool = typer.Option(False, "--bf16", rich_help_panel=_ADVANCED,
                              help="bfloat16 encoder on a GPU (faster)."),
    device: str | None = _DEVICE,
    threads: int | None = _THREADS,
    quiet: bool = _QUIET,
) -> None:
    """Segment a genome: PREFIX.bed, .browser.bed, .gff3, .posterior.LABEL.bw, .boundary.bw,
    .entropy.bw, .boundary_entropy.bw, .summary.tsv (and .samples.bed with --samples)."""
    from .annotate.run import AnnotateOptions
    from .annotate.run import annotate as annotate_job
    from .checkpoint import resolve_model

    _setup(quiet, threads)
    names = [c for item in chroms for c in item.split(",") if c]
    options = AnnotateOptions(
        chrom_sizes=str(chrom_sizes) if chrom_sizes else None, tracks=track,
        track_sheet=str(track_sheet) if track_sheet else None,
        regions=str(regions) if regions else None, chroms=names or None,
        device=device or "auto", bf16=bf16, window=window, context=context,
        max_decode_steps=max_decode_steps, batch_steps=batch_steps,
        decode_overlap=decode_overlap, reverse_complement=reverse_complement,
        certified_seams=certified_seams, intron_penalty=intron_penalty,
        intron_rate=intron_rate, branch_penalty=branch_penalty, first_atg=first_atg,
        long_orfs=long_orfs, donor_motif=donor_motif, split_stops=split_stops,
        min_gene_score=min_gene_score, max_masked_cds=max_masked_cds, samples=samples, seed=seed,
        signal_precision=signal_precision, genetic_code=genetic_code)
    annotate_job(resolve_model(model), str(fasta) if fasta else None, out, options)


@app.command(epilog=_EXAMPLES["ensemble"])
def ensemble(
    models: list[Path] = typer.Argument(..., help="Two or more gene-model checkpoints (or "
                                                  "run folders) trained with one config."),
    out: Path = typer.Option(..., "--out", "-o", help="Ensemble checkpoint to write."),
    quiet: bool = _QUIET,
) -> None:
    """Combine gene models that differ only in training (seeds) into one model: annotate
    averages their CRF terms and decodes once (docs/commands.md, "semiseg ensemble")."""
    from . import ui
    from .checkpoint import write_ensemble

    ui.set_quiet(quiet)
    ui.log(f"wrote {write_ensemble([str(m) for m in models], str(out))}")


@app.command(epilog=_EXAMPLES["merge"])
def merge(
    parts: list[str] = typer.Argument(..., help="Annotation prefixes to join, in order."),
    out: str = typer.Option(..., "--out", "-o", help="Output prefix."),
    quiet: bool = _QUIET,
) -> None:
    """Join per-chromosome annotations (from annotate --chroms) into one set of files."""
    from . import ui
    from .annotate.merge import merge as merge_job

    ui.set_quiet(quiet)
    for path in merge_job(parts, out):
        ui.log(f"wrote {path}")


@app.command(epilog=_EXAMPLES["shard"])
def shard(
    fasta: Path = typer.Option(..., "--fasta", "-f", help="Genome FASTA (indexed if needed)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for shards.tsv and SHARD.bed."),
    shards: int | None = typer.Option(None, "--shards", help="Number of shards (at most)."),
    shard_size: float | None = typer.Option(None, "--shard-size",
                                            help="Target bp per shard (50e6 is fine)."),
    chroms: list[str] = typer.Option([], "--chroms", help="Only these chromosomes "
                                                          "(repeatable or comma-separated)."),
    quiet: bool = _QUIET,
) -> None:
    """Group a genome's chromosomes into shards of balanced length for annotation: many
    short contigs together, a long chromosome whole (annotate --regions OUT/SHARD.bed)."""
    from . import ui
    from .annotate.shards import fasta_sizes, plan_shards, write_shards
    from .errors import SemisegError

    ui.set_quiet(quiet)
    size = None
    if shard_size is not None:
        if shard_size != int(shard_size) or shard_size < 1:
            raise SemisegError(f"--shard-size: expected a whole number of bp >= 1, got "
                               f"{shard_size:g}")
        size = int(shard_size)
    names = [c for item in chroms for c in item.split(",") if c]
    sizes = fasta_sizes(str(fasta), names or None)
    groups = plan_shards(sizes, shards=shards, shard_size=size)
    write_shards(groups, sizes, out)
    longest = max(sum(sizes[c] for c in g) for g in groups)
    ui.log(f"{len(sizes):,} sequences ({sum(sizes.values()):,} bp) in {len(groups)} shards "
           f"(largest {longest:,} bp): {out}/shards.tsv")


@app.command(epilog=_EXAMPLES["evaluate"])
def evaluate(
    pred: Path = typer.Option(..., "--pred", "-p", help="Predicted BED (PREFIX.bed), or a "
                              "gene finder's GFF3/GTF."),
    truth: Path = typer.Option(..., "--truth", "-t", help="Truth BED or GFF3/GTF."),
    scheme: str | None = typer.Option(
        None, "--scheme", help="Label scheme: a training config, a scheme YAML or a built-in "
                               "name; maps GFF3 features to labels (default gene_structure)."),
    out: str | None = typer.Option(None, "--out", "-o", help="Write PREFIX.tsv and "
                                                                "PREFIX.json."),
    tolerance: int = typer.Option(10, "--tolerance", min=0, help="Boundary tolerance, bp."),
    model: Path | None = typer.Option(None, "--model", help="Take the scheme from this "
                                                               "checkpoint."),
    regions: Path | None = typer.Option(None, "--regions", help="BED: score only these "
                                        "regions (e.g. a held-out part of a chromosome)."),
    fasta: Path | None = typer.Option(None, "--fasta", "-f", help="Genome FASTA: stop codons "
                                      "of gene models normalised from the sequence."),
    quiet: bool = _QUIET,
) -> None:
    """Accuracy of a segmentation: base-level P/R/F1/MCC, segment F1, boundary F1; with a
    GFF3/GTF truth also exon- and gene-level sensitivity, precision and F1."""
    from . import ui
    from .evaluate.intervals import scheme_for
    from .evaluate.run import evaluate as evaluate_job
    from .evaluate.run import render_gene_table, render_table, write_report

    ui.set_quiet(quiet)
    result = evaluate_job(str(pred), str(truth),
                          scheme=scheme_for(str(pred), model, scheme, str(truth)),
                          tolerance=tolerance,
                          regions=str(regions) if regions else None,
                          fasta=str(fasta) if fasta else None)
    if out:
        write_report(result, out)
    ui.result_console().print(render_table(result, title=f"{pred} vs {truth}"))
    if result.get("genes"):
        ui.result_console().print(render_gene_table(result))
    if result["calibration"]["segments"]:
        from .evaluate.calibration import render

        ui.result_console().print(render(result["calibration"]))
    elif result["calibration"].get("note"):
        ui.result_console().print(f"calibration: {result['calibration']['note']}")


@app.command(epilog=_EXAMPLES["demo"])
def demo(
    outdir: Path = typer.Argument(..., help="Output folder."),
    data: Path | None = typer.Option(None, "--data", help="Folder with chrI.fa, chrII.fa "
                                                             "and yeast_chrI_chrII.gff3."),
    device: str | None = _DEVICE,
    epochs: int | None = typer.Option(None, "--epochs", help="Overrides the demo's epochs "
                                                             "(with --train)."),
    train: bool = typer.Option(False, "--train", help="Train the model on chrII first "
                               "(30 epochs: about 17 min on a 2-core CPU, a few minutes on "
                               "one H100) instead of using the shipped one."),
    threads: int | None = _THREADS,
    quiet: bool = _QUIET,
) -> None:
    """Annotate yeast chrI with the shipped gene model (or one trained on chrII with
    --train) and evaluate it against the SGD annotation at the exact base."""
    from .demo import run as demo_job

    _setup(quiet, threads)
    demo_job(outdir, data=data, device=device, epochs=epochs, train_model=train)


@app.command(epilog=_EXAMPLES["models"])
def models(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the shipped models (annotate --model NAME): file, scheme, resolution and
    training provenance."""
    from .checkpoint import describe, load_checkpoint, registry

    rows = [describe(name, path, load_checkpoint(path).data) for name, path in registry().items()]
    if as_json:
        import json

        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    from . import ui

    table = Table(title="Shipped models (semiseg annotate --model NAME)")
    for head in ("name", "file", "scheme", "resolution", "trained on", "epochs (best)",
                 "val F1", "version / hash"):
        table.add_column(head)
    for r in rows:
        t = r["training"]
        on = ", ".join(t["fasta"]) + (f" + {t['annotation']}" if t["annotation"] else "")
        on += f" (windows on {', '.join(t['chroms'])})" if t.get("chroms") else ""
        table.add_row(r["name"], f"semiseg/models/{Path(r['file']).name}",
                      f"{r['scheme']} ({len(r['labels'])} labels)",
                      f"{r['resolution']} bp", on,
                      f"{t['epochs_run']} of {t['epochs']} ({t['best_epoch']}), seed "
                      f"{t['seed']}",
                      "-" if t["val_f1"] is None else f"{t['val_f1']:.4f}",
                      f"{r['semiseg_version']} / {r['model_hash']}")
    ui.result_console().print(table)


@app.command(epilog=_EXAMPLES["plot"])
def plot(
    pred: Path = typer.Option(..., "--pred", "-p", help="Predicted BED (PREFIX.bed)."),
    region: str = typer.Option(..., "--region", "-r", help="chrom:start-end (0-based, bp)."),
    out: Path = typer.Option(..., "--out", "-o", help="PNG (or PDF/SVG) to write."),
    truth: Path | None = typer.Option(None, "--truth", "-t", help="Truth BED or GFF3."),
    scheme: str | None = typer.Option(None, "--scheme", help="As for evaluate."),
    posteriors: str | None = typer.Option(
        None, "--posteriors", help="Annotation PREFIX whose posterior bigWigs to draw."),
    model: Path | None = typer.Option(None, "--model", help="Take the scheme from this "
                                                               "checkpoint."),
    quiet: bool = _QUIET,
) -> None:
    """Draw predicted segments (and truth, posteriors) over a region."""
    from . import ui
    from .evaluate.intervals import scheme_for
    from .evaluate.plot import plot_region

    ui.set_quiet(quiet)
    plot_region(str(pred), region, str(out), truth=str(truth) if truth else None,
                scheme=scheme_for(str(pred), model, scheme, str(truth) if truth else None),
                posteriors=posteriors)


def _interrupted(detail: str = "") -> None:
    from .runtime import EXIT_INTERRUPTED, received

    how = " by SIGTERM" if received() == "SIGTERM" else ""
    typer.echo(f"semiseg: interrupted{how}; "
               + (detail or "only complete output files were kept"), err=True)
    # the clean-ups have run; exit now with 130. (With sys.exit a signalled `semiseg
    # demo` in the fault tests once printed this line and still ended as killed by SIGINT,
    # -2: CPython does that when it saw a KeyboardInterrupt escape one of its C-level run
    # calls; which one it was there is not known, it did not happen again by hand.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def _os_error(err: OSError) -> str:
    """One line for an OSError that reached the top: the path and what was wrong."""
    import errno

    where = f"{err.filename}: " if err.filename else ""
    why = {errno.EEXIST: "a file is in the way where a folder is needed",
           errno.ENOTDIR: "a file is in the way where a folder is needed",
           errno.EISDIR: "is a folder, a file is needed",
           errno.EACCES: "permission denied", errno.EROFS: "read-only file system",
           errno.ENOSPC: "no space left on the device"}.get(err.errno)
    return f"{where}{why or err.strerror or type(err).__name__}"


def main() -> None:
    """Console-script entry point. Exit codes (docs/reliability.md): 0 success; 2 a user
    error or a failed write, as one line `semiseg: error: ...`; 130 interrupted (Ctrl-C
    or SIGTERM, e.g. a SLURM time limit): `semiseg: interrupted`, temporary files removed."""
    from .runtime import EXIT_INTERRUPTED, Interrupted, install, keep_freed_memory

    install()  # SIGINT and SIGTERM raise KeyboardInterrupt: clean-ups run
    keep_freed_memory()  # large temporaries reused, not mapped afresh (runtime.py)
    try:
        rc = app(standalone_mode=False)
    except Interrupted as err:  # interrupted, with something to say (train: --resume)
        _interrupted(str(err))
    except SemisegError as err:
        if _state["debug"]:
            raise
        typer.echo(f"semiseg: error: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        _interrupted()
    except OSError as err:  # a path the system refused: a file where a folder must be...
        if _state["debug"]:
            raise
        typer.echo(f"semiseg: error: {_os_error(err)}", err=True)
        sys.exit(2)
    except Exception as err:  # usage errors (missing option, bad value) and the like
        show = getattr(err, "show", None)
        if callable(show) and hasattr(err, "exit_code"):  # click's or typer's own click
            # a usage error (missing option, bad value) as one line, like every error
            fmt = getattr(err, "format_message", None)
            text = " ".join((fmt() if callable(fmt) else str(err)).split())
            ctx = getattr(err, "ctx", None)
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            if text:  # (none: the help was asked for by giving no arguments, and shown)
                typer.echo(f"semiseg: error: {text}{where}", err=True)
            sys.exit(2)
        raise
    # typer turns a KeyboardInterrupt inside a command into the return value 130
    if rc == EXIT_INTERRUPTED:
        _interrupted()
    sys.exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()
