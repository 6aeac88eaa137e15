#!/usr/bin/env bash
# One device call for the gene decode's max-sum on a GPU (issue 42; annotate/device_maxsum.py):
# its tests compiled, then the 4 Mb fly sequence decoded by the default, by another
# checkout's code (OLD, optional) and whole, twice (the second time Triton's disk cache
# holds every kernel: whether a cold process's extra time is compiling), then the
# default's profile in one process.
#   bash benchmarks/gpu_maxsum_check.sh            (on the GPU machine, from the repo root)
#   OLD=_old bash benchmarks/gpu_maxsum_check.sh   (_old: `git archive REV semiseg | tar -x -C _old`)
set -uo pipefail
source benchmarks/gpu_setup.sh || exit 1
python -m pytest -q -p no:cacheprovider tests/test_device_maxsum.py 2>&1 | grep -E "^FAILED|^E  |passed|failed" | head -20
for round in 1 2; do
  echo "== fly_annotate_exact, round $round"
  bash benchmarks/fly_annotate_exact.sh cuda 2>&1 | tail -14
done
timeout 150 python benchmarks/annotate_profile.py --region 0-4000000 --top 25 2>&1 \
  | sed -n '/annotate_profile:/,/by tottime/p' | head -34
