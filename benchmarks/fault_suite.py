"""Issue 43's fault suite, counted: every test marked `fault` in
tests/test_faults_inputs.py (bad and hostile inputs) and tests/test_faults_runtime.py
(signals, disk full, output sets, locks, training checkpoints), collected and then run
for real; prints a table of cases and passes by file and group, and the totals the issue
asks for, with the date, commit and machine.

    python benchmarks/fault_suite.py                # both files, slow cases included
    python benchmarks/fault_suite.py --markdown     # the same as Markdown tables
    python benchmarks/fault_suite.py -k "not slow"  # extra pytest arguments after the options

How a case counts (each case checks one outcome, so a failing case is one problem):
- test_faults_inputs.py names its cases test_error_* (a clear error: exit 2, one line
  'semiseg: error: ...', no traceback, nothing written) and test_result_* (a correct
  result against an independent oracle);
- a case that failed with an exception other than an assertion (something escaped the
  command line) counts as a *traceback*; a failed test_error_* case as an *unclear
  error*; a failed test_result_* case as a *silent wrong result*; a failed runtime case
  (its oracle is the bytes of the files that must survive) as *data lost*; a failed
  case about code in a checkpoint or injected commands as a *security hole*.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ["tests/test_faults_inputs.py", "tests/test_faults_runtime.py", "tests/test_pipeline.py"]
SECURITY = re.compile(r"no_code|evil|inject|shell", re.IGNORECASE)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return f"{platform.node()} ({cpu}, {os.cpu_count()} CPUs, {platform.system()} " \
           f"{platform.release()}, Python {platform.python_version()})"


def group_of(file: str, name: str) -> str:
    """The function a case belongs to (its parametrization stripped)."""
    return name.split("[", 1)[0]


def category(file: str, name: str) -> str:
    func = group_of(file, name)
    if "inputs" in file:
        return ("clear error" if func.startswith("test_error") else
                "correct result" if func.startswith("test_result") else "other")
    return "runtime (files kept, exit codes)"


def collect(files: list[str], extra: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "-m", "fault", "--collect-only",
                          "-q", "-p", "no:cacheprovider", *files, *extra], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    return [ln.strip() for ln in out.stdout.splitlines() if "::" in ln]


def run(files: list[str], extra: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        xml = os.path.join(tmp, "junit.xml")
        subprocess.run([sys.executable, "-m", "pytest", "-m", "fault", "-q",
                        "-p", "no:cacheprovider", f"--junitxml={xml}", *files, *extra],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        if not os.path.exists(xml):
            sys.exit("pytest wrote no report (see: python -m pytest -m fault ...)")
        cases = []
        for tc in ET.parse(xml).getroot().iter("testcase"):
            file = tc.get("file") or tc.get("classname", "").replace(".", "/") + ".py"
            bad = tc.find("failure")
            bad = bad if bad is not None else tc.find("error")
            skipped = tc.find("skipped") is not None
            text = "" if bad is None else (bad.get("message", "") + "\n" + (bad.text or ""))
            kind = None
            if bad is not None:
                kind = ("assertion" if re.search(r"AssertionError|assert |Failed:", text)
                        and "Traceback" not in (bad.get("message") or "") else "exception")
            cases.append({"file": os.path.basename(file), "name": tc.get("name"),
                          "status": "skipped" if skipped else "failed" if bad is not None
                          else "passed", "kind": kind, "seconds": float(tc.get("time", 0))})
        return cases


def totals(cases: list[dict]) -> dict[str, int]:
    t = Counter(tracebacks=0, unclear_errors=0, silent_wrong_results=0, data_lost=0,
                security_holes=0)
    for c in cases:
        if c["status"] != "failed":
            continue
        if SECURITY.search(c["name"]):
            t["security_holes"] += 1
        elif c["kind"] == "exception":
            t["tracebacks"] += 1
        elif category(c["file"], c["name"]) == "clear error":
            t["unclear_errors"] += 1
        elif category(c["file"], c["name"]) == "correct result":
            t["silent_wrong_results"] += 1
        else:
            t["data_lost"] += 1
    return dict(t)


def table(rows: list[list], head: list[str], markdown: bool) -> str:
    rows = [[str(x) for x in r] for r in rows]
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    w = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
         for i, h in enumerate(head)]

    def line(r):
        return "  ".join(x.ljust(w[i]) if i == 0 else x.rjust(w[i]) for i, x in enumerate(r))

    return "\n".join([line(head), line(["-" * n for n in w])] + [line(r) for r in rows])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true", help="Markdown tables")
    ap.add_argument("--files", nargs="+", default=FILES,
                    help="test files (default: both fault files and the pipeline's "
                         "hostile-path cases)")
    args, extra = ap.parse_known_args(argv)
    files = [f for f in args.files if (ROOT / f).exists()]
    missing = sorted(set(args.files) - set(files))
    started = datetime.datetime.now(datetime.UTC)
    collected = collect(files, extra)
    cases = run(files, extra)
    took = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    sha = _git("rev-parse", "--short", "HEAD")
    differs = _git("status", "--porcelain", "--", *files, "semiseg")
    print(f"fault suite (issue 43): {started:%Y-%m-%d %H:%M} UTC, commit {sha}"
          f"{' (working tree differs)' if differs else ''}, "
          f"{took:.0f} s")
    print(f"machine: {machine()}")
    if missing:
        print(f"not found (not counted): {', '.join(missing)}")
    print(f"collected: {len(collected)} cases; run: {len(cases)}\n")

    by_group: dict[tuple, Counter] = defaultdict(Counter)
    for c in cases:
        by_group[(c["file"], group_of(c["file"], c["name"]),
                  category(c["file"], c["name"]))][c["status"]] += 1
    rows = [[f"{f}::{g}", cat, sum(n.values()), n["passed"], n["failed"], n["skipped"]]
            for (f, g, cat), n in sorted(by_group.items())]
    print(table(rows, ["case group", "category", "cases", "passed", "failed", "skipped"],
                args.markdown))
    print()
    by_cat: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        by_cat[category(c["file"], c["name"])][c["status"]] += 1
    rows = [[cat, sum(n.values()), n["passed"], n["failed"], n["skipped"]]
            for cat, n in sorted(by_cat.items())]
    n = Counter(c["status"] for c in cases)
    rows.append(["all", len(cases), n["passed"], n["failed"], n["skipped"]])
    print(table(rows, ["category", "cases", "passed", "failed", "skipped"], args.markdown))
    print()
    t = totals(cases)
    print(table([[k.replace("_", " "), v] for k, v in t.items()], ["issue 43 total", "count"],
                args.markdown))
    for c in cases:
        if c["status"] == "failed":
            print(f"FAILED {c['file']}::{c['name']} ({c['kind']})")
    return 0 if n["failed"] == 0 and len(cases) >= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
