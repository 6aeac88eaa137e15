#!/usr/bin/env bash
# Code trees side by side on one GPU: the semi-CRF kernels (crf_speed.py's shapes) and
# the fly config's training step (train_stages.py at the config's 8 x 10,000), each
# tree's semiseg/ in a copy of its own, alternating, in one call.
#
#   bash benchmarks/kernel_ab.sh pack REV...   # here: .trees/REV/semiseg from git (ignored)
#   bash benchmarks/kernel_ab.sh run           # on the GPU machine: carry .trees and .whlg
# Environment: SHAPES (crf_speed.py --shapes; "64,20000,256,37;8,20000,100,24"), ROUNDS
# (1), STEP (1: the training step too; 0: kernels only), KERNELS (1; 0: the step only). The working tree is timed too,
# as "tree". Prints each tree's static and periodic rows and its step table, headed by
# date and GPU.
set -uo pipefail
stage=${1:-run}; shift || true
if [ "$stage" = pack ]; then
  for rev in "$@"; do
    n=${rev//\//_}; rm -rf ".trees/$n"; mkdir -p ".trees/$n"
    git archive "$rev" semiseg ':!semiseg/models' | tar -x -C ".trees/$n" || exit 1
    echo "$rev = $(git rev-parse --short "$rev")" > ".trees/$n/REV"
  done
  # the working tree as packed (the GPU machine's copy has no history of its own: its
  # `git log` once named a stale commit)
  git describe --always --dirty > .trees/TREE_REV
  du -sh .trees; exit 0
fi
source benchmarks/gpu_setup.sh > /dev/null || exit 1
R=$PWD
SHAPES=${SHAPES:-"64,20000,256,37;8,20000,100,24"}
FLY=(--config configs/gene_structure.yaml --set inputs.fasta=../data/fly/chr2R_2M_6M.fa
     --set labels.annotation=../data/fly/chr2R_2M_6M.gff3 --set windows.chroms=null
     --set "windows.holdout=[chr2R_2M_6M:3000000-4000000]")
shopt -s nullglob; names=(tree); for t in .trees/*/; do names+=("$(basename "$t")"); done
for n in "${names[@]}"; do  # each tree: its semiseg, the scripts and data of this one
  d=/tmp/ab/$n; rm -rf "$d"; mkdir -p "$d/benchmarks"
  if [ "$n" = tree ]; then cp -r semiseg "$d/"; else cp -r ".trees/$n/semiseg" "$d/"; fi
  cp benchmarks/*.py "$d/benchmarks/"; ln -sfn "$R/data" "$d/data"; ln -sfn "$R/configs" "$d/configs"
done
date -u; nvidia-smi --query-gpu=name --format=csv,noheader
echo "tree: the working tree of $(cat .trees/TREE_REV 2>/dev/null || echo 'unknown (not packed)')"
for ((k = 1; k <= ${ROUNDS:-1}; k++)); do
  for n in "${names[@]}"; do
    if [ "${KERNELS:-1}" = 1 ]; then
      echo "== round $k, $n $(cat .trees/$n/REV 2>/dev/null): crf_speed rows (static, periodic)"
      (cd /tmp/ab/$n && PYTHONPATH=. python benchmarks/crf_speed.py --sections shapes \
          --shapes "$SHAPES" --reps 5 2>&1 | grep -E "^\| (periodic|static) " | sort -u)
    fi
    if [ "${STEP:-1}" = 1 ]; then
      echo "== round $k, $n: the fly config's training step"
      (cd /tmp/ab/$n && python benchmarks/train_stages.py "${FLY[@]}" --shapes 8x10000 \
          --reps 5 --top 4 2>&1 | grep -E "^\| 8 x|_kernel$" | sort -u)
    fi
  done
done
