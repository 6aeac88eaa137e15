"""Build step: the wheel carries the demo's data, the chromatin example and the configs.

Everything else is in pyproject.toml. data/yeast (chrI.fa, chrII.fa, the SGD GFF3; 1.4 MB),
data/chromatin_example (124 kB) and configs/*.yaml stay where they are in the repository
(tests, the Snakefile and the docs read them there); a wheel build copies them into the
package as semiseg/data/... and semiseg/configs/, keeping their relative layout, so the
configs' `../data/...` paths resolve inside the installed package too, and `semiseg demo`
runs after `pip install semiseg` anywhere. One copy in git, no symlinks. Editable installs
read the repository's own folders (semiseg.demo.find_data).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# (folder in the repository, file patterns); each lands at the same path under semiseg/
BUNDLED = (("data/yeast", ("*.fa", "*.gff3")), ("data/chromatin_example", ("*",)),
           ("configs", ("*.yaml",)))


class build_py_with_demo(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for folder, patterns in BUNDLED:
            files = sorted(f for p in patterns for f in (ROOT / folder).glob(p)
                           if f.is_file())
            if not files:
                raise SystemExit(f"setup.py: nothing matches {patterns} in {ROOT / folder}")
            dest = Path(self.build_lib) / "semiseg" / folder
            dest.mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copy2(f, dest / f.name)


setup(cmdclass={"build_py": build_py_with_demo})
