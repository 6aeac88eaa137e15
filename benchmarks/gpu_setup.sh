# Sourced by the GPU benchmark scripts: install the wheels carried in .whlg/ (the GPU
# machine has no package index; docs/gpu.md), set PYTHONPATH and check imports.
if ls .whlg/*.whl >/dev/null 2>&1; then
  python -m pip install --no-index --no-deps -q .whlg/pyyaml* .whlg/packaging* .whlg/pyfaidx* .whlg/pysam* .whlg/pybigwig* .whlg/typer* \
    .whlg/rich* .whlg/shellingham* .whlg/markdown_it* .whlg/mdurl* .whlg/pygments* \
    .whlg/annotated_doc* .whlg/click* .whlg/pydantic* .whlg/annotated_types* .whlg/typing_* 2>&1 | tail -2
fi
export PYTHONPATH=.
python -c "import pyfaidx, pysam, pyBigWig, typer, rich, yaml, pydantic, semiseg.cli" || exit 1
