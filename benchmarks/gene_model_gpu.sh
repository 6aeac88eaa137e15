#!/usr/bin/env bash
# Train the demo's reading-frame gene model (configs/demo.yaml) over 3 seeds, the same
# model with K = 3 (almost a linear-chain CRF: start and stop codons need 3 bp) and the
# same encoder with a per-base argmax head (crf.head=argmax, no CRF), on one GPU in
# parallel; annotate chrI with each and evaluate at tolerance 0 and 20. Then time
# annotation of chrI + chrII at 1 bp with the first model (bp/s).
# Run on the GPU machine from the repository root:
#   bash benchmarks/gene_model_gpu.sh [TRAIN_SECONDS]
# Environment: VARIANT="name --set k=v ..." trains that variant instead of K = 3;
# NO_ARGMAX, TRAIN_ONLY (checkpoints back, no scoring), NO_SPEED, GPUTEST="tests".
# Needs the wheels in .whlg/ on a machine with no package index (docs/gpu.md).
set -uo pipefail
LIMIT=${1:-420}
OUTDIR=${OUT:-results}
source benchmarks/gpu_setup.sh
python -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())"
rm -rf runs logs  # a warm machine keeps ignored folders between calls
mkdir -p runs logs
if [ -n "${GPUTEST:-}" ]; then  # the GPU tests, alongside the training
  timeout 300 python -m pytest -q -p no:cacheprovider -m gpu $GPUTEST > logs/gputest.log 2>&1 &
fi
t0=$(date +%s)
for s in 0 1 2; do
  timeout -s INT "$LIMIT" python -m semiseg.cli train --config configs/demo.yaml \
      --out runs/gene_s$s --set train.seed=$s --threads 2 --quiet > logs/gene_s$s.log 2>&1 &
  if [ -n "${VARIANT:-}" ]; then  # VARIANT="name --set key=value ..." instead of K = 3
    set -- $VARIANT
    vname=$1; shift
    timeout -s INT "$LIMIT" python -m semiseg.cli train --config configs/demo.yaml \
        --out runs/${vname}_s$s --set train.seed=$s "$@" --threads 2 --quiet \
        > logs/${vname}_s$s.log 2>&1 &
  else
  timeout -s INT "$LIMIT" python -m semiseg.cli train --config configs/demo.yaml \
      --out runs/k3_s$s --set train.seed=$s --set crf.max_duration=3 --threads 2 --quiet \
      > logs/k3_s$s.log 2>&1 &
  fi
  [ -n "${NO_ARGMAX:-}" ] || timeout -s INT "$LIMIT" python -m semiseg.cli train --config configs/demo.yaml \
      --out runs/argmax_s$s --set train.seed=$s --set crf.head=argmax --threads 2 --quiet \
      > logs/argmax_s$s.log 2>&1 &
done
wait
echo "training wall $(( $(date +%s) - t0 )) s"
if [ -n "${TRAIN_ONLY:-}" ]; then  # bring the checkpoints back; score elsewhere
  mkdir -p "$OUTDIR"
  for r in runs/*; do
    tail -2 $r/metrics.tsv | cut -f1-8
    [ -f $r/best.pt ] && tar czf "$OUTDIR/$(basename $r).tgz" $r/best.pt $r/metrics.tsv $r/config.yaml
  done
  tar czf "$OUTDIR/logs.tgz" logs
  exit 0
fi
score() {
  r=$1; n=$(basename $r)
  python -m semiseg.cli annotate --model $r/best.pt --fasta data/yeast/chrI.fa \
      --out $r/chrI > logs/annotate_$n.log 2>&1
  for tol in 0 20; do
    python -m semiseg.cli evaluate --pred $r/chrI.bed --truth data/yeast/yeast_chrI_chrII.gff3 \
        --model $r/best.pt --tolerance $tol --out $r/eval_tol$tol > logs/eval_${n}_$tol.log 2>&1
  done
}
for r in runs/*; do score $r & done
wait
for r in runs/*; do
  n=$(basename $r)
  echo "== $n"; tail -2 $r/metrics.tsv 2>/dev/null | cut -f1-8
  grep -i "macro\|annotated" logs/annotate_$n.log logs/eval_${n}_0.log | head -5
done
# annotation speed at 1 bp, the GPU to itself: chrI + chrII (1.04 Mb), wall clock
[ -n "${NO_SPEED:-}" ] || {
cat data/yeast/chrI.fa data/yeast/chrII.fa > runs/both.fa
t1=$(date +%s.%N)
python -m semiseg.cli annotate --model runs/gene_s0/best.pt --fasta runs/both.fa \
    --out runs/speed > logs/annotate_speed.log 2>&1
t2=$(date +%s.%N)
python -c "print('annotate chrI+chrII at 1 bp: %.1f s wall, %.0f bp/s (incl. start-up)' % ($t2 - $t1, 1043386 / ($t2 - $t1)))"
}
[ -f logs/gputest.log ] && tail -15 logs/gputest.log
mkdir -p "$OUTDIR"
for r in runs/*; do  # one archive per run: the device returns files of <= 16 MiB
  [ -f $r/best.pt ] && tar czf "$OUTDIR/$(basename $r).tgz" $r/best.pt $r/metrics.tsv $r/config.yaml $r/eval_tol*.tsv $r/chrI.gff3 $r/chrI.bed
done
tar czf "$OUTDIR/logs.tgz" logs runs/gene_s0/chrI.bed runs/gene_s0/chrI.gff3
ls -la "$OUTDIR"
