"""Six folds of the fly training sequence pooled into one held-out 0-3 Mb (issue 41).

The validation block 2.55-3.0 Mb holds 72 loci and 7 transcripts with a coding intron
over 5 kb: too few to choose settings that long introns decide (a decode penalty chosen
there was reversed on the test region; docs/gene_model.md). fly_gene_gpu.sh's variants
f0..f5 train the config with its validation block at 0-0.5, 0.5-1.0, ..., 2.5-3.0 Mb
(each fold's best epoch and calibration chosen on its own block) and its `score` stage
annotates each fold's block with that fold's model. This script pools the six blocks'
predictions into one BED and one GFF3 over 0-3 Mb, every base predicted by a model that
never trained on it, and scores them with fly_baselines.py's region "folds".

    python benchmarks/fly_folds.py RUNS [--name NAME] [--annotate "ARGS"] [--threads N]

RUNS holds f0_s0 ... f5_s0 (as `score` leaves them: best.pt, config.yaml, valid.bed,
valid.gff3); each fold's block is read from its config.yaml and must be its block of
fly_baselines.BLOCKS["folds"]. `--folds 0,1,2`: a contiguous subset only (region
folds_0-2: 0-1.5 Mb). `--prefix sm+f`: the runs sm+f0_s0 ... (a variant on the folds).
--annotate: annotate each fold's block here (CPU) with the fold's model and these extra
`semiseg annotate` arguments (e.g. "--intron-penalty 1.5"), instead of reading the
runs' own valid.* files: a decode setting judged on six blocks at once ("via=SCRIPT
ARGS": SCRIPT's `annotate` in place of semiseg's, e.g. benchmarks/map_decode_annotate.py). Several
`--name/--annotate` pairs may be given; each becomes a row. The test region 3-4 Mb is
not touched.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import fly_baselines  # noqa: E402

FOLDS = len(fly_baselines.BLOCKS["folds"])  # fold k holds out the k-th block
CHROM = fly_baselines.CHROM
_ID = re.compile(r"(?<=[\t;])(ID|Parent)=([^;\t\n]+)")


def pool_bed(paths: list[str], out: str, blocks: list[tuple[int, int]]) -> None:
    """The folds' BED rows in one file, each file's rows inside its own block only (an
    annotation of a block writes the rest of the sequence as gap rows, which would lie
    over the other folds' rows); the first file's header lines only."""
    with open(out, "w") as f:
        for i, (p, (lo, hi)) in enumerate(zip(paths, blocks)):
            for line in open(p):
                head = line.startswith(("track", "browser", "#"))
                if head:
                    if i == 0:
                        f.write(line)
                    continue
                a, b = (int(v) for v in line.split("\t")[1:3])
                if lo <= a and b <= hi:
                    f.write(line)


def pool_gff(paths: list[str], out: str, names: list[str] | None = None) -> None:
    """The folds' GFF3 features in one file, each fold's IDs and Parents prefixed with
    its name (names, f0, f1, ... by default; gene IDs restart in every annotation);
    header lines of the first only."""
    names = names or [f"f{i}" for i in range(len(paths))]
    with open(out, "w") as f:
        for i, p in enumerate(paths):
            for line in open(p):
                if line.startswith("#"):
                    if i == 0 and not line.startswith("###"):
                        f.write(line)
                    continue
                f.write(_ID.sub(lambda m, n=names[i]: m.group(1) + "=" + ",".join(
                    f"{n}.{v}" for v in m.group(2).split(",")), line))


def block_of(run: str, length: int) -> tuple[int, int]:
    """The fold's validation block [a, b) on CHROM, as training split it off
    (train.data.split_regions: windows.valid_offset and valid_fraction of the run's own
    config.yaml, fractions of the sequence's length)."""
    import yaml

    w = yaml.safe_load(open(os.path.join(run, "config.yaml")))["windows"]
    off, frac = w["valid_offset"], w["valid_fraction"]
    return int(length * off), int(length * (off + frac))


def write_block(bed: str, block: tuple[int, int]) -> str:
    with open(bed, "w") as f:
        f.write(f"{CHROM}\t{block[0]}\t{block[1]}\n")
    return bed


def own_block_bed(run: str) -> str:
    """RUN/valid_block.bed: the run's own validation block (fly_gene_gpu.sh's `score`
    annotates it as the run's "valid")."""
    from semiseg.genome import Fasta

    length = Fasta(fly_baselines.FASTA).chrom_sizes[CHROM]
    return write_block(os.path.join(run, "valid_block.bed"), block_of(run, length))


def annotate_fold(run: str, k: int, block: tuple[int, int], extra: str, work: str,
                  threads: int) -> str:
    """The fold's block annotated here with its model and `extra`; returns the prefix."""
    bed = write_block(os.path.join(work, f"block{k}.bed"), block)
    prefix = os.path.join(work, f"f{k}")
    args = shlex.split(extra)
    entry = ["-m", "semiseg.cli"]
    if args and args[0].startswith("via="):  # another annotate entry (a script's)
        entry = [args.pop(0)[4:]]
    cmd = [sys.executable, *entry, "annotate", "--model",
           os.path.join(run, "best.pt"), "--fasta", fly_baselines.FASTA, "--regions", bed,
           "--out", prefix, "--quiet", "--threads", str(threads), *args]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return prefix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs")
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--annotate", action="append", default=[])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefix", default="f", help="the runs' variant name before the fold "
                    "number (RUNS/PREFIXk_s0; e.g. nof: fly_gene_gpu.sh's nof0..nof2)")
    ap.add_argument("--folds", default=None, help="a contiguous subset, e.g. 0,1,2 (all six "
                    "by default): their blocks are pooled and scored as region folds_A-B")
    ap.add_argument("--out", default=None, help="where the pooled files go (a temporary "
                    "folder by default)")
    args = ap.parse_args()
    if len(args.name) != len(args.annotate):
        raise SystemExit("fly_folds: give one --name per --annotate")
    ks = list(range(FOLDS)) if args.folds is None else sorted(
        int(k) for k in args.folds.split(","))
    if not ks or ks != list(range(ks[0], ks[-1] + 1)) or ks[-1] >= FOLDS:
        raise SystemExit(f"fly_folds: --folds {args.folds}: give contiguous folds of 0-5")
    runs = [os.path.join(args.runs, f"{args.prefix}{k}_s0") for k in ks]
    for r in runs:
        for f in ("best.pt", "config.yaml"):
            if not os.path.isfile(os.path.join(r, f)):
                raise SystemExit(f"fly_folds: {r}/{f}: not found (train the folds first)")
    from semiseg.genome import Fasta

    length = Fasta(fly_baselines.FASTA).chrom_sizes[CHROM]
    blocks = [block_of(r, length) for r in runs]
    want = [fly_baselines.BLOCKS["folds"][k] for k in ks]
    if blocks != want:
        raise SystemExit(f"fly_folds: the runs' validation blocks {blocks} are not the "
                         f"folds' blocks {want}")
    region = "folds" if len(ks) == FOLDS else f"folds_{ks[0]}-{ks[-1]}"
    fly_baselines.REGIONS[region] = (want[0][0], want[-1][1])  # scored block by block
    fly_baselines.BLOCKS[region] = want
    out = args.out or tempfile.mkdtemp(prefix="fly_folds_")
    os.makedirs(out, exist_ok=True)
    preds = []
    variants = [("folds", None)] + list(zip(args.name, args.annotate))
    for name, extra in variants:
        if extra is None:
            prefixes = [os.path.join(r, "valid") for r in runs]
        else:
            work = os.path.join(out, name)
            os.makedirs(work, exist_ok=True)
            prefixes = [annotate_fold(r, k, b, extra, work, args.threads)
                        for k, r, b in zip(ks, runs, blocks)]
        pooled = os.path.join(out, f"{name}_pooled")
        pool_bed([p + ".bed" for p in prefixes], pooled + ".bed", blocks)
        pool_gff([p + ".gff3" for p in prefixes], pooled + ".gff3", [f"f{k}" for k in ks])
        preds += ["--pred", f"{name}={pooled}.bed"]
    fly_baselines.main(["--region", region, "--no-baselines", *preds])


if __name__ == "__main__":
    main()
