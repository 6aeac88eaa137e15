"""The Snakemake pipeline (Snakefile, configs/pipeline.yaml, envs/, profiles/slurm).

- `snakemake --lint` is clean (and fails on the previous Snakefile, so the check can fail);
- a dry run with hostile paths (a space, `$(...)`, backticks, `;`, quotes) prints shell
  commands that bash runs as exactly the intended argument lists (every printed command
  is run through bash with `semiseg` and `torchrun` replaced by functions that write their
  arguments, and the arguments are compared with the ones built here), and nothing the
  paths hold is ever run;
- real runs: the shard rule with hostile paths; (slow) the annotate rule on 3 kb of yeast
  chrI with the shipped model in folders holding spaces (every declared output present,
  logs non-empty); (slow) the whole pipeline with training on a slice of the yeast data;
- `semiseg merge` of the gene-finder outputs against one whole-genome job;
- the scatter over shards (a dry run of 2,500 contigs in 4 shards) and the SLURM
  profile's resource names (those snakemake-executor-plugin-slurm maps to sbatch).

Without snakemake (the `pipeline` extra) the module is skipped, except under CI. The
hostile-path cases are marked `fault` (issue 43's fault suite) and named
`shell_injection`, which benchmarks/fault_suite.py counts as security cases once its
FILES list includes this module.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "yeast"
SHIPPED = ROOT / "semiseg" / "models" / "yeast_cds_frames.pt"

if importlib.util.find_spec("snakemake") is None:
    if os.environ.get("CI"):
        raise ImportError("snakemake is not installed: CI must run the pipeline tests "
                          "(pip install -e .[pipeline])")
    pytest.skip("snakemake is not installed (pip install -e .[pipeline])",
                allow_module_level=True)
pytest.importorskip("pyBigWig")

# each of these in a path must stay one literal argument and never run
HOSTILE = "a b $(touch PWNED1) `touch PWNED2` ; touch PWNED3 ; 'q\" $HOME * ~ &"
PWNED = ("PWNED1", "PWNED2", "PWNED3")
LABELS = ["intergenic", "CDS+", "CDS-", "intron+", "intron-"]  # demo.yaml / shipped model
PER_PREFIX = (["bed", "browser.bed", "stranded.bed", "gff3", "summary.tsv", "boundary.bw",
               "entropy.bw", "boundary_entropy.bw", "cds.fa", "proteins.fa"]
              + [f"posterior.{n}.bw" for n in LABELS])


def _env():
    """This interpreter's scripts (semiseg, snakemake) first on PATH."""
    bindir = os.path.dirname(sys.executable)
    return dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def snakemake(workdir: Path, configfile: Path | None, *args, timeout=600):
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
           "--directory", str(workdir), "--cores", "2", *args]
    if configfile is not None:  # last: --configfile takes every path after it
        cmd += ["--configfile", str(configfile)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=workdir)


def _fasta(path: Path, chroms: dict[str, tuple[Path, int, int]]) -> dict[str, int]:
    """Write slices of the yeast chromosomes; returns {name: length}."""
    sizes = {}
    with open(path, "w") as out:
        for name, (src, a, b) in chroms.items():
            seq = "".join(ln.strip() for ln in open(src) if not ln.startswith(">"))[a:b]
            out.write(f">{name}\n" + "".join(seq[i:i + 60] + "\n"
                                             for i in range(0, len(seq), 60)))
            sizes[name] = len(seq)
    return sizes


def _gff_slice(dst: Path, limits: dict[str, int]) -> None:
    with open(DATA / "yeast_chrI_chrII.gff3") as src, open(dst, "w") as out:
        for line in src:
            f = line.split("\t")
            if line.startswith("#") or (len(f) == 9 and f[0] in limits
                                        and int(f[4]) <= limits[f[0]]):
                out.write(line)


def _pipeline_config(path: Path, **changes) -> Path:
    cfg = yaml.safe_load(open(ROOT / "configs" / "pipeline.yaml"))
    cfg.update(changes)
    path.write_text(yaml.safe_dump(cfg))
    return path


def _no_pwned(*roots: Path) -> None:
    for root in roots:
        for _, dirs, files in os.walk(root):
            hit = set(PWNED) & (set(files) | set(dirs))
            assert not hit, f"a path's text ran as a command: {hit} in {root}"


def _shell_commands(stdout: str) -> list[str]:
    return [ln[len("Shell command: "):] for ln in stdout.splitlines()
            if ln.startswith("Shell command: ") and ln != "Shell command: None"]


# --------------------------------------------------------------------------- lint
def test_lint_clean():
    proc = snakemake(ROOT, None, "--lint")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_lint_fails_on_the_old_snakefile(tmp_path):
    """The lint check can fail: the Snakefile before issue 44 (no conda, no log on three
    rules, hard-coded prefixes) exits non-zero."""
    old = subprocess.run(["git", "-C", str(ROOT), "show", "ff6faf0:Snakefile"],
                         capture_output=True, text=True)
    if old.returncode != 0:
        pytest.skip("the old Snakefile is not in this checkout's history")
    # its one import of semiseg, at today's path (shards moved into annotate/, issue 45),
    # so that the Snakefile is read and linted
    text = old.stdout.replace("from semiseg.shards import", "from semiseg.annotate.shards import")
    (tmp_path / "Snakefile").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--snakefile",
                           str(tmp_path / "Snakefile"), "--cores", "1"],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=300)
    assert proc.returncode != 0 and "Specify a conda environment" in proc.stdout + proc.stderr


# ------------------------------------------------------------------ hostile paths
@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Inputs and an output folder whose paths hold HOSTILE, with a training config."""
    base = tmp_path_factory.mktemp("pipe")
    d = base / f"in {HOSTILE}"
    d.mkdir()
    sizes = _fasta(d / f"genome {HOSTILE}.fa", {"chrI": (DATA / "chrI.fa", 0, 3000)})
    _gff_slice(d / f"truth {HOSTILE}.gff3", {"chrI": 3000})
    cfg = yaml.safe_load(open(ROOT / "configs" / "demo.yaml"))
    cfg["inputs"]["fasta"] = str(d / f"genome {HOSTILE}.fa")
    cfg["labels"]["annotation"] = str(d / f"truth {HOSTILE}.gff3")
    (d / f"train {HOSTILE}.yaml").write_text(yaml.safe_dump(cfg))
    (d / f"track {HOSTILE}.bw").write_text("")
    return base, d, sizes


@pytest.mark.fault
def test_shell_injection_dry_run_quotes_every_path(hostile):
    """Every printed command, run by bash with stand-ins for semiseg and torchrun, passes
    exactly the intended arguments: each hostile path one argument, nothing run."""
    base, d, _ = hostile
    out = base / f"out {HOSTILE}"
    fasta, train_cfg = d / f"genome {HOSTILE}.fa", d / f"train {HOSTILE}.yaml"
    truth, track = d / f"truth {HOSTILE}.gff3", d / f"track {HOSTILE}.bw"
    conf = _pipeline_config(
        base / "pipeline.yaml", train_config=str(train_cfg), fasta=str(fasta), chroms=["chrI"],
        truth=str(truth), outdir=str(out), tracks={"dnase": str(track)},
        train_set=[f"inputs.fasta={fasta}"],
        annotate_args=f"--samples 2 --seed {shlex.quote(HOSTILE)}",
        gpus={"train": 2, "annotate": 0})
    proc = snakemake(base, conf, "-n", "-p")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    commands = _shell_commands(proc.stdout)
    assert len(commands) == 5, proc.stdout[-3000:]
    _no_pwned(base)

    # run each printed command with stand-ins that write their arguments to the log
    (out / "logs").mkdir(parents=True)
    stub = ("semiseg() { printf '%s\\0' semiseg \"$@\"; }; "
            "torchrun() { printf '%s\\0' torchrun \"$@\"; }; ")
    argv = {}
    for cmd in commands:
        run = subprocess.run(["bash", "-c", stub + cmd], cwd=base, timeout=60,
                             capture_output=True, text=True)
        _no_pwned(base)
        logs = list((out / "logs").iterdir())  # each command's stand-in wrote its log
        assert run.returncode == 0 and len(logs) == 1, (cmd, run.stderr, logs)
        words = logs[0].read_text().split("\0")[:-1]
        logs[0].unlink()
        argv[words[1] if words[0] == "semiseg" else words[5]] = words

    p = str(out)
    assert argv["shard"] == ["semiseg", "shard", "--fasta", str(fasta), "--chroms", "chrI",
                             "--out", f"{p}/shards"]
    # the train rule's inputs: its config and the files the config names
    block = proc.stdout[proc.stdout.index("rule train:"):]
    assert block.splitlines()[1] == f"    input: {train_cfg}, {fasta}, {truth}"
    assert argv["train"] == ["torchrun", "--standalone", "--nproc_per_node=2", "-m",
                             "semiseg.cli", "train", "--config", str(train_cfg), "--out",
                             f"{p}/model", "--device", "auto", "--threads", "1", "--set",
                             f"inputs.fasta={fasta}"]
    assert argv["annotate"] == ["semiseg", "annotate", "--model", f"{p}/model/best.pt",
                                "--fasta", str(fasta), "--regions", f"{p}/shards/0000.bed",
                                "--track", f"dnase={track}", "--out", f"{p}/parts/0000",
                                "--device", "auto", "--threads", "1", "--samples", "2",
                                "--seed", HOSTILE]
    assert argv["merge"] == ["semiseg", "merge", f"{p}/parts/0000", "--out",
                             f"{p}/annotation"]
    assert argv["evaluate"] == ["semiseg", "evaluate", "--pred", f"{p}/annotation.bed",
                                "--truth", str(truth), "--model", f"{p}/model/best.pt",
                                "--fasta", str(fasta), "--tolerance", "20", "--out",
                                f"{p}/evaluation"]
    # --samples: the samples BED is a declared output of annotate and merge
    assert f"{p}/annotation.samples.bed" in proc.stdout


@pytest.mark.fault
def test_braces_in_a_path_are_refused(hostile, tmp_path):
    """Snakemake reads braces in file patterns as wildcards: a path with one is refused
    with a message naming the config key, not misread."""
    base, d, _ = hostile
    conf = _pipeline_config(tmp_path / "p.yaml", model=str(SHIPPED),
                            fasta=str(d / f"genome {HOSTILE}.fa"), chroms=None, truth=None,
                            outdir=str(tmp_path / "out {x}"))
    proc = snakemake(tmp_path, conf, "-n")
    assert proc.returncode != 0
    assert "pipeline config outdir:" in proc.stdout + proc.stderr
    assert "braces are wildcards" in proc.stdout + proc.stderr


@pytest.mark.fault
def test_shell_injection_real_shard_run_with_hostile_paths(hostile):
    """A real run of the shard rule: the FASTA and the output folder hold HOSTILE."""
    base, d, sizes = hostile
    out = base / f"shard out {HOSTILE}"
    conf = _pipeline_config(base / "shard.yaml", train_config=str(d / f"train {HOSTILE}.yaml"),
                            fasta=str(d / f"genome {HOSTILE}.fa"), chroms=None,
                            truth=None, outdir=str(out))
    proc = snakemake(base, conf, str(out / "shards" / "shards.tsv"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _no_pwned(base)
    rows = (out / "shards" / "shards.tsv").read_text().splitlines()
    assert rows == ["shard\tchrom\tlength"] + [f"0000\t{c}\t{n}" for c, n in sizes.items()]
    assert (out / "shards" / "0000.bed").read_text() == "".join(
        f"{c}\t0\t{n}\n" for c, n in sizes.items())
    assert "shard" in (out / "logs" / "shard.log").read_text()
    assert (out / "benchmarks" / "shard.tsv").read_text().startswith("s\t")


# ------------------------------------------------------------------- real runs
def _check_annotation(prefix: str, sizes: dict[str, int], genes: bool = True) -> None:
    """Every file of PREFIX present and non-empty (the FASTA of the genes only where
    `genes` are known to be called), the BED covering each chromosome, the bigWigs'
    chromosomes those of the FASTA."""
    import pyBigWig

    for ext in PER_PREFIX:
        assert os.path.isfile(f"{prefix}.{ext}"), f"{prefix}.{ext}"
        if genes or not ext.endswith(".fa"):
            assert os.path.getsize(f"{prefix}.{ext}") > 0, f"{prefix}.{ext}"
    rows = [ln.split("\t") for ln in open(f"{prefix}.bed")]
    for chrom, n in sizes.items():
        mine = [(int(r[1]), int(r[2])) for r in rows if r[0] == chrom]
        assert mine[0][0] == 0 and mine[-1][1] == n  # the whole chromosome, in order,
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))  # without gaps
    for ext in ("boundary.bw", "entropy.bw", "posterior.CDS+.bw"):
        bw = pyBigWig.open(f"{prefix}.{ext}")
        assert bw.chroms() == sizes
        bw.close()


@pytest.mark.slow
def test_annotate_rule_with_shipped_model_in_folders_with_spaces(tmp_path):
    """The annotate rule for real (and the shard rule it needs) on 3 kb of chrI with the
    shipped model (config `model`: no training), every path holding a space: every
    declared output of the part present and valid, logs and benchmarks written."""
    d = tmp_path / "my genome"
    d.mkdir()
    sizes = _fasta(d / "chr I.fa", {"chrI": (DATA / "chrI.fa", 0, 3000)})
    out = tmp_path / "pipeline out"
    conf = _pipeline_config(tmp_path / "p.yaml", model=str(SHIPPED), fasta=str(d / "chr I.fa"),
                            chroms=None, truth=None, outdir=str(out), device="cpu")
    proc = snakemake(tmp_path, conf, str(out / "parts" / "0000.bed"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_annotation(str(out / "parts" / "0000"), sizes)
    assert (out / "parts" / "0000.json").stat().st_size > 0
    assert not (out / "model").exists()  # the given model, no training
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    assert set(logs) == {"shard.log", "annotate.0000.log"}
    assert "annotated 3,000 bp" in logs["annotate.0000.log"]
    assert all(logs.values()), [n for n, t in logs.items() if not t]
    assert {p.name for p in (out / "benchmarks").iterdir()} == {"shard.tsv",
                                                                 "annotate.0000.tsv"}


@pytest.mark.slow
def test_pipeline_end_to_end_with_training(tmp_path):
    """The whole pipeline on the yeast data: a tiny model trained on 40 kb of chrII for
    one epoch, chrI[0:12 kb] and a 1,777-bp contig annotated as two shards, merged in
    FASTA order and evaluated against the SGD truth."""
    d = tmp_path / "yeast data"
    d.mkdir()
    _fasta(d / "train.fa", {"chrII": (DATA / "chrII.fa", 0, 40_000)})
    sizes = _fasta(d / "test.fa", {"chrI": (DATA / "chrI.fa", 0, 12_000),
                                   "ctg1": (DATA / "chrI.fa", 20_000, 21_777)})
    _gff_slice(d / "truth.gff3", {"chrI": 12_000, "chrII": 40_000})
    cfg = yaml.safe_load(open(ROOT / "configs" / "demo.yaml"))
    cfg["inputs"]["fasta"] = "train.fa"
    cfg["labels"]["annotation"] = "truth.gff3"
    cfg["windows"].update({"chroms": None, "size": 4000, "valid_fraction": 0.2})
    cfg["model"].update({"channels": 8, "layers": 2, "max_dilation": 2, "fine_channels": 8,
                         "fine_layers": 1})
    cfg["crf"]["max_duration"] = 32
    cfg["train"].update({"epochs": 1, "batch_size": 4, "patience": 0})
    cfg["annotate"].update({"window": 20000, "context": 2000})
    (d / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run out"
    conf = _pipeline_config(tmp_path / "p.yaml", train_config=str(d / "tiny.yaml"),
                            fasta=str(d / "test.fa"), chroms=None,
                            truth=str(d / "truth.gff3"), outdir=str(out), device="cpu")
    proc = snakemake(tmp_path, conf)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for f in ("best.pt", "last.pt", "metrics.tsv", "config.yaml"):
        assert (out / "model" / f).is_file()
    _check_annotation(str(out / "annotation"), sizes, genes=False)
    assert [ln.split("\t")[0] for ln in open(out / "annotation.bed")][-1] == "ctg1"
    import json

    res = json.loads((out / "evaluation.json").read_text())
    assert set(res["chromosomes"]) == set(sizes)
    side = json.loads((out / "annotation.json").read_text())
    assert [d["prefix"] for d in side["merged"]] == [str(out / "parts" / s)
                                                     for s in ("0000", "0001")]
    logs = {p.name: p.read_text() for p in (out / "logs").iterdir()}
    jobs = {"train", "shard", "annotate.0000", "annotate.0001", "merge", "evaluate"}
    assert set(logs) == {f"{j}.log" for j in jobs}
    assert all(logs.values()), [n for n, t in logs.items() if not t]
    assert {p.name for p in (out / "benchmarks").iterdir()} == {f"{j}.tsv" for j in jobs}


def test_merge_joins_gene_outputs_as_one_job(tmp_path):
    """`semiseg merge` (the pipeline's gather step) of two parts annotated one chromosome
    each gives the stranded BED and the genes' CDS and protein FASTA of annotating both
    chromosomes in one job (the oracle), and a sidecar holding the parts' sidecars; a
    part's broken sidecar is one clear error and leaves no merged files."""
    from semiseg import ui
    from semiseg.annotate.merge import merge
    from semiseg.annotate.run import annotate

    _fasta(tmp_path / "g.fa", {"A": (DATA / "chrI.fa", 0, 1000),
                               "B": (DATA / "chrI.fa", 1500, 2500)})
    ui.set_quiet(True)
    kw = {"device": "cpu", "threads": 1}
    annotate(str(SHIPPED), str(tmp_path / "g.fa"), str(tmp_path / "one" / "a"), **kw)
    for c in "AB":
        annotate(str(SHIPPED), str(tmp_path / "g.fa"), str(tmp_path / "parts" / c),
                 chroms=[c], **kw)
    written = merge([str(tmp_path / "parts" / c) for c in "AB"], str(tmp_path / "m" / "a"))
    import re

    def renumbered(text):
        """Gene numbers count over the whole run (B's first gene is gene3 in one job,
        gene1 in its part): number them per chromosome, in order."""
        seen = {}

        def one(m):
            key = (m[1], m[2])
            seen.setdefault(key, sum(k[0] == m[1] for k in seen) + 1)
            return f"{m[1]}:gene{seen[key]}"
        return re.sub(r"(\w+):gene(\d+)", one, text)

    for ext in ("stranded.bed", "cds.fa", "proteins.fa"):
        assert str(tmp_path / "m" / f"a.{ext}") in written
        one = renumbered((tmp_path / "one" / f"a.{ext}").read_text())
        assert renumbered((tmp_path / "m" / f"a.{ext}").read_text()) == one, ext
    # the merged sidecar: each part's own sidecar, in order, and the merged files
    import json

    doc = json.loads((tmp_path / "m" / "a.json").read_text())
    parts = [json.loads((tmp_path / "parts" / f"{c}.json").read_text()) for c in "AB"]
    assert [{k: v for k, v in d.items() if k != "prefix"} for d in doc["merged"]] == parts
    assert sorted(doc["files"]) == sorted(os.path.basename(f) for f in written
                                          if not f.endswith(".json"))
    (tmp_path / "parts" / "B.json").write_text("[1, 2]")
    from semiseg.errors import SemisegError

    with pytest.raises(SemisegError, match="B.json is not a provenance sidecar"):
        merge([str(tmp_path / "parts" / c) for c in "AB"], str(tmp_path / "m2" / "a"))
    assert not (tmp_path / "m2").exists() or not list((tmp_path / "m2").iterdir())
    # both chromosomes hold a gene (chrI's YAL069W-like ORF on A, YAL068C on B)
    heads = [ln for ln in (tmp_path / "m" / "a.proteins.fa").read_text().splitlines()
             if ln.startswith(">")]
    assert {h[1:].split(":")[0] for h in heads} == {"A", "B"}


# ------------------------------------------------------------- scatter, SLURM
def test_scatter_over_shards(tmp_path):
    """A dry run with `shards: 4` over 400 contigs and `model: yeast`: one shard job, four
    annotate jobs (each with the shipped model's file and the pipeline's annotate_args),
    one merge of the four parts in order."""
    import random

    rng = random.Random(5)
    with open(tmp_path / "frag.fa", "w") as fh:
        for i in range(400):
            fh.write(f">scaffold_{i}\n" + "".join(rng.choice("ACGT")
                                                  for _ in range(rng.randint(200, 3000)))
                     + "\n")
    conf = _pipeline_config(tmp_path / "pipe.yaml", model="yeast",  # a shipped model's name
                            fasta=str(tmp_path / "frag.fa"), chroms=None, shards=4, truth=None,
                            outdir=str(tmp_path / "pipe"), gpus={"train": 2, "annotate": 1},
                            annotate_args="--max-decode-steps 20000 --batch-steps 2000000")
    proc = snakemake(tmp_path, conf, "-n", "-p")
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = proc.stdout[proc.stdout.index("Job stats:"):].split("\n\n")[0]
    counts = {f[0]: int(f[1]) for f in map(str.split, stats.splitlines())
              if len(f) == 2 and f[1].isdigit()}
    assert counts == {"shard": 1, "annotate": 4, "merge": 1, "all": 1, "total": 7}, counts
    cmds = _shell_commands(proc.stdout)
    annotate = [shlex.split(c) for c in cmds if c.startswith("semiseg annotate")]
    assert sorted(a[a.index("--regions") + 1] for a in annotate) == [
        f"{tmp_path}/pipe/shards/{s}.bed" for s in ("0000", "0001", "0002", "0003")]
    assert all(a[a.index("--model") + 1] == str(SHIPPED) for a in annotate)
    assert all(a[a.index("--threads") + 2:a.index(">")] == [
        "--max-decode-steps", "20000", "--batch-steps", "2000000"] for a in annotate)
    merge = next(shlex.split(c) for c in cmds if c.startswith("semiseg merge"))
    assert merge[2:6] == [f"{tmp_path}/pipe/parts/{s}" for s in ("0000", "0001", "0002", "0003")]
    # the GPU jobs' SLURM placement: one node, all CPUs in one task (see gpu_resources)
    assert "nodes=1" in proc.stdout and "gpu=1" in proc.stdout


def test_gpu_training_is_one_node_under_torchrun(tmp_path):
    """gpus.train = 2: training under torchrun with two processes, and the job asks for
    2 GPUs, one node, threads x GPUs CPUs in one task and the configured GPU partition."""
    _fasta(tmp_path / "g.fa", {"chrI": (DATA / "chrI.fa", 0, 3000)})
    conf = _pipeline_config(tmp_path / "train.yaml", train_config=str(ROOT / "configs/demo.yaml"),
                            fasta=str(tmp_path / "g.fa"), chroms=None, truth=None,
                            outdir=str(tmp_path / "pipe"), gpus={"train": 2, "annotate": 1},
                            threads={"train": 4, "annotate": 1},
                            slurm={"gpu_partition": "gpu"})
    proc = snakemake(tmp_path, conf, "-n", "-p")
    assert proc.returncode == 0, proc.stderr[-3000:]
    train = next(c for c in _shell_commands(proc.stdout) if "train" in c.split()[:7])
    assert train.startswith("torchrun --standalone --nproc_per_node=2 -m semiseg.cli train")
    block = proc.stdout[proc.stdout.index("rule train:"):]
    block = block[:block.index("Shell command")]
    res = next(ln for ln in block.splitlines() if ln.strip().startswith("resources:"))
    for want in ("gpu=2", "nodes=1", "cpus_per_task=8", "slurm_partition=gpu"):
        assert want in res, res
    assert "tasks" not in res.replace("cpus_per_task", "")  # no --ntasks-per-gpu
    train_res = res
    block = proc.stdout[proc.stdout.index("rule shard:"):]
    res = next(ln for ln in block.splitlines() if ln.strip().startswith("resources:"))
    assert "slurm_partition" not in res and "gpu" not in res  # CPU rules: the default

    # where the SLURM executor plugin is installed: the sbatch options it makes of them
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    class Resources(dict):
        def __getattr__(self, key):
            try:
                return self[key]
            except KeyError:
                raise AttributeError(key) from None

    pairs = (kv.split("=", 1) for kv in train_res.split(":", 1)[1].split(", "))
    resources = Resources((k.strip(), int(v) if v.isdigit() else v) for k, v in pairs)
    job = SimpleNamespace(resources=resources, threads=4, name="train")
    call = get_submit_command(job, {"run_uuid": "u", "slurm_logfile": "l", "comment_str": "c",
                                    "account": "", "partition": "", "workdir": ""})
    words = (call + set_gres_string(job)).split()
    assert {"--gpus=2", "--nodes=1", "--cpus-per-task=8"} <= set(words), words
    assert not any(w.startswith(("--ntasks", "--gres")) for w in words), words


def test_slurm_profile_resources():
    """The profile uses resource names snakemake-executor-plugin-slurm maps to sbatch
    (docs/further.md of the plugin): no GPU request through slurm_extra (the plugin
    rejects --gres/--gpus there), and no `tasks` on GPU rules (sent as --ntasks-per-gpu)."""
    prof = yaml.safe_load(open(ROOT / "profiles" / "slurm" / "config.yaml"))
    assert prof["executor"] == "slurm"
    known = {"slurm_account", "slurm_partition", "mem_mb", "mem_mb_per_cpu", "runtime",
             "cpus_per_task", "cpus_per_gpu", "nodes", "tasks", "gpu", "gpu_model", "gres",
             "constraint", "slurm_extra", "clusters", "qos"}
    sets = [prof.get("default-resources") or {}] + list((prof.get("set-resources")
                                                        or {}).values())
    for res in sets:
        assert set(res) <= known, set(res) - known
        assert "--gres" not in str(res.get("slurm_extra", "")), res
        assert "--gpus" not in str(res.get("slurm_extra", "")), res
    for rule in prof.get("set-resources") or {}:
        assert rule in {"train", "shard", "annotate", "merge", "evaluate"}, rule
