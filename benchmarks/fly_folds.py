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

RUNS holds f0_s0 ... f5_s0 (as `score` leaves them: best.pt, valid.bed, valid.gff3).
--annotate: annotate each fold's block here (CPU) with the fold's model and these extra
`semiseg annotate` arguments (e.g. "--intron-penalty 1.5"), instead of reading the
runs' own valid.* files: a decode setting judged on six blocks at once. Several
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

FOLDS = 6
BLOCK = 500_000
CHROM = fly_baselines.CHROM
_ID = re.compile(r"(?<=[\t;])(ID|Parent)=([^;\t\n]+)")


def pool_bed(paths: list[str], out: str) -> None:
    """The folds' BED rows in one file (the first file's header lines only)."""
    with open(out, "w") as f:
        for i, p in enumerate(paths):
            for line in open(p):
                head = line.startswith(("track", "browser", "#"))
                if head and i > 0:
                    continue
                f.write(line)


def pool_gff(paths: list[str], out: str) -> None:
    """The folds' GFF3 features in one file, each fold's IDs and Parents prefixed with
    its name (gene IDs restart in every annotation); header lines of the first only."""
    with open(out, "w") as f:
        for i, p in enumerate(paths):
            for line in open(p):
                if line.startswith("#"):
                    if i == 0 and not line.startswith("###"):
                        f.write(line)
                    continue
                f.write(_ID.sub(lambda m, i=i: m.group(1) + "=" + ",".join(
                    f"f{i}.{v}" for v in m.group(2).split(",")), line))


def annotate_fold(run: str, k: int, extra: str, work: str, threads: int) -> str:
    """The fold's block annotated here with its model and `extra`; returns the prefix."""
    bed = os.path.join(work, f"block{k}.bed")
    with open(bed, "w") as f:
        f.write(f"{CHROM}\t{k * BLOCK}\t{(k + 1) * BLOCK}\n")
    prefix = os.path.join(work, f"f{k}")
    cmd = [sys.executable, "-m", "semiseg.cli", "annotate", "--model",
           os.path.join(run, "best.pt"), "--fasta", fly_baselines.FASTA, "--regions", bed,
           "--out", prefix, "--quiet", "--threads", str(threads), *shlex.split(extra)]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return prefix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs")
    ap.add_argument("--name", action="append", default=[])
    ap.add_argument("--annotate", action="append", default=[])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="where the pooled files go (a temporary "
                    "folder by default)")
    args = ap.parse_args()
    if len(args.name) != len(args.annotate):
        raise SystemExit("fly_folds: give one --name per --annotate")
    runs = [os.path.join(args.runs, f"f{k}_s0") for k in range(FOLDS)]
    for r in runs:
        if not os.path.isfile(os.path.join(r, "best.pt")):
            raise SystemExit(f"fly_folds: {r}/best.pt: not found (train f0..f5 first)")
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
            prefixes = [annotate_fold(r, k, extra, work, args.threads)
                        for k, r in enumerate(runs)]
        pooled = os.path.join(out, f"{name}_pooled")
        pool_bed([p + ".bed" for p in prefixes], pooled + ".bed")
        pool_gff([p + ".gff3" for p in prefixes], pooled + ".gff3")
        preds += ["--pred", f"{name}={pooled}.bed"]
    fly_baselines.main(["--region", "folds", "--no-baselines", *preds])


if __name__ == "__main__":
    main()
