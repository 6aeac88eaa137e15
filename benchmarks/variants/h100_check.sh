#!/bin/bash
# Temporary driver for one lease: A = GPU tests and the small call (old vs new);
# B = the periodic row (old vs new). _old = git archive f7072b6.
source benchmarks/gpu_setup.sh >/dev/null 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
if [ "$1" = A ]; then
  t=$(date +%s)
  timeout 330 python -m pytest -q tests/test_gpu_kernels.py -m gpu -p no:cacheprovider \
    -k "split or periodic_against or periodic_sparse or cuda_graphs or frame_model or deterministic or defers or realistic or retain" 2>&1 | grep -E "passed|failed|Error |assert " | head -6
  echo "== gpu tests: rc ${PIPESTATUS[0]}, $(( $(date +%s) - t )) s"; t=$(date +%s)
  timeout 120 python -m pytest -q tests/test_kernels.py -p no:cacheprovider -k "test_against_bruteforce or marginals" 2>&1 | tail -1
  echo "== kernel tests on GPU: $(( $(date +%s) - t )) s"
  for code in _old .; do
    (cd benchmarks && PYTHONPATH=../$code:. timeout 60 python -c "import periodic_kernels as pk; h, r = pk.section_host(15); print('$code'); print(h); print(chr(10).join(r))" 2>&1 | grep -v Warn | tail -7)
  done
else
  S=8x20000x100x24,16x20000x1000x16
  PYTHONPATH=_old:benchmarks timeout 150 python benchmarks/periodic_profile.py --label OLD --shapes $S 2>&1 | grep -v Warn
  timeout 150 python benchmarks/periodic_profile.py --label NEW --shapes $S 2>&1 | grep -v Warn
  for code in _old .; do
    (cd benchmarks && PYTHONPATH=../$code:. timeout 60 python -c "import periodic_kernels as pk; h, r = pk.section_host(15); print('$code'); print(h); print(chr(10).join(r))" 2>&1 | grep -v Warn | tail -7)
  done
fi
