# semiseg pipeline: train -> shard the genome -> annotate each shard (scatter) -> merge
# -> evaluate. docs/pipeline.md has the whole story (local, conda, container, SLURM).
#
#   snakemake --cores 2                                  # local, settings in configs/pipeline.yaml
#   snakemake --cores 2 --configfile my.yaml             # other settings
#   snakemake --cores 2 --sdm conda                      # each rule in envs/semiseg.yaml
#   snakemake --cores 2 --sdm apptainer --config container=IMAGE   # each rule in IMAGE
#   snakemake --profile profiles/slurm                   # SLURM (snakemake-executor-plugin-slurm)
#
# Every shell command quotes what it interpolates ({input:q}, {output:q}, {params.x:q},
# {log:q}): a path holding a space, a quote, `;` or `$(...)` is one literal argument,
# never shell code. Option lists from the config (train_set, tracks, annotate_args) are
# lists of arguments, each quoted on its own.
#
# GPUs are a resource ("gpu"): give `--resources gpu=N` locally to run at most N GPU jobs at
# once; the SLURM executor plugin turns it into `--gpus=N`.
#
# Shards (semiseg/annotate/shards.py): consecutive chromosomes of the FASTA grouped by total length,
# `shards: N` (at most N jobs) or `shard_size: BP` (at most BP per job; a longer chromosome
# alone, kept whole); with neither, one job per chromosome. The plan is made here, when
# the Snakefile is read, from the FASTA index (.fai; built when missing), so the jobs are
# known up front; the `shard` rule writes the same plan as files for the annotate jobs.

import os
import shlex

from snakemake.exceptions import WorkflowError

from semiseg.annotate.shards import fasta_sizes, plan_shards, shard_names


configfile: "configs/pipeline.yaml"


# the checkout, for envs/semiseg.yaml's `pip install -e ${SEMISEG_SRC}`
os.environ.setdefault("SEMISEG_SRC", workflow.basedir)


def pattern(path, key):
    """`path` (from config `key`) as a Snakemake file pattern. Snakemake reads braces in a file
    pattern as wildcards (doubling them does not escape them everywhere), so a path with
    a brace is refused with a clear error instead of being misread."""
    path = str(path)
    if "{" in path or "}" in path:
        raise WorkflowError(f"pipeline config {key}: {path!r}: a path holding {{ or }} "
                            "cannot be a Snakemake input or output (braces are wildcards); "
                            "rename or link it")
    return path


def arguments(key):
    """Config `key` as a list of command-line arguments: a list as given, a string split
    as the shell would split it (quotes group words; nothing is expanded or run)."""
    value = config.get(key) or []
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as err:
            raise ValueError(f"pipeline config {key}: {err} in {value!r}") from None
    return [str(v) for v in value]


def model_file():
    """Config `model` as a checkpoint file: a shipped model's name (`semiseg models`, e.g.
    yeast) or a path; a run folder means its best.pt. None: the train rule's best.pt."""
    if not config.get("model"):
        return None
    from semiseg.checkpoint import resolve_model

    path = resolve_model(str(config["model"]))
    return pattern(os.path.join(path, "best.pt") if os.path.isdir(path) else path, "model")


def train_config():
    """The training config (with its `train_set`) when the pipeline trains, else None."""
    if config.get("model"):
        return None
    from semiseg.config.load import load_config

    return load_config(config["train_config"], list(config.get("train_set") or []))


def training_data(cfg):
    """The files training reads (the genome, the labels, the tracks, a scheme file), as
    inputs of the train rule: a changed file trains again."""
    if cfg is None:
        return []

    def names(value):
        return [value] if isinstance(value, str) else list(value or [])

    files = names(cfg.inputs.fasta) + names(cfg.inputs.chrom_sizes)
    files += names(cfg.labels.annotation)
    files += [t["path"] if isinstance(t, dict) else t for t in cfg.inputs.tracks.values()]
    if isinstance(cfg.labels.scheme, str) and os.path.isfile(cfg.labels.scheme):
        files.append(cfg.labels.scheme)
    return [pattern(f, "train_config (a file it names)") for f in files]


def model_scheme():
    """The model's label scheme (one posterior bigWig per label; a gene_structure scheme
    also gives the genes' CDS and protein FASTA), read when the Snakefile is: from `model`
    when given, else from the training config."""
    if config.get("model"):
        from semiseg.checkpoint import load_checkpoint

        return load_checkpoint(model_file()).scheme
    from semiseg.genome.scheme import load_scheme

    return load_scheme(TRAIN_CONFIG.labels.scheme)


TRAIN_CONFIG = train_config()
OUT = pattern(config["outdir"], "outdir")
CHROMS = config.get("chroms") or []  # empty or null: every sequence of the FASTA
if isinstance(CHROMS, str):  # `--config chroms=chrI,chrII`
    CHROMS = [c for c in CHROMS.split(",") if c]
CHROMS = [str(c) for c in CHROMS]
SHARD_SIZE = int(float(config["shard_size"])) if config.get("shard_size") else None
SHARD_ARGS = (["--shards", str(config["shards"])] if config.get("shards") else
              ["--shard-size", str(SHARD_SIZE)] if SHARD_SIZE else [])
SHARDS = shard_names(len(plan_shards(
    fasta_sizes(config["fasta"], CHROMS or None), shards=config.get("shards") or None,
    shard_size=SHARD_SIZE)))
TRACKS = [a for n, p in (config.get("tracks") or {}).items() for a in ("--track", f"{n}={p}")]
TRAIN_SET = [a for kv in config.get("train_set") or [] for a in ("--set", str(kv))]
ANNOTATE_ARGS = arguments("annotate_args")
GPUS = {step: int(config["gpus"][step]) for step in ("train", "annotate")}
# a trained model instead of the train rule (config `model`), else the trained one
MODEL = model_file() or f"{OUT}/model/best.pt"
ENV = "envs/semiseg.yaml"
CONTAINER = config.get("container") or None  # an image for --sdm apptainer; off when empty

# what `semiseg annotate --out PREFIX` writes (semiseg/annotate/run.py, genome/write.py;
# docs/outputs.md) and `semiseg merge` joins: every file is a declared output, so later
# rules can ask for any; annotation(..., sidecar=True) adds the provenance sidecar
# PREFIX.json (annotate's for a part, merge's for the merged set).
SCHEME = model_scheme()
ANNOTATION = (["bed", "browser.bed", "stranded.bed", "gff3", "summary.tsv", "boundary.bw",
               "entropy.bw", "boundary_entropy.bw"]
              + [pattern(f"posterior.{n}.bw", "the model's label names") for n in SCHEME.names])
if SCHEME.kind == "gene_structure":  # the genes' spliced CDS and their proteins
    ANNOTATION += ["cds.fa", "proteins.fa"]
if any(a == "--samples" or a.startswith("--samples=") for a in ANNOTATE_ARGS):
    ANNOTATION.append("samples.bed")


def annotation(prefix, sidecar=False):
    """The annotation files of PREFIX (a Snakemake pattern), with annotate's provenance
    sidecar PREFIX.json when `sidecar`."""
    return [f"{prefix}.{ext}" for ext in ANNOTATION + ["json"] * sidecar]


def prefix(output):
    """PREFIX of an annotation's outputs (its .bed file less the extension)."""
    return output[0][: -len(".bed")]


def gpu_resources(step):
    """SLURM placement of a GPU step (snakemake-executor-plugin-slurm resources): its GPU
    partition, one node (torchrun's processes share one host) and all the step's CPUs in
    one task. No `tasks`: on a GPU job the plugin sends `tasks` as --ntasks-per-gpu, while
    torchrun is one task that starts one process per GPU itself."""
    if not GPUS[step]:
        return {}
    res = {"nodes": 1, "cpus_per_task": int(config["threads"][step]) * GPUS[step]}
    if (config.get("slurm") or {}).get("gpu_partition"):
        res["slurm_partition"] = config["slurm"]["gpu_partition"]
    return res


def final_targets():
    targets = annotation(f"{OUT}/annotation", sidecar=True)
    if config.get("truth"):
        targets += [f"{OUT}/evaluation.tsv", f"{OUT}/evaluation.json"]
    return targets


localrules:
    all,


rule all:
    input:
        final_targets(),
    default_target: True


rule train:
    input:
        config=pattern(config["train_config"], "train_config"),
        data=training_data(TRAIN_CONFIG),
    output:
        best=f"{OUT}/model/best.pt",
        last=f"{OUT}/model/last.pt",
        metrics=f"{OUT}/model/metrics.tsv",
        config=f"{OUT}/model/config.yaml",
    log:
        f"{OUT}/logs/train.log",
    benchmark:
        f"{OUT}/benchmarks/train.tsv"
    conda:
        ENV
    container:
        CONTAINER
    params:
        out=lambda wildcards, output: os.path.dirname(output.best),
        device=config["device"],
        extra=TRAIN_SET,
        # gpus.train > 1: one process per GPU under torchrun (semiseg/train/distributed.py)
        launch=(["torchrun", "--standalone", f"--nproc_per_node={GPUS['train']}", "-m",
                 "semiseg.cli"] if GPUS["train"] > 1 else ["semiseg"]),
    threads: config["threads"]["train"]
    resources:
        gpu=GPUS["train"],
        mem_mb=config["mem_mb"]["train"],
        runtime=config["runtime"]["train"],
        **gpu_resources("train"),
    shell:
        "{params.launch:q} train --config {input.config:q} --out {params.out:q} "
        "--device {params.device:q} --threads {threads} {params.extra:q} > {log:q} 2>&1"


rule shard:
    input:
        fasta=pattern(config["fasta"], "fasta"),
    output:
        plan=f"{OUT}/shards/shards.tsv",
        regions=expand(f"{OUT}/shards/{{shard}}.bed", shard=SHARDS),
    log:
        f"{OUT}/logs/shard.log",
    benchmark:
        f"{OUT}/benchmarks/shard.tsv"
    conda:
        ENV
    container:
        CONTAINER
    params:
        out=lambda wildcards, output: os.path.dirname(output.plan),
        how=SHARD_ARGS,
        chroms=["--chroms", ",".join(CHROMS)] if CHROMS else [],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "semiseg shard --fasta {input.fasta:q} {params.how:q} {params.chroms:q} "
        "--out {params.out:q} > {log:q} 2>&1"


rule annotate:
    input:
        model=MODEL,
        fasta=pattern(config["fasta"], "fasta"),
        regions=f"{OUT}/shards/{{shard}}.bed",
    output:
        annotation(f"{OUT}/parts/{{shard}}", sidecar=True),
    log:
        f"{OUT}/logs/annotate.{{shard}}.log",
    benchmark:
        f"{OUT}/benchmarks/annotate.{{shard}}.tsv"
    conda:
        ENV
    container:
        CONTAINER
    params:
        prefix=lambda wildcards, output: prefix(output),
        device=config["device"],
        tracks=TRACKS,
        extra=ANNOTATE_ARGS,
    threads: config["threads"]["annotate"]
    resources:
        gpu=GPUS["annotate"],
        mem_mb=config["mem_mb"]["annotate"],
        runtime=config["runtime"]["annotate"],
        **gpu_resources("annotate"),
    shell:
        "semiseg annotate --model {input.model:q} --fasta {input.fasta:q} "
        "--regions {input.regions:q} {params.tracks:q} --out {params.prefix:q} "
        "--device {params.device:q} --threads {threads} {params.extra:q} > {log:q} 2>&1"


rule merge:
    input:
        beds=expand(f"{OUT}/parts/{{shard}}.bed", shard=SHARDS),
        rest=expand(annotation(f"{OUT}/parts/{{shard}}", sidecar=True), shard=SHARDS),
    output:
        annotation(f"{OUT}/annotation", sidecar=True),
    log:
        f"{OUT}/logs/merge.log",
    benchmark:
        f"{OUT}/benchmarks/merge.tsv"
    conda:
        ENV
    container:
        CONTAINER
    params:
        # the parts' prefixes, in shard (FASTA) order
        parts=lambda wildcards, input: [f[: -len(".bed")] for f in input.beds],
        out=lambda wildcards, output: prefix(output),
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "semiseg merge {params.parts:q} --out {params.out:q} > {log:q} 2>&1"


rule evaluate:
    input:
        pred=f"{OUT}/annotation.bed",
        truth=pattern(config["truth"], "truth") if config.get("truth") else [],
        model=MODEL,
        fasta=pattern(config["fasta"], "fasta"),  # gene models' stop codons from the sequence
    output:
        tsv=f"{OUT}/evaluation.tsv",
        json=f"{OUT}/evaluation.json",
    log:
        f"{OUT}/logs/evaluate.log",
    benchmark:
        f"{OUT}/benchmarks/evaluate.tsv"
    conda:
        ENV
    container:
        CONTAINER
    params:
        out=lambda wildcards, output: output.tsv[: -len(".tsv")],
        tolerance=config["tolerance"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "semiseg evaluate --pred {input.pred:q} --truth {input.truth:q} "
        "--model {input.model:q} --fasta {input.fasta:q} --tolerance {params.tolerance:q} "
        "--out {params.out:q} "
        "> {log:q} 2>&1"
