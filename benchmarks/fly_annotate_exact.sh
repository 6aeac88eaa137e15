#!/usr/bin/env bash
# Issue 42's headline: `semiseg annotate --model fly` on the 4 Mb fly sequence with the
# defaults (certified windows of annotate.max_decode_steps) against the whole-sequence
# decode (--max-decode-steps above the sequence length), on one device: wall clock,
# bp/s, whether the BED and GFF3 rows are identical, the seam counts of the log.
#   bash benchmarks/fly_annotate_exact.sh [DEVICE]     (DEVICE: auto, cuda, cpu)
#   MODEL=yeast FASTA=data/yeast/chrII.fa bash benchmarks/fly_annotate_exact.sh cuda
#     (another shipped model and sequence; the defaults are fly's)
#   OLD=_old bash benchmarks/fly_annotate_exact.sh cuda
#     (also the certified default of another checkout's code, its semiseg/ under _old/:
#     `git archive COMMIT semiseg | tar -x -C _old`, in the same run)
# Prints a Markdown table with the date, device and commit.
set -uo pipefail
dev=${1:-auto}
fa=${FASTA:-data/fly/chr2R_2M_6M.fa}
model=${MODEL:-fly}
first=$(awk '/^>/{print substr($1, 2); exit}' "$fa")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bp=$(awk '!/^>/{n += length($0)} END{print n}' "$fa")
code=(env)  # the code run: this checkout's (python -m puts the working directory first)
warm() {  # kernels compiled: 200 kb in windows of 65,536 steps (the certified path's)
  "${code[@]}" python -m semiseg.cli annotate --model "$model" --fasta "$fa" \
      --regions <(printf '%s\t0\t200000\n' "$first") --max-decode-steps 65536 \
      --out "$tmp/warm" --device "$dev" --quiet >/dev/null 2>&1
}
warm
run() {  # name, extra args
  local t0 t1
  t0=$(date +%s.%N)
  "${code[@]}" python -m semiseg.cli annotate --model "$model" --fasta "$fa" --out "$tmp/$1" \
      --device "$dev" "${@:2}" > "$tmp/$1.log" 2>&1
  echo "rc=$? $1" >> "$tmp/rc"
  t1=$(date +%s.%N)
  echo "$t0 $t1" > "$tmp/$1.t"
}
run certified
names="certified"
if [ -n "${OLD:-}" ]; then  # the other code: its directory alone on the path
  code=(env PYTHONSAFEPATH=1 PYTHONPATH="$OLD")
  warm
  run old
  code=(env)
  names="certified old"
fi
run whole --max-decode-steps 8000000
rows() { grep -v '^#' "$1" | sort; }
same() {  # run name, extension: its rows as the whole decode's?
  cmp -s <(rows "$tmp/$1.$2") <(rows "$tmp/whole.$2") && echo yes || echo no
}
dev_name=$(python -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() and '$dev' != 'cpu' else 'CPU')")
echo "fly_annotate_exact: $(date -u '+%Y-%m-%d %H:%M UTC'), $dev_name, commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, model $model, $fa, $bp bp"
cat "$tmp/rc"
for n in $names whole; do  # a failed run's own words
  grep -q "^rc=0 $n$" "$tmp/rc" || { echo "--- $n failed, its log:"; grep -v "━" "$tmp/$n.log" | tail -15; }
done
echo
echo "| decode | wall s | bp/s | BED rows | same BED as whole | same GFF3 rows as whole |"
echo "|---|---|---|---|---|---|"
for n in $names whole; do
  read -r t0 t1 < "$tmp/$n.t"
  w=$(python -c "print(f'{$t1 - $t0:.1f}')")
  r=$(python -c "print(f'{$bp / ($t1 - $t0):,.0f}')")
  echo "| $n | $w | $r | $(grep -vc '^#' "$tmp/$n.bed") | $(same "$n" bed) | $(same "$n" gff3) |"
done
for n in $names; do
  echo
  echo "$n: $(grep -h "seams:" "$tmp/$n.log" || echo "(no seam line in the log)")"
  if [ "$(same "$n" bed)" = no ]; then
    diff <(rows "$tmp/$n.bed") <(rows "$tmp/whole.bed") | head -10
  fi
done
