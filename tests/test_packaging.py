"""The installed package as a user gets it: what the wheel declares and carries.

- `import semiseg` and the CLI module import without triton, numba or snakemake (torch's
  CUDA wheels bring triton; a GPU machine may lack numba; snakemake is an extra).
- The wheel (built from this checkout) carries the demo's data, the chromatin example
  and the configs, the
  declared dependencies name neither triton nor snakemake (snakemake only under the
  `pipeline` extra), and every dependency has an upper bound; installed on its own
  (outside the checkout), `semiseg.demo.find_data()` finds the packaged data and the
  packaged configs/demo.yaml resolves its data paths inside the package.

The whole demo from an installed wheel in a fresh venv is a manual check
(docs/install.md, "Check an install"): it needs the dependencies installed (minutes).
"""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_import_without_triton_numba_snakemake():
    code = ("import sys\n"
            "for m in ('triton', 'numba', 'snakemake', 'pyranges'):\n"
            "    sys.modules[m] = None  # import of any of them now raises ImportError\n"
            "import semiseg, semiseg.cli, semiseg.annotate.run, semiseg.train.loop, semiseg.demo\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # as a user builds it (pip's build isolation fetches setuptools>=77 from the index);
    # the build writes only build/ (git-ignored) in the checkout
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                           str(ROOT), "-w", str(out)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = out.glob("semiseg-*.whl")
    return path


@pytest.mark.slow
def test_wheel_metadata_and_contents(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(z.read(meta_name))
    for f in ("chrI.fa", "chrII.fa", "yeast_chrI_chrII.gff3"):
        assert f"semiseg/data/yeast/{f}" in names
        assert z.getinfo(f"semiseg/data/yeast/{f}").file_size == (
            ROOT / "data" / "yeast" / f).stat().st_size
    for f in (ROOT / "configs").glob("*.yaml"):
        assert f"semiseg/configs/{f.name}" in names
    for f in (ROOT / "data" / "chromatin_example").iterdir():  # configs/chromatin.yaml's
        assert f"semiseg/data/chromatin_example/{f.name}" in names
    assert "semiseg/models/yeast_cds_frames.pt" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert meta["License-Expression"] == "MIT"

    requires = meta.get_all("Requires-Dist")
    plain = [r for r in requires if "extra ==" not in r]
    names_plain = {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].lower() for r in plain}
    assert "triton" not in names_plain and "snakemake" not in names_plain
    assert {"torch", "numba", "typer"} <= names_plain
    assert any(r.startswith("snakemake") and 'extra == "pipeline"' in r for r in requires)
    for r in requires:  # an upper bound on every dependency
        assert "<" in r.split(";")[0], r
    torch_req = next(r for r in plain if r.lower().startswith("torch"))
    assert ">=2.10" in torch_req


@pytest.mark.slow
def test_installed_wheel_finds_its_demo_data(wheel, tmp_path):
    """Installed alone into a folder (its dependencies from this environment), run from
    outside the checkout: the demo data and configs come from the package itself."""
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(target), str(wheel)],
                          check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    code = ("import semiseg, semiseg.demo as d\n"
            "from semiseg.config.load import load_config\n"
            "from pathlib import Path\n"
            "pkg = Path(semiseg.__file__).parent\n"
            "print(pkg)\n"
            "print(d.find_data())\n"
            "cfg = load_config(pkg / 'configs' / 'demo.yaml')\n"
            "print('\\n'.join(str(Path(f).resolve()) for f in cfg.inputs.fasta))\n")
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("SEMISEG_DATA", None)
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pkg, data, *fastas = proc.stdout.split()
    assert Path(pkg) == (target / "semiseg").resolve()
    assert Path(data) == (target / "semiseg" / "data" / "yeast").resolve()
    assert [Path(f) for f in fastas] == [Path(data) / "chrI.fa", Path(data) / "chrII.fa"]
