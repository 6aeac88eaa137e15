#!/usr/bin/env bash
# One model's annotation on the GPU and on the CPU of the same machine, in one call:
# whether the BED has the same segments and labels (and how many scores differ, by how
# much), and the GFF3 the same features; wall seconds of each. Run on the GPU machine
# from the repository root, carrying .whlg (the fly test region by default):
#   bash benchmarks/gpu_cpu_same.sh [MODEL] [FASTA] [REGION "chrom start end"]
#   e.g. bash benchmarks/gpu_cpu_same.sh fly data/fly/chr2R_2M_6M.fa "chr2R_2M_6M 3000000 4000000"
# Prints a Markdown table with the date, device and commit.
set -uo pipefail
model=${1:-fly}
fa=${2:-data/fly/chr2R_2M_6M.fa}
region=${3:-"chr2R_2M_6M 3000000 4000000"}
source benchmarks/gpu_setup.sh  # the carried wheels (.whlg/), PYTHONPATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%s\t%s\t%s\n' $region > "$tmp/r.bed"
for dev in cuda cpu; do
  t0=$(date +%s.%N)
  python -m semiseg.cli annotate --model "$model" --fasta "$fa" --regions "$tmp/r.bed" \
      --out "$tmp/$dev" --device "$dev" --threads 8 --quiet > "$tmp/$dev.log" 2>&1
  echo "$dev rc=$? $(python -c "print(f'{$(date +%s.%N) - $t0:.1f}')")" >> "$tmp/times"
done
python - "$tmp" "$model" "$region" <<'EOF'
import sys
sys.path.insert(0, "benchmarks")
import torch
from lib import header
tmp, model, region = sys.argv[1:4]
def rows(path, key, score):
    out = []
    for ln in open(path):
        if ln.startswith(("#", "track", "browser")) or not ln.strip():
            continue
        f = ln.rstrip("\n").split("\t")
        out.append((tuple(f[i] for i in key), f[score]))
    return out
times = dict(l.split(" ", 1) for l in open(f"{tmp}/times").read().splitlines())
print(header("benchmarks/gpu_cpu_same.sh", "cuda" if torch.cuda.is_available() else "cpu",
             f"bash benchmarks/gpu_cpu_same.sh {model} ... \"{region}\""))
print("| file | rows GPU / CPU | same keys | scores that differ | largest difference |")
print("|---|---|---|---|---|")
for name, key, score in (("bed", (0, 1, 2, 3, 5), 4), ("gff3", (0, 2, 3, 4, 6, 7, 8), 5)):
    try:
        g, c = rows(f"{tmp}/cuda.{name}", key, score), rows(f"{tmp}/cpu.{name}", key, score)
    except OSError as e:
        print(f"| {name} | missing: {e} | | | |")
        continue
    same = [a[0] for a in g] == [b[0] for b in c]
    diffs = [abs(float(a[1]) - float(b[1])) for a, b in zip(g, c)
             if a[1] != b[1] and a[1] != "." and b[1] != "."]
    print(f"| {name} | {len(g)} / {len(c)} | {same} | {len(diffs)} | "
          f"{max(diffs) if diffs else 0:g} |")
print(f"\nwall: {times}")
EOF
