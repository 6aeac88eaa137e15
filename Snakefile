# semiseg pipeline: train -> annotate per chromosome (scatter) -> merge -> evaluate.
#
#   snakemake --cores 2                                  # local, settings in configs/pipeline.yaml
#   snakemake --cores 2 --configfile my.yaml             # other settings
#   snakemake --profile profiles/slurm                   # SLURM (snakemake-executor-plugin-slurm)
#
# GPUs are a resource ("gpu"): give `--resources gpu=N` locally to run at most N GPU jobs at
# once; the SLURM profile turns it into a GPU request.

configfile: "configs/pipeline.yaml"

OUT = config["outdir"]
CHROMS = list(config["chroms"])
TRACKS = " ".join(f"--track {n}={p}" for n, p in (config.get("tracks") or {}).items())
TRAIN_SET = " ".join(f"--set {kv}" for kv in (config.get("train_set") or []))
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
    threads: config["threads"]["train"]
    resources:
        gpu=config["gpus"]["train"],
        mem_mb=config["mem_mb"]["train"],
        runtime=config["runtime"]["train"],
    shell:
        "semiseg train --config {input.config} --out {params.out} --device {params.device} "
        "--threads {threads} --quiet {params.extra} 2> {log}"


rule annotate:
    input:
        model=f"{OUT}/model/best.pt",
        fasta=config["fasta"],
    output:
        expand(f"{OUT}/chroms/{{{{chrom}}}}.{{ext}}", ext=ANNOTATION),
    log:
        f"{OUT}/logs/annotate.{{chrom}}.log",
    params:
        prefix=f"{OUT}/chroms/{{chrom}}",
        device=config["device"],
        tracks=TRACKS,
    threads: config["threads"]["annotate"]
    resources:
        gpu=config["gpus"]["annotate"],
        mem_mb=config["mem_mb"]["annotate"],
        runtime=config["runtime"]["annotate"],
    shell:
        "semiseg annotate --model {input.model} --fasta {input.fasta} --chroms {wildcards.chrom} "
        "{params.tracks} --out {params.prefix} --device {params.device} --threads {threads} "
        "--quiet 2> {log}"


rule merge:
    input:
        expand(f"{OUT}/chroms/{{chrom}}.{{ext}}", chrom=CHROMS, ext=ANNOTATION),
    output:
        expand(f"{OUT}/annotation.{{ext}}", ext=ANNOTATION),
    params:
        parts=expand(f"{OUT}/chroms/{{chrom}}", chrom=CHROMS),
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
