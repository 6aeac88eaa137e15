# Sourced by the GPU benchmark scripts: install the wheels carried in .whlg/ (the GPU
# machine has no package index; docs/gpu.md), set PYTHONPATH and check imports.
if ls .whlg/*.whl >/dev/null 2>&1; then
  # every wheel carried (the list differs with the versions the index resolves)
  python -m pip install --no-index --no-deps -q .whlg/*.whl 2>&1 | tail -2
fi
export PYTHONPATH=.
python -c "import pyfaidx, pysam, pyBigWig, typer, rich, yaml, semiseg.cli" || exit 1
# a command parsed end to end: typer imports some of its dependencies (pydantic) only
# when it parses arguments, which an import does not reach (2026-12-08: a round's
# training runs all failed there while the import check passed)
python -m semiseg.cli models > /dev/null || { echo "gpu_setup: semiseg models failed"; exit 1; }
