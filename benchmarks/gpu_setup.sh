# Sourced by the GPU benchmark scripts: install the wheels carried in .whlg/ (the GPU
# machine has no package index; docs/gpu.md), set PYTHONPATH and check imports.
if ls .whlg/*.whl >/dev/null 2>&1; then
  # every wheel carried (the list differs with the versions the index resolves)
  python -m pip install --no-index --no-deps -q .whlg/*.whl 2>&1 | tail -2
fi
export PYTHONPATH=.
python -c "import pyfaidx, pysam, pyBigWig, typer, rich, yaml, semiseg.cli" || exit 1
