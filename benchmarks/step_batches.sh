#!/usr/bin/env bash
# The fly config's training step at several batch sizes, one process each (issue 41's
# Mb/s): benchmarks/step_syncs.py with the fly flags of fly_gene_gpu.sh, 20 batches, 3
# timed epochs each. Run on the GPU machine from the repository root:
#   SHAPES="8x10000 12x10000 16x10000" bash benchmarks/step_batches.sh
source benchmarks/gpu_setup.sh
FLY=(--set inputs.fasta=../data/fly/chr2R_2M_6M.fa --set labels.annotation=../data/fly/chr2R_2M_6M.gff3
     --set windows.chroms=null --set "windows.holdout=[chr2R_2M_6M:3000000-4000000]"
     --set windows.valid_offset=0.6375 --set windows.valid_fraction=0.1125)
nvidia-smi --query-gpu=name --format=csv,noheader
for sh in ${SHAPES:-8x10000 12x10000 16x10000}; do
  echo "== $sh"
  python benchmarks/step_syncs.py "${FLY[@]}" --shape "$sh" --batches 20 --rounds 3 2>&1 \
    | grep -v "^$" | tail -4
done
