# semiseg pipeline: train -> shard the genome -> annotate each shard (scatter) -> merge
# -> evaluate.
#
#   snakemake --cores 2                                  # local, settings in configs/pipeline.yaml
#   snakemake --cores 2 --configfile my.yaml             # other settings
#   snakemake --profile profiles/slurm                   # SLURM (snakemake-executor-plugin-slurm)
#
# GPUs are a resource ("gpu"): give `--resources gpu=N` locally to run at most N GPU jobs at
# once; the SLURM profile turns it into a GPU request.
#
# Shards (semiseg/shards.py): consecutive chromosomes of the FASTA grouped by total length,
# `shards: N` (at most N jobs) or `shard_size: BP` (at most BP per job; a longer chromosome
# alone, kept whole); with neither, one job per chromosome. The plan is made here, when
# the Snakefile is read, from the FASTA index (.fai; built when missing), so the jobs are
# known up front; the `shard` rule writes the same plan as files for the annotate jobs.

configfile: "configs/pipeline.yaml"

from semiseg.shards import fasta_sizes, plan_shards, shard_names

OUT = config["outdir"]
CHROMS = list(config.get("chroms") or [])  # empty or null: every sequence of the FASTA
SHARD_ARGS = (f"--shards {config['shards']}" if config.get("shards") else
              f"--shard-size {int(float(config['shard_size']))}" if config.get("shard_size")
              else "")
SHARDS = shard_names(len(plan_shards(
    fasta_sizes(config["fasta"], CHROMS or None), shards=config.get("shards") or None,
    shard_size=int(float(config["shard_size"])) if config.get("shard_size") else None)))
TRACKS = " ".join(f"--track {n}={p}" for n, p in (config.get("tracks") or {}).items())
TRAIN_SET = " ".join(f"--set {kv}" for kv in (config.get("train_set") or []))
ANNOTATE_ARGS = config.get("annotate_args") or ""
ANNOTATION = ["bed", "browser.bed", "gff3", "summary.tsv", "boundary.bw"]


def final_targets():
    targets = expand(f"{OUT}/annotation.{{ext}}", ext=ANNOTATION)
    if config.get("truth"):
        targets += [f"{OUT}/evaluation.tsv", f"{OUT}/evaluation.json"]
    return targets


rule all:
    input:
        final_targets(),


rule train:
    input:
        config=config["train_config"],
    output:
        best=f"{OUT}/model/best.pt",
        last=f"{OUT}/model/last.pt",
        metrics=f"{OUT}/model/metrics.tsv",
        config=f"{OUT}/model/config.yaml",
    log:
        f"{OUT}/logs/train.log",
    params:
        out=f"{OUT}/model",
        device=config["device"],
        extra=TRAIN_SET,
        # gpus.train > 1: one process per GPU under torchrun (semiseg/distributed.py)
        launch=(f"torchrun --standalone --nproc_per_node={config['gpus']['train']} "
                "-m semiseg.cli" if int(config["gpus"]["train"]) > 1 else "semiseg"),
    threads: config["threads"]["train"]
    resources:
        gpu=config["gpus"]["train"],
        mem_mb=config["mem_mb"]["train"],
        runtime=config["runtime"]["train"],
    shell:
        "{params.launch} train --config {input.config} --out {params.out} "
        "--device {params.device} --threads {threads} --quiet {params.extra} 2> {log}"


rule shard:
    input:
        fasta=config["fasta"],
    output:
        plan=f"{OUT}/shards/shards.tsv",
        regions=expand(f"{OUT}/shards/{{shard}}.bed", shard=SHARDS),
    params:
        out=f"{OUT}/shards",
        how=SHARD_ARGS,
        chroms=f"--chroms {','.join(CHROMS)}" if CHROMS else "",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "semiseg shard --fasta {input.fasta} {params.how} {params.chroms} --out {params.out} "
        "--quiet"


rule annotate:
    input:
        model=f"{OUT}/model/best.pt",
        fasta=config["fasta"],
        regions=f"{OUT}/shards/{{shard}}.bed",
    output:
        expand(f"{OUT}/parts/{{{{shard}}}}.{{ext}}", ext=ANNOTATION),
    log:
        f"{OUT}/logs/annotate.{{shard}}.log",
    params:
        prefix=f"{OUT}/parts/{{shard}}",
        device=config["device"],
        tracks=TRACKS,
        extra=ANNOTATE_ARGS,
    threads: config["threads"]["annotate"]
    resources:
        gpu=config["gpus"]["annotate"],
        mem_mb=config["mem_mb"]["annotate"],
        runtime=config["runtime"]["annotate"],
    shell:
        "semiseg annotate --model {input.model} --fasta {input.fasta} "
        "--regions {input.regions} {params.tracks} --out {params.prefix} "
        "--device {params.device} --threads {threads} --quiet {params.extra} 2> {log}"


rule merge:
    input:
        expand(f"{OUT}/parts/{{shard}}.{{ext}}", shard=SHARDS, ext=ANNOTATION),
    output:
        expand(f"{OUT}/annotation.{{ext}}", ext=ANNOTATION),
    params:
        parts=expand(f"{OUT}/parts/{{shard}}", shard=SHARDS),
        out=f"{OUT}/annotation",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "semiseg merge {params.parts} --out {params.out} --quiet"


rule evaluate:
    input:
        pred=f"{OUT}/annotation.bed",
        truth=config["truth"] if config.get("truth") else [],
        model=f"{OUT}/model/best.pt",
    output:
        tsv=f"{OUT}/evaluation.tsv",
        json=f"{OUT}/evaluation.json",
    params:
        out=f"{OUT}/evaluation",
        tolerance=config["tolerance"],
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "semiseg evaluate --pred {input.pred} --truth {input.truth} --model {input.model} "
        "--tolerance {params.tolerance} --out {params.out} --quiet > /dev/null"
