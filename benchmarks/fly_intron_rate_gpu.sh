#!/usr/bin/env bash
# annotate.intron_rate chosen on the fly validation block: each fly model in .flyck/
# (best.pt of benchmarks/fly_gene_gpu.sh runs, copied there) annotates the block
# (2.55-3.0 Mb) and the held-out test region (3-4 Mb) at each rate; one archive back.
#   bash benchmarks/fly_intron_rate_gpu.sh "0 0.005 0.02 0.05"
set -uo pipefail
RATES=${1:-"0 0.005 0.02 0.05"}
OUTDIR=${OUT:-results}
source benchmarks/gpu_setup.sh
mkdir -p runs/rate runs/logs
printf 'chr2R_2M_6M\t2550000\t3000000\n' > runs/valid.bed
printf 'chr2R_2M_6M\t3000000\t4000000\n' > runs/test.bed
n=0
for ck in .flyck/*.pt; do m=$(basename $ck .pt)
  for r in $RATES; do for reg in valid test; do
    python -m semiseg.cli annotate --model $ck --fasta data/fly/chr2R_2M_6M.fa \
      --regions runs/$reg.bed --intron-rate $r --out runs/rate/${m}_r${r}_$reg --quiet \
      > runs/logs/rate_${m}_${r}_$reg.log 2>&1 &
    n=$((n+1)); [ $((n % 6)) = 0 ] && wait
  done; done
done
wait
# bfloat16 beside float32 for one model: how many bases change (the CPU comparison is
# done on the CPU machine against the float32 BED)
m=$(ls .flyck | head -1); m=${m%.pt}
python -m semiseg.cli annotate --model .flyck/$m.pt --fasta data/fly/chr2R_2M_6M.fa \
  --regions runs/test.bed --bf16 --out runs/rate/${m}_bf16_test --quiet > runs/logs/bf16.log 2>&1
mkdir -p "$OUTDIR"
tar czf "$OUTDIR/rates.tgz" runs/rate/*.bed runs/rate/*.gff3 runs/logs
ls -la "$OUTDIR"; grep -l -i "error" runs/logs/rate_* | head
