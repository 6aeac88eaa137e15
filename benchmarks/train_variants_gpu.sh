#!/usr/bin/env bash
# Train variants of a config over several seeds, all at once on one GPU, and bring the
# checkpoints back (one archive per run under $OUT, or results/ without it) to be scored
# elsewhere (benchmarks/score_gene_runs.py). Run on the GPU machine from the repository
# root:
#   bash benchmarks/train_variants_gpu.sh LIMIT_SECONDS "NAME[:S,S..] [--set k=v ...]" ...
# (NAME:1,2 trains seeds 1 and 2 of that variant)
# Environment: CONFIG (default configs/demo.yaml), SEEDS (default "0 1 2"),
# GPUTEST="tests/..." also runs those GPU tests alongside.
# Each run stops at LIMIT_SECONDS (SIGINT: last.pt and best.pt keep the last complete
# epoch). Needs the wheels in .whlg/ on a machine with no package index (docs/gpu.md).
set -uo pipefail
LIMIT=${1:?LIMIT_SECONDS}
shift
CONFIG=${CONFIG:-configs/demo.yaml}
SEEDS=${SEEDS:-0 1 2}
OUTDIR=${OUT:-results}
source benchmarks/gpu_setup.sh
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())"
rm -rf runs logs  # a warm machine keeps ignored folders between calls
mkdir -p runs logs "$OUTDIR"
if [ -n "${GPUTEST:-}" ]; then
  timeout 300 python -m pytest -q -p no:cacheprovider -m gpu $GPUTEST > logs/gputest.log 2>&1 &
fi
t0=$(date +%s)
for variant in "$@"; do
  set -- $variant
  name=${1%%:*}; seeds=$SEEDS
  [[ "$1" == *:* ]] && seeds=$(echo "${1#*:}" | tr , ' ')
  shift
  for s in $seeds; do
    timeout -s INT "$LIMIT" python -m semiseg.cli train --config "$CONFIG" \
        --out runs/${name}_s$s --set train.seed=$s "$@" --threads 1 --quiet \
        > logs/${name}_s$s.log 2>&1 &
  done
done
wait
echo "training wall $(( $(date +%s) - t0 )) s"
for r in runs/*; do
  echo "== $(basename $r): $(grep -c . $r/metrics.tsv 2>/dev/null) lines"
  tail -1 $r/metrics.tsv 2>/dev/null | cut -f1-5,10-
  [ -f $r/best.pt ] && tar czf "$OUTDIR/$(basename $r).tgz" $r/best.pt $r/metrics.tsv $r/config.yaml
done
tail -n 3 -q logs/*.log | grep -i "error\|traceback" | head
[ -f logs/gputest.log ] && tail -5 logs/gputest.log
tar czf "$OUTDIR/logs.tgz" logs
ls -la "$OUTDIR" | tail -n +2 | wc -l
