#!/usr/bin/env bash
# Multi-GPU training speed-up at a fixed global batch (issue 13): the demo's gene model
# (configs/demo.yaml, 1 bp) trained for EPOCHS epochs by one process and by torchrun with
# 2 processes (BATCH/2 windows each per batch), on the same machine, one after the other;
# prints the per-epoch seconds (metrics.tsv, epoch 1 dropped as warm-up) and the median
# speed-up. BATCH (global batch, default 8: the demo's) and WINDOW (window bp, default
# 6000: the demo's) set the shape; the chain kernels take about the same time per call
# for any batch up to the GPU's width, so a small global batch split in two gains little.
# Run on a 2-GPU machine from the repository root:
#   bash benchmarks/ddp_speedup.sh [EPOCHS] [BATCH] [WINDOW]
# Needs the wheels in .whlg/ on a machine with no package index (docs/gpu.md).
set -uo pipefail
EPOCHS=${1:-5}
BATCH=${2:-8}
WINDOW=${3:-6000}
source benchmarks/gpu_setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader
TAG=b${BATCH}w${WINDOW}
rm -rf runs/ddp1_$TAG runs/ddp2_$TAG
ARGS="--config configs/demo.yaml --set train.epochs=$EPOCHS --set train.patience=100 --set train.batch_size=$BATCH --set windows.size=$WINDOW --threads 4 --quiet"
CUDA_VISIBLE_DEVICES=0 python -m semiseg.cli train $ARGS --out runs/ddp1_$TAG > runs_ddp1_$TAG.log 2>&1 || tail -5 runs_ddp1_$TAG.log
torchrun --standalone --nproc_per_node=2 -m semiseg.cli train $ARGS --out runs/ddp2_$TAG > runs_ddp2_$TAG.log 2>&1 || tail -5 runs_ddp2_$TAG.log
TAG=$TAG BATCH=$BATCH WINDOW=$WINDOW python - <<'PY'
import csv, os, statistics
tag = os.environ["TAG"]
def secs(run):
    rows = list(csv.DictReader(open(f"runs/{run}_{tag}/metrics.tsv"), delimiter="\t"))
    return [float(r["seconds"]) for r in rows[1:]], rows[-1]
(s1, r1), (s2, r2) = secs("ddp1"), secs("ddp2")
print(f"global batch {os.environ['BATCH']} windows of {os.environ['WINDOW']} bp")
print("| processes | epochs timed | median s/epoch | epoch seconds | last train loss | last val loss |")
print("|---|---|---|---|---|---|")
for n, s, r in ((1, s1, r1), (2, s2, r2)):
    print(f"| {n} | {len(s)} | {statistics.median(s):.2f} | {', '.join(f'{x:.2f}' for x in s)} | {float(r['train_loss']):.5f} | {float(r['val_loss']):.5f} |")
print(f"speed-up (median s/epoch, 1 process / 2 processes): {statistics.median(s1) / statistics.median(s2):.2f}x")
PY
