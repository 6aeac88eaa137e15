"""Issue 43, runtime faults: interrupts (real SIGINT/SIGTERM to a real `semiseg annotate`),
disk full (a real small tmpfs where this machine lets us mount one, and failing file
objects everywhere), write failures while an output set is moved into place, the lock on
an output prefix, and training's checkpoints (last.pt before best.pt, --resume from
whatever complete state is there, --overwrite).

Oracles: the bytes of the files that were there before (a previous output set, an
unrelated file) compared with what is there after; the exact list of files in the
folder; exit codes and the one line on stderr; the epochs recorded in checkpoints.

Every case is marked `fault` (benchmarks/fault_suite.py counts them).
"""

from __future__ import annotations

import errno
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from semiseg.errors import SemisegError

pytestmark = pytest.mark.fault
pytest.importorskip("pyBigWig")

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "semiseg" / "models" / "yeast_cds_frames.pt"
CHRI = ROOT / "data" / "yeast" / "chrI.fa"
ENOSPC = os.strerror(errno.ENOSPC)  # "No space left on device"


def _chrI() -> str:
    return "".join(ln.strip() for ln in open(CHRI) if not ln.startswith(">"))


def _fasta(path: Path, pieces: dict[str, tuple[int, int]]) -> Path:
    seq = _chrI()
    path.write_text("".join(f">{n}\n{seq[a:b]}\n" for n, (a, b) in pieces.items()))
    return path


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) -> its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _previous(folder: Path, name: str = "a", manifest: bool = True) -> dict[str, bytes]:
    """A previous output set of prefix folder/name (plus an unrelated file beside it that
    no run may touch); returns the folder's files."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [f"{name}.bed", f"{name}.gff3", f"{name}.summary.tsv",
             f"{name}.posterior.OLDLABEL.bw", f"{name}.boundary.bw"]
    for f in files:
        (folder / f).write_text(f"previous run: {f}\n")
    if manifest:
        (folder / f".{name}.outputs").write_text("".join(f + "\n" for f in files))
    (folder / f"{name}.fa").write_text(">not an output\nACGT\n")  # an input, say
    (folder / f"{name}.notes.txt").write_text("mine\n")
    return _tree(folder)


def _cli_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "semiseg.cli", *map(str, args)]


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


# ===================================================================== real signals
SIGNAL_CASES = [(sig, prev) for sig in ("SIGINT", "SIGTERM") for prev in ("fresh", "previous")]


def _wait_for(pred, proc, timeout=240.0):
    deadline = time.time() + timeout
    while not pred():
        if proc.poll() is not None or time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def _staging(folder: Path) -> bool:
    return any(".staging." in p.name for p in folder.iterdir())


@pytest.fixture(scope="module")
def signalled(tmp_path_factory):
    """Real processes, real signals: four `semiseg annotate` runs (SIGINT / SIGTERM, a
    fresh prefix / one holding a previous set) and a `semiseg demo`, each sent its signal
    once its staging folder exists (it is decoding, its writer's files open), all at once
    to keep the wall time down; then a run killed with SIGKILL and a rerun of its prefix;
    then a second run on a prefix that a running one holds. The runs that must still be
    running when their turn comes read long inputs and start when their turn comes."""
    d = tmp_path_factory.mktemp("signals")
    fa = _fasta(d / "g.fa", {"chrI": (0, 60_000)})
    # about 0.9 Mb: minutes of decoding on a CPU, so never over before it is signalled
    long_fa = _fasta(d / "long.fa", {f"c{i}": (0, 230_000) for i in range(4)})
    tiny = _fasta(d / "tiny.fa", TINY)
    from semiseg.genome import Fasta

    for f in (fa, long_fa, tiny):  # indexed before the runs start, not by all at once
        Fasta(str(f)).close()
    runs, before, procs = {}, {}, []

    def start(*args):
        procs.append(subprocess.Popen(_cli_cmd(*args), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
        return procs[-1]
    try:
        for sig, prev in SIGNAL_CASES:
            folder = d / f"{sig}-{prev}"
            before[sig, prev] = _previous(folder) if prev == "previous" else {}
            folder.mkdir(exist_ok=True)
            runs[sig, prev] = start("annotate", "-m", SHIPPED, "-f", fa, "-o", folder / "a",
                                    "--device", "cpu", "-q")
        demo_dir = d / "demo"  # annotates all of chrI: still running after the four
        demo = start("demo", demo_dir, "--device", "cpu", "-q")
        out = {}
        for key, proc in runs.items():
            folder = d / f"{key[0]}-{key[1]}"
            reached = _wait_for(lambda folder=folder: _staging(folder), proc)
            proc.send_signal(getattr(signal, key[0]))
            _, err = proc.communicate(timeout=120)
            out[key] = {"rc": proc.returncode, "err": err, "reached": reached,
                        "after": _tree(folder), "before": before[key]}
        reached = _wait_for(lambda: demo_dir.is_dir() and _staging(demo_dir), demo)
        demo.send_signal(signal.SIGINT)
        _, err = demo.communicate(timeout=120)
        out["demo"] = {"rc": demo.returncode, "err": err, "reached": reached,
                       "after": _tree(demo_dir)}
        # SIGKILL: no clean-up possible; the next run on the prefix must cope
        killed = d / "killed"
        killed.mkdir()
        victim = start("annotate", "-m", SHIPPED, "-f", long_fa, "-o", killed / "a",
                       "--device", "cpu", "-q")
        reached = _wait_for(lambda: _staging(killed), victim)
        victim.kill()
        victim.communicate(timeout=120)
        left = sorted(p.name for p in killed.iterdir())
        # the rerun through main() in this process (its outputs are what is checked; a
        # fresh process cost a start of torch)
        from test_shipped_models import cli

        again = cli("annotate", "-m", SHIPPED, "-f", tiny, "-o", killed / "a", "--device",
                    "cpu", "-q")
        out["killed"] = {"reached": reached, "left": left, "again": again,
                         "after": sorted(p.name for p in killed.iterdir())}
        # the lock: `holder` decodes for minutes; `second` starts once it holds the prefix
        held = d / "held"
        before["held"] = _previous(held)
        holder = start("annotate", "-m", SHIPPED, "-f", long_fa, "-o", held / "a",
                       "--device", "cpu", "-q")
        holding = _wait_for(lambda: _staging(held), holder)
        second = subprocess.run(_cli_cmd("annotate", "-m", SHIPPED, "-f", tiny, "-o",
                                         held / "a", "--device", "cpu", "-q"),
                                capture_output=True, text=True, timeout=300)
        still = holder.poll() is None
        holder.send_signal(signal.SIGTERM)
        _, herr = holder.communicate(timeout=120)
        out["lock"] = {"holding": holding and still, "second": second, "pid": holder.pid,
                       "holder_rc": holder.returncode, "holder_err": herr,
                       "after": _tree(held), "before": before["held"]}
    finally:  # a failure above: no process outlives the fixture
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig,prev", SIGNAL_CASES)
def test_signal_interrupts_annotate(signalled, sig, prev):
    """A real signal while annotate decodes: exit 130, `semiseg: interrupted` as the one
    line on stderr, no temporary file or folder, no lock, no partial output, and a
    previous set of the prefix byte for byte as it was."""
    r = signalled[sig, prev]
    assert r["reached"], f"the run ended before its staging folder appeared: {r['err']}"
    assert r["rc"] == 130, (r["rc"], r["err"])
    lines = _lines(r["err"])
    assert len(lines) == 1 and lines[0].startswith("semiseg: interrupted"), lines
    assert ("SIGTERM" in lines[0]) == (sig == "SIGTERM")
    assert r["after"] == r["before"]  # nothing added (temporary or partial), nothing lost


@pytest.mark.slow
def test_signal_interrupts_demo(signalled):
    """Ctrl-C during `semiseg demo`'s annotation (it exited 0 before): exit 130, the one
    line, no annotation file, no staging folder or lock in the demo's folder."""
    r = signalled["demo"]
    assert r["reached"], f"the demo ended before annotating: {r['err']}"
    assert r["rc"] == 130, (r["rc"], r["err"])
    lines = _lines(r["err"])
    assert len(lines) == 1 and lines[0].startswith("semiseg: interrupted"), lines
    assert r["after"] == {}


@pytest.mark.slow
def test_run_after_a_sigkilled_one(signalled):
    """SIGKILL (nothing can clean up) leaves the lock and the staging folder; the next
    run on that prefix takes the dead run's lock over, removes its staging folder and
    writes its set (exit 0): no stale state blocks a rerun."""
    r = signalled["killed"]
    assert r["reached"]
    assert "a.lock" in r["left"] and any(".a.staging." in n for n in r["left"]), r["left"]
    assert r["again"].returncode == 0, r["again"].stderr
    after = r["after"]
    assert "a.lock" not in after and not any(".staging." in n for n in after), after
    assert {"a.bed", "a.gff3", "a.summary.tsv", "a.json", ".a.outputs"} <= set(after)


@pytest.mark.slow
def test_second_run_on_a_held_prefix_is_refused(signalled):
    """A second annotate on a prefix a running one holds: exit 2, one line naming the lock
    and the running pid; the running one is unaffected (interrupted later: 130) and the
    prefix's previous set survives both."""
    r = signalled["lock"]
    assert r["holding"], "the first run was not running when the second one ended"
    second = r["second"]
    assert second.returncode == 2, second.stderr
    lines = _lines(second.stderr)
    assert len(lines) == 1 and lines[0].startswith("semiseg: error:"), lines
    assert "another semiseg run" in lines[0] and f"pid {r['pid']}" in lines[0]
    assert "a.lock" in lines[0]
    assert r["holder_rc"] == 130, r["holder_err"]
    assert r["after"] == r["before"]


INTERRUPT_SCRIPT = """
import os, signal, sys, time
from semiseg import runtime as interrupt
interrupt.install()
first, second, deferred = sys.argv[1], sys.argv[2], sys.argv[3] == "deferred"
try:
    if deferred:
        with interrupt.deferred():
            os.kill(os.getpid(), getattr(signal, first))
            time.sleep(0.05)
            print("block finished", flush=True)
    else:
        os.kill(os.getpid(), getattr(signal, first))
        time.sleep(5)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted by", interrupt.received(), flush=True)
    if second != "none":
        os.kill(os.getpid(), getattr(signal, second))  # during the clean-up: ignored
        time.sleep(0.05)
    print("clean-up finished", flush=True)
"""


@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("second,mode", [("none", "plain"), ("SIGINT", "plain"),
                                         ("SIGTERM", "plain"), ("none", "deferred"),
                                         ("SIGTERM", "deferred")])
def test_interrupt_handler(first, second, mode):
    """install(): SIGINT and SIGTERM raise KeyboardInterrupt (and say which came); a second
    signal during the clean-up does not cut it short; deferred() lets its block finish
    before raising."""
    r = subprocess.run([sys.executable, "-c", INTERRUPT_SCRIPT, first, second, mode],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    want = (["block finished"] if mode == "deferred" else []) + [
        f"interrupted by {first}", "clean-up finished"]
    assert r.stdout.split("\n")[:-1] == want


# ===================================================================== in-process annotate
TINY = {"chrI": (30_000, 32_000), "chrX": (50_000, 51_000)}  # 3 kb: a couple of seconds


@pytest.fixture(scope="module")
def tiny_fa(tmp_path_factory):
    return _fasta(tmp_path_factory.mktemp("tiny") / "tiny.fa", TINY)


_DECODED: dict = {}


def _annotate(fa, out, **kw):
    """annotate() of the shipped model; the decoded batches of TINY are computed once per
    session and reused (these cases are about writing; decoding takes most of a run)."""
    from semiseg import ui
    from semiseg.annotate.annotator import Annotator
    from semiseg.annotate.run import annotate

    real = Annotator.run_batch

    def run_batch(self, items, loaded=None):
        key = (tuple((it.chrom, it.start, it.end) for it in items), self.samples, self.seed)
        if key not in _DECODED:
            _DECODED[key] = real(self, items, loaded)
        return _DECODED[key]
    ui.set_quiet(True)
    Annotator.run_batch = run_batch
    try:
        return annotate(str(SHIPPED), str(fa), str(out), device="cpu", **kw)
    finally:
        Annotator.run_batch = real


class _Full:
    """A file object that takes `room` more bytes and then raises ENOSPC, as a write to a
    full disk does."""

    def __init__(self, fh, budget: list[int]):
        self._fh, self._budget = fh, budget

    def write(self, text):
        n = len(text)
        if n > self._budget[0]:
            raise OSError(errno.ENOSPC, ENOSPC)
        self._budget[0] -= n
        return self._fh.write(text)

    def writelines(self, lines):
        for ln in lines:
            self.write(ln)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def _full_open(room: int):
    budget = [room]  # shared by every file the module opens: one disk

    def opener(path, mode="r", *args, **kwargs):
        fh = open(path, mode, *args, **kwargs)
        return _Full(fh, budget) if any(c in mode for c in "wa+") else fh
    return opener


# (module whose file writes fail, bytes it may still write, annotate's extra arguments)
FULL_CASES = [
    ("semiseg.genome.write", 0, {}),
    ("semiseg.genome.write", 300, {}),
    ("semiseg.genome.write", 5_000, {}),
    ("semiseg.genome.write", 2_000, {}),
    ("semiseg.annotate.run", 0, {}),  # PREFIX.summary.tsv
    ("semiseg.annotate.provenance", 0, {}),  # PREFIX.json, the last file of the set
    ("semiseg.annotate.uncertainty", 0, {"samples": 2}),  # PREFIX.samples.bed
    ("semiseg.annotate.outputset", 0, {}),  # the set's list, written before anything moves
]


@pytest.mark.parametrize("module,room,kw", FULL_CASES,
                         ids=[f"{m.split('.')[-1]}-{r}" for m, r, _ in FULL_CASES])
@pytest.mark.parametrize("prev", ["fresh", "previous"])
def test_annotate_disk_full_file_object(tmp_path, tiny_fa, monkeypatch, module, room, kw,
                                        prev):
    """Disk full (a file object raising ENOSPC after `room` bytes) in each writer of the
    set: one-line SemisegError naming the prefix and the cause, no file added or left
    behind (staging, lock, temporary files), a previous set unchanged."""
    import importlib

    out = tmp_path / "o"
    before = _previous(out) if prev == "previous" else {}
    out.mkdir(exist_ok=True)
    monkeypatch.setattr(importlib.import_module(module), "open", _full_open(room),
                        raising=False)
    with pytest.raises(SemisegError) as err:
        _annotate(tiny_fa, out / "a", **kw)
    msg = str(err.value)
    assert "\n" not in msg and ENOSPC in msg and str(out / "a") in msg, msg
    assert _tree(out) == before


@pytest.mark.parametrize("exc,expected", [
    (KeyboardInterrupt, KeyboardInterrupt),
    (lambda: OSError(errno.EIO, "I/O error"), SemisegError),
    (lambda: OSError(errno.ENOSPC, ENOSPC), SemisegError),
    (lambda: RuntimeError("a bug"), RuntimeError),
], ids=["interrupt", "eio", "enospc", "bug"])
def test_annotate_failure_mid_run_leaves_previous_set(tmp_path, tiny_fa, monkeypatch, exc,
                                                      expected):
    """An interrupt, an I/O error or a bug while the writer's files are open: the staging
    folder and lock go, the previous set stays; an OSError is a one-line error, the others
    propagate as they are (KeyboardInterrupt: exit 130 in the command line)."""
    import semiseg.annotate.run as A

    out = tmp_path / "o"
    before = _previous(out)
    seen = []

    def boom(*a, **k):
        seen.append(_staging(out) and (out / "a.lock").is_file())  # the writer runs staged
        raise exc()
    monkeypatch.setattr(A, "_annotate_groups", boom)
    with pytest.raises(expected) as err:
        _annotate(tiny_fa, out / "a")
    assert seen == [True]
    if expected is SemisegError:
        assert "\n" not in str(err.value) and str(out / "a") in str(err.value)
    assert _tree(out) == before


@pytest.mark.parametrize("spilling", [False, True])
def test_annotate_interrupted_leaves_no_new_empty_folder(tmp_path, tiny_fa, monkeypatch,
                                                         spilling):
    """--out new/deeper/a with neither folder there: an interrupt while the writer runs
    removes both folders the run made (nothing was kept in them), and a folder that was
    there before stays, as does one that holds a file by then. The same while the
    arrays go to files (SEMISEG_SPILL=always), whose folder is the output's."""
    import semiseg.annotate.run as A

    if spilling:
        monkeypatch.setenv("SEMISEG_SPILL", "always")

    def boom(*a, **k):
        assert (tmp_path / "new" / "deeper").is_dir()
        raise KeyboardInterrupt
    monkeypatch.setattr(A, "_annotate_groups", boom)
    with pytest.raises(KeyboardInterrupt):
        _annotate(tiny_fa, tmp_path / "new" / "deeper" / "a")
    assert not (tmp_path / "new").exists()

    def keep_one(*a, **k):
        (tmp_path / "x" / "y" / "note.txt").write_text("a user's file")
        raise KeyboardInterrupt
    monkeypatch.setattr(A, "_annotate_groups", keep_one)
    with pytest.raises(KeyboardInterrupt):
        _annotate(tiny_fa, tmp_path / "x" / "y" / "a")
    assert (tmp_path / "x" / "y" / "note.txt").is_file()


@pytest.mark.parametrize("prev", ["manifest", "legacy", "fresh"])
def test_annotate_replaces_previous_set_as_a_whole(tmp_path, tiny_fa, prev):
    """A finished run replaces the previous set of its prefix whole: none of the previous
    files remain (a posterior track of a label the new model lacks included), the new set
    is exactly what the run reports (its PREFIX.json lists the rest), and files of the
    prefix that are no output (PREFIX.fa, PREFIX.notes.txt) are untouched."""
    import json

    out = tmp_path / "o"
    before = _previous(out, manifest=prev == "manifest") if prev != "fresh" else {}
    files = _annotate(tiny_fa, out / "a")
    after = _tree(out)
    names = sorted(os.path.basename(f) for f in files)
    kept = {k: v for k, v in before.items() if k in ("a.fa", "a.notes.txt")}
    assert sorted(set(after) - set(kept) - {".a.outputs"}) == names
    assert all(after[k] == v for k, v in kept.items())
    assert "a.posterior.OLDLABEL.bw" not in after
    assert all(not v.startswith(b"previous run") for v in after.values())
    assert after[".a.outputs"].decode().split() == names
    listed = json.loads(after["a.json"])["files"]
    assert sorted(listed + ["a.json"]) == names
    assert {"a.bed", "a.gff3", "a.summary.tsv", "a.boundary.bw"} <= set(names)


@pytest.fixture(scope="module")
def parts(tiny_fa, tmp_path_factory):
    """Two annotate parts (one chromosome each) for merge."""
    d = tmp_path_factory.mktemp("parts")
    for c in TINY:
        _annotate(tiny_fa, d / c, chroms=[c])
    return [str(d / c) for c in TINY]


@pytest.mark.parametrize("case", ["ok", "enospc", "eio-bigwig", "locked"])
def test_merge_writes_a_whole_set(parts, tmp_path, monkeypatch, case):
    """merge writes OUT.* as annotate does: the previous set replaced whole (its stale
    posterior track gone) or, on a write failure or a held lock, one line and every file
    as it was."""
    import semiseg.annotate.merge as M

    out = tmp_path / "m"
    before = _previous(out)
    if case == "enospc":
        monkeypatch.setattr(M, "open", _full_open(0), raising=False)
    elif case == "eio-bigwig":
        import pyBigWig

        real = pyBigWig.open

        def bw_open(path, mode="r"):
            if mode == "w":
                raise OSError(errno.EIO, "I/O error", path)
            return real(path, mode)
        monkeypatch.setattr(pyBigWig, "open", bw_open)
    elif case == "locked":
        (out / "a.lock").write_text(f"{os.getppid()} {socket.gethostname()}\n")
        before = _tree(out)
    if case == "ok":
        files = M.merge(parts, str(out / "a"))
        after = _tree(out)
        assert "a.posterior.OLDLABEL.bw" not in after and "a.bed" in after
        assert sorted(set(after) - {"a.fa", "a.notes.txt", ".a.outputs"}) == sorted(
            os.path.basename(f) for f in files)
        bed = [ln.split("\t")[0] for ln in after["a.bed"].decode().splitlines()]
        assert sorted(set(bed)) == sorted(TINY)
        return
    with pytest.raises(SemisegError) as err:
        M.merge(parts, str(out / "a"))
    assert "\n" not in str(err.value)
    assert {"enospc": ENOSPC, "eio-bigwig": "I/O error",
            "locked": "another semiseg run"}[case] in str(err.value)
    assert _tree(out) == before


def test_merge_failure_leaves_no_new_empty_folder(parts, tmp_path, monkeypatch):
    """merge into a folder that is not there: a failed write leaves no new folder; a
    finished one leaves the folder with the set."""
    import semiseg.annotate.merge as M

    monkeypatch.setattr(M, "open", _full_open(0), raising=False)
    with pytest.raises(SemisegError):
        M.merge(parts, str(tmp_path / "new" / "deeper" / "a"))
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    M.merge(parts, str(tmp_path / "new" / "deeper" / "a"))
    assert (tmp_path / "new" / "deeper" / "a.bed").is_file()


def _mount_tmpfs(path: Path, size: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs root (mount)")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


@pytest.fixture
def disk(tmp_path):
    """A small real file system (tmpfs, 2 MiB): what a full disk does, not a stand-in."""
    d = tmp_path / "disk"
    _mount_tmpfs(d, "2m")
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


def _fill(folder: Path, leave: int) -> None:
    """Fill `folder`'s file system up to `leave` free bytes."""
    with open(folder / "filler", "wb") as fh:
        free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
        try:
            fh.write(b"\0" * max(0, free - leave))
        except OSError:
            pass
    assert os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize <= leave + 4096


@pytest.mark.parametrize("leave", [0, 8 << 10, 24 << 10, 48 << 10, 72 << 10, 96 << 10])
def test_annotate_real_disk_full(disk, tiny_fa, monkeypatch, leave):
    """On a real full file system (a tmpfs filled to `leave` bytes free; the set needs
    about 100 KB), with the free-space margin off so the writes themselves hit ENOSPC
    (and libBigWig's guard is exact): a one-line error, no file added, the previous set
    and the filler unchanged, and no crash (libBigWig aborts or hangs on a full disk)."""
    import semiseg.genome.diskspace as O  # where the margin is read

    monkeypatch.setattr(O, "SPACE_MARGIN", 0)
    out = disk / "o"
    before = _previous(out)
    _fill(disk, leave)
    filler = (disk / "filler").stat().st_size
    with pytest.raises(SemisegError) as err:
        _annotate(tiny_fa, out / "a")
    assert ENOSPC in str(err.value) and "\n" not in str(err.value)
    assert _tree(out) == before
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "o"]
    assert (disk / "filler").stat().st_size == filler


def test_annotate_cli_real_disk_full(disk, tiny_fa):
    """`semiseg annotate` onto a 2 MiB tmpfs (with the default free-space margin): exit 2,
    one line `semiseg: error: ... No space left on device`, nothing left behind, the
    previous set unchanged."""
    out = disk / "o"
    before = _previous(out)
    r = subprocess.run(_cli_cmd("annotate", "-m", SHIPPED, "-f", tiny_fa, "-o", out / "a",
                                "--device", "cpu", "-q"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    lines = _lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("semiseg: error:") and ENOSPC in lines[0]
    assert _tree(out) == before


# ===================================================================== OutputSet itself
def _write_set(staged, names, text="new"):
    for n in names:
        Path(f"{staged.prefix}.{n}").write_text(f"{text}: {n}\n")


def test_outputset_writes_whatever_the_writers_create(tmp_path):
    """No fixed list: every file the writers put in the staging folder is moved, hidden
    temporary files are not."""
    from semiseg.annotate.outputset import OutputSet

    with OutputSet(tmp_path / "p") as s:
        _write_set(s, ["bed", "proteins.fa", "cds.fa", "json", "anything.new"])
        Path(s.staging, ".p.bed.tmp123").write_text("partial")
    assert sorted(_tree(tmp_path)) == [".p.outputs", "p.anything.new", "p.bed", "p.cds.fa",
                                       "p.json", "p.proteins.fa"]
    assert sorted(s.files) == sorted(str(tmp_path / f"p.{n}") for n in
                                     ["bed", "proteins.fa", "cds.fa", "json", "anything.new"])


def test_outputset_second_set_replaces_first_and_keeps_others(tmp_path):
    from semiseg.annotate.outputset import OutputSet

    (tmp_path / "p.fa").write_text("input")
    (tmp_path / "p2.bed").write_text("another prefix")
    with OutputSet(tmp_path / "p") as s:
        _write_set(s, ["bed", "gff3", "posterior.A.bw", "posterior.B.bw"], "one")
    with OutputSet(tmp_path / "p") as s:
        _write_set(s, ["bed", "posterior.A.bw"], "two")
    t = _tree(tmp_path)
    assert sorted(t) == [".p.outputs", "p.bed", "p.fa", "p.posterior.A.bw", "p2.bed"]
    assert t["p.bed"] == b"two: bed\n" and t["p.fa"] == b"input"


N_NEW = 4


@pytest.mark.parametrize("fail_at", range(5 + N_NEW + 1))
def test_outputset_rename_failure_restores_previous(tmp_path, monkeypatch, fail_at):
    """The k-th rename of the commit fails (5 previous files moved aside, 4 new ones moved
    in, then the list): everything moved is moved back; the previous set is as it was,
    the new one is gone; one-line error."""
    from semiseg.annotate import outputset as O

    before = _previous(tmp_path / "o")
    calls = [0]
    real_rename, real_replace = os.rename, os.replace

    def rename(a, b):
        calls[0] += 1
        if calls[0] == fail_at + 1:
            raise OSError(errno.EIO, "I/O error", a)
        return real_rename(a, b)

    def replace(a, b):
        return rename(a, b) if str(b).endswith(".outputs") else real_replace(a, b)
    with pytest.raises(SemisegError, match="I/O error"):
        with O.OutputSet(tmp_path / "o" / "a", legacy=O.ANNOTATION_FILES) as s:
            _write_set(s, ["bed", "gff3", "json", "boundary.bw"])
            monkeypatch.setattr(O.os, "rename", rename)
            monkeypatch.setattr(O.os, "replace", replace)
    monkeypatch.undo()
    assert calls[0] == fail_at + 1 + fail_at  # every rename done was undone
    assert _tree(tmp_path / "o") == before


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("owner,taken", [
    ("dead-here", True),  # a killed run of this host: taken over
    ("alive-here", False),  # a live process of this host: refused
    ("other-host", False),  # another machine (shared file system): refused
    ("garbage", False),  # unreadable: refused, the message says to remove it
    ("empty", False),
])
def test_outputset_lock_owners(tmp_path, owner, taken):
    from semiseg.annotate.outputset import OutputSet

    host = socket.gethostname()
    text = {"dead-here": f"{_dead_pid()} {host}", "alive-here": f"{os.getppid()} {host}",
            "other-host": f"{os.getppid()} not-{host}", "garbage": "xyz", "empty": ""}[owner]
    (tmp_path / "a.lock").write_text(text + "\n")
    if taken:
        with OutputSet(tmp_path / "a") as s:
            assert (tmp_path / "a.lock").read_text().split()[0] == str(os.getpid())
            _write_set(s, ["bed"])
        assert sorted(_tree(tmp_path)) == [".a.outputs", "a.bed"]  # lock released
    else:
        with pytest.raises(SemisegError) as err:
            with OutputSet(tmp_path / "a"):
                pass
        assert "another semiseg run" in str(err.value) and "a.lock" in str(err.value)
        assert (tmp_path / "a.lock").read_text() == text + "\n"  # not touched
        assert sorted(_tree(tmp_path)) == ["a.lock"]


@pytest.mark.parametrize("how", ["ok", "error", "interrupt"])
def test_outputset_lock_released(tmp_path, how):
    """The lock goes however the block ends, and a next run gets it."""
    from semiseg.annotate.outputset import OutputSet

    exc = {"ok": None, "error": ValueError, "interrupt": KeyboardInterrupt}[how]
    try:
        with OutputSet(tmp_path / "a") as s:
            _write_set(s, ["bed"])
            if exc:
                raise exc()
    except (ValueError, KeyboardInterrupt):
        pass
    assert not (tmp_path / "a.lock").exists()
    assert not any(".staging." in p.name for p in tmp_path.iterdir())
    with OutputSet(tmp_path / "a") as s:
        _write_set(s, ["gff3"])
    assert sorted(_tree(tmp_path)) == [".a.outputs", "a.gff3"]


def test_outputset_removes_staging_of_killed_runs(tmp_path):
    """A staging folder a SIGKILLed run left (no lock holder) goes with the next run of
    that prefix; another prefix's (even a similar name's) stays."""
    from semiseg.annotate.outputset import OutputSet

    for name in (".a.staging.abc123_x", ".a.b.staging.zzz", ".ab.staging.q1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.bed").write_text("partial")
    with OutputSet(tmp_path / "a") as s:
        _write_set(s, ["bed"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".a.b.staging.zzz", ".a.outputs", ".ab.staging.q1", "a.bed"]


def test_outputset_signal_during_commit_is_deferred(tmp_path, monkeypatch):
    """A real SIGINT arriving while the set is moved into place: the moves finish (the
    whole new set is there, nothing staged left), then the interrupt is raised."""
    from semiseg.annotate import outputset as O

    real = os.rename
    sent = []

    def rename(a, b):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real(a, b)
    with pytest.raises(KeyboardInterrupt):
        with O.OutputSet(tmp_path / "a") as s:
            _write_set(s, ["bed", "gff3", "json"])
            monkeypatch.setattr(O.os, "rename", rename)
    monkeypatch.undo()
    assert sent
    assert sorted(_tree(tmp_path)) == [".a.outputs", "a.bed", "a.gff3", "a.json"]


@pytest.mark.parametrize("prefix,msg", [("", "expected a prefix"),
                                        ("nofolder/a", "does not exist")])
def test_outputset_bad_prefix(tmp_path, monkeypatch, prefix, msg):
    from semiseg.annotate.outputset import OutputSet

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SemisegError, match=msg):
        with OutputSet(prefix + ("/" if not prefix else "")):
            pass
    assert list(tmp_path.iterdir()) == []


def test_outputset_read_only_folder(tmp_path):
    """A folder the run may not write (a read-only file system as root, which ignores
    permissions; a 0555 folder otherwise): one line, nothing written."""
    from semiseg.annotate.outputset import OutputSet

    ro = tmp_path / "ro"
    if os.geteuid() == 0:
        _mount_tmpfs(ro, "1m")
        r = subprocess.run(["mount", "-o", "remount,ro", str(ro)], capture_output=True)
        if r.returncode:
            subprocess.run(["umount", "-l", str(ro)], check=False)
            pytest.skip("cannot remount the tmpfs read-only")
        match = "Read-only file system"
    else:
        ro.mkdir()
        ro.chmod(0o555)
        match = "not writable"
    try:
        with pytest.raises(SemisegError, match=match) as err:
            with OutputSet(ro / "a"):
                pass
        assert "\n" not in str(err.value)
        assert list(ro.iterdir()) == []
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(ro)], check=False)
        else:
            ro.chmod(0o755)


def test_bigwig_guard_refuses_before_libbigwig_sees_a_full_disk(tmp_path, monkeypatch):
    """With less room than the entries and the close need, the writer raises ENOSPC
    before calling libBigWig (which would abort the process), and an abort closes the
    open bigWigs without writing to the disk."""
    from semiseg.genome import LabelScheme, OutputWriter
    from semiseg.genome import diskspace as O

    scheme = LabelScheme.from_dict({"name": "toy", "labels": [{"name": "x"}, {"name": "y"}]})
    free = [10 << 20]

    class St:
        f_frsize = 1

        @property
        def f_bavail(self):
            return free[0]
    monkeypatch.setattr(O.os, "statvfs", lambda p: St())
    monkeypatch.setattr(O, "SPACE_MARGIN", 1 << 20)
    monkeypatch.setattr(O.SpaceGuard, "interval", 0.0)  # the changed answer is seen
    n = 200_000
    post = np.random.default_rng(0).random((n, 2)).astype(np.float32)
    with pytest.raises(OSError) as err:
        with OutputWriter(tmp_path / "w", scheme, {"c": n}, formats=("bigwig",)) as w:
            free[0] = (1 << 20) + 12 * n  # room for the entries, not for the close too
            w.add("c", np.array([[0, n, 0]]), post, post[:, 0])
    assert err.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_space_guard_asks_rarely_and_in_time(monkeypatch):
    """SpaceGuard: one statvfs for many small writes on a roomy disk; asked again when its
    interval has passed or the writes near the free space; ENOSPC exactly when a write and
    its reserve would leave less than the margin (oracle: the arithmetic by hand)."""
    from semiseg.genome import diskspace as O

    calls, free, clock = [], [1 << 30], [100.0]

    class St:
        f_frsize = 1

        @property
        def f_bavail(self):
            calls.append(1)
            return free[0]
    monkeypatch.setattr(O.os, "statvfs", lambda p: St())
    monkeypatch.setattr(O.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(O, "SPACE_MARGIN", 1000)
    g = O.SpaceGuard("x")
    for _ in range(1000):
        g.check(1000, reserve=5000)
    assert len(calls) == 1
    clock[0] += O.SpaceGuard.interval
    g.check(10)
    assert len(calls) == 2
    free[0] = 20_000  # someone filled the disk; the guard has not asked since
    clock[0] += O.SpaceGuard.interval / 2
    g.check(10)  # a 1 GiB answer, 10 bytes spent: no need to ask
    assert len(calls) == 2
    clock[0] += O.SpaceGuard.interval / 2
    g.check(0)
    assert len(calls) == 3 and g.free == 20_000
    g.check(13_000, reserve=6_000)  # 20000 - 13000 = 7000 left = reserve + margin: fits
    assert len(calls) == 4  # 7000 < reserve + 4 margins: asked first
    free[0] -= 13_000  # written
    with pytest.raises(OSError) as err:
        g.check(1, reserve=6_000)  # asked again (near): 7000 - 1 < 6000 + 1000
    assert err.value.errno == errno.ENOSPC and len(calls) == 5


# ===================================================================== train
@pytest.fixture(scope="module")
def tiny_cfg(tmp_path_factory):
    """A synthetic task (GC islands, tests/synth.py) and a tiny model: a run of two
    epochs takes a second or two."""
    import yaml
    from synth import gc_island_task

    d = tmp_path_factory.mktemp("train")
    cfg = {**gc_island_task(d, np.random.default_rng(1), {"a": 8000, "b": 4000}),
           "windows": {"chroms": None, "size": 2000, "valid_fraction": 0.25},
           "model": {"channels": 8, "layers": 1, "kernel_size": 3, "stem_kernel": 3,
                     "max_dilation": 1, "resolution": 10, "dropout": 0.0},
           "crf": {"max_duration": 8},
           "train": {"epochs": 2, "batch_size": 2, "patience": 0},
           "device": "cpu"}
    (d / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    return d / "tiny.yaml"


def _train(cfg_path, out, **kw):
    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.loop import train

    ui.set_quiet(True)
    return train(load_config(cfg_path), out, **kw)


def _epoch(path: Path) -> int:
    import torch

    return torch.load(path, weights_only=True, map_location="cpu")["epoch"]


def test_train_writes_last_before_best(tiny_cfg, tmp_path, monkeypatch):
    import semiseg.train.loop as T

    order = []
    real = T.save_checkpoint
    monkeypatch.setattr(T, "save_checkpoint",
                        lambda s, p: (order.append((s["epoch"], Path(p).name)), real(s, p)))
    _train(tiny_cfg, tmp_path / "r")
    assert order[:2] == [(1, "last.pt"), (1, "best.pt")]  # epoch 1 is the best so far
    for e in {e for e, _ in order}:
        names = [n for ep, n in order if ep == e]
        assert names[0] == "last.pt", order


def test_train_without_validation_windows_says_so(tiny_cfg, tmp_path, monkeypatch):
    """A run with no validation windows (valid_fraction 0) picks its best epoch by the
    training loss (the lower of the two epochs' losses in metrics.tsv, read here), and
    its log says so instead of printing NaN scores."""
    import csv

    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.loop import train

    logs = []
    monkeypatch.setattr(ui, "log", lambda m: logs.append(str(m)))
    res = train(load_config(tiny_cfg, ["windows.valid_fraction=0"]), tmp_path / "r")
    rows = list(csv.DictReader(open(tmp_path / "r" / "metrics.tsv"), delimiter="\t"))
    losses = [float(r["train_loss"]) for r in rows]
    assert res["best_epoch"] == 1 + losses.index(min(losses))
    epochs = [m for m in logs if m.startswith("epoch ")]
    assert len(epochs) == 2 and all("no validation windows" in m for m in epochs)
    assert not any("nan" in m for m in epochs + [m for m in logs if "best epoch" in m])
    assert any(m.startswith(f"best epoch {res['best_epoch']} (the lowest training loss")
               for m in logs)


@pytest.mark.parametrize("select", ["loss", "f1"])
def test_best_epoch_when_validation_windows_appear(select):
    """A run that had no validation windows (its best chosen by training loss, val_loss
    NaN) and has them after a resume (a newer split): the first validated epoch is the
    best, whatever its training loss; epochs after it are judged by validation."""
    from semiseg.train.loop import _better

    nan = float("nan")
    best = {"epoch": 3, "val_f1": nan, "val_loss": nan, "train_loss": 0.1}
    row = {"epoch": 4, "val_f1": 0.5, "val_loss": 0.2, "train_loss": 0.3}
    assert _better(row, best, select)
    best = {"epoch": 4, "val_f1": 0.5, "val_loss": 0.2, "train_loss": 0.3}
    assert not _better({**row, "epoch": 5, "val_f1": 0.4, "val_loss": 0.25}, best, select)
    assert _better({**row, "epoch": 5, "val_f1": 0.6, "val_loss": 0.1}, best, select)


@pytest.mark.parametrize("fail", ["last.pt@1", "best.pt@1", "last.pt@2", "metrics.tsv@1"])
def test_train_disk_full_then_resume(tiny_cfg, tmp_path, monkeypatch, fail):
    """Disk full while writing a checkpoint (or metrics.tsv) of an epoch: one line saying
    what is kept and what to do; doing that (--resume, or the same command when no epoch
    was complete) finishes the run, with best.pt the best epoch's state."""
    import semiseg.train.loop as T

    name, epoch = fail.split("@")
    epoch = int(epoch)
    out = tmp_path / "r"
    real_save, real_metrics = T.save_checkpoint, T._write_metrics

    def save(state, path):
        if Path(path).name == name and state["epoch"] == epoch:
            Path(str(path) + ".tmp").write_bytes(b"partial")  # what a full disk leaves
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos")
        return real_save(state, path)

    def metrics(history, names, path):
        if name == "metrics.tsv" and len(history) == epoch:
            raise OSError(errno.ENOSPC, ENOSPC)
        return real_metrics(history, names, path)
    monkeypatch.setattr(T, "save_checkpoint", save)
    monkeypatch.setattr(T, "_write_metrics", metrics)
    monkeypatch.setattr(T, "_why", lambda folder, err: ENOSPC)  # statvfs of a full disk
    with pytest.raises(SemisegError) as err:
        _train(tiny_cfg, out)
    msg = str(err.value)
    assert "\n" not in msg and ENOSPC in msg and name in msg, msg
    monkeypatch.undo()
    if fail == "last.pt@1":
        assert "no epoch was complete" in msg and not (out / "last.pt").exists()
        _train(tiny_cfg, out)  # "run the same command again"
    else:
        assert "--resume" in msg and (out / "last.pt").is_file()
        _train(tiny_cfg, out, resume=True)
    assert _epoch(out / "last.pt") == 2
    import torch

    last = torch.load(out / "last.pt", weights_only=True)
    assert _epoch(out / "best.pt") == last["best"]["epoch"]
    assert not list(out.glob("*.tmp"))
    assert len((out / "metrics.tsv").read_text().splitlines()) == 3


@pytest.mark.parametrize("leave", [0, 8 << 10, 64 << 10])
def test_train_real_disk_full(disk, tiny_cfg, leave):
    """Training into a real full file system: one line naming the file and the cause (the
    RuntimeError torch.save raises does not say it), no partial file; once there is
    room, what the message says to do works."""
    out = disk / "r"
    _fill(disk, leave)
    with pytest.raises(SemisegError) as err:
        _train(tiny_cfg, out)
    msg = str(err.value)
    assert "\n" not in msg and ENOSPC in msg, msg
    assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]
    (disk / "filler").unlink()
    if "--resume" in msg:
        _train(tiny_cfg, out, resume=True)
    else:  # nothing was written (with no room even for the lock: no folder either)
        assert "run the same command again" in msg or "cannot create the lock" in msg
        _train(tiny_cfg, out)
    assert _epoch(out / "last.pt") == 2


@pytest.fixture(scope="module")
def finished(tiny_cfg, tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "r"
    _train(tiny_cfg, out)
    return out


def _copy_run(finished, dst, keep):
    dst.mkdir()
    for n in keep:
        shutil.copy(finished / n, dst / n)
    return dst


@pytest.mark.parametrize("state", ["only-best", "corrupt-last", "only-temp", "empty"])
def test_train_never_a_dead_end(tiny_cfg, finished, tmp_path, state):
    """Whatever a stopped run left, the messages say what works, and it does: only best.pt
    (a run stopped by an older semiseg) or a damaged last.pt -> --overwrite; only partial
    temporary files, or nothing -> --resume says to run without it, which works (the
    temporary files are removed)."""
    out = tmp_path / "r"
    if state == "only-best":
        _copy_run(finished, out, ["best.pt", "config.yaml"])
    elif state == "corrupt-last":
        _copy_run(finished, out, ["best.pt", "config.yaml", "metrics.tsv"])
        data = (finished / "last.pt").read_bytes()
        (out / "last.pt").write_bytes(data[: len(data) // 3])
    elif state == "only-temp":
        out.mkdir()
        for n in ("last.pt.tmp", "best.pt.tmp", "metrics.tsv.tmp", "config.yaml.tmp"):
            (out / n).write_bytes(b"partial")
    else:
        out.mkdir()
    if state in ("only-best", "corrupt-last"):
        for resume in (False, True):
            with pytest.raises(SemisegError, match="--overwrite") as err:
                _train(tiny_cfg, out, resume=resume)
            assert "\n" not in str(err.value)
        _train(tiny_cfg, out, overwrite=True)
    else:
        with pytest.raises(SemisegError, match="run without --resume") as err:
            _train(tiny_cfg, out, resume=True)
        assert "\n" not in str(err.value)
        _train(tiny_cfg, out)
    assert _epoch(out / "last.pt") == 2
    names = {p.name for p in out.iterdir()}
    assert {"best.pt", "config.yaml", "last.pt", "metrics.tsv"} <= names
    assert not [n for n in names if n.endswith(".tmp")]


def test_train_fresh_run_on_finished_folder_says_what_to_do(tiny_cfg, finished):
    with pytest.raises(SemisegError) as err:
        _train(tiny_cfg, finished)
    assert all(w in str(err.value) for w in ("--resume", "--overwrite", "--out"))
    with pytest.raises(SemisegError, match="choose one"):
        _train(tiny_cfg, finished, resume=True, overwrite=True)


def test_train_best_mended_from_last(tiny_cfg, finished, tmp_path):
    """A run stopped between last.pt and best.pt of its best epoch: --resume writes
    best.pt from last.pt (else best.pt would stay an older epoch for good)."""
    import torch

    out = _copy_run(finished, tmp_path / "r", ["config.yaml", "metrics.tsv"])
    last = torch.load(finished / "last.pt", weights_only=True)
    last["epoch"] = last["best"]["epoch"] = 2
    torch.save(last, out / "last.pt")
    older = dict(last, epoch=1)
    torch.save(older, out / "best.pt")
    _train(tiny_cfg, out, resume=True)
    assert _epoch(out / "best.pt") == 2


@pytest.mark.parametrize("owner", ["alive", "dead"])
def test_train_folder_lock(tiny_cfg, tmp_path, owner):
    """A second train on a run folder that a live run holds (OUT/train.lock) is refused
    with one line, the folder untouched; a dead run's lock is taken over."""
    out = tmp_path / "r"
    out.mkdir()
    pid = os.getppid() if owner == "alive" else _dead_pid()
    (out / "train.lock").write_text(f"{pid} {socket.gethostname()}\n")
    before = _tree(out)
    if owner == "alive":
        with pytest.raises(SemisegError) as err:
            _train(tiny_cfg, out)
        assert "another semiseg run" in str(err.value) and f"pid {pid}" in str(err.value)
        assert "train.lock" in str(err.value) and "\n" not in str(err.value)
        assert _tree(out) == before
    else:
        _train(tiny_cfg, out)
        assert _epoch(out / "last.pt") == 2 and not (out / "train.lock").exists()


@pytest.mark.slow
def test_train_sigterm(tiny_cfg, tmp_path):
    """SIGTERM (a SLURM time limit) once epoch 1 is saved: exit 130, one line saying to
    --resume, no temporary files; --resume then finishes."""
    out = tmp_path / "r"
    proc = subprocess.Popen(_cli_cmd("train", "-c", tiny_cfg, "-o", out, "--epochs", "6",
                                     "-q"), stderr=subprocess.PIPE, text=True)
    assert _wait_for(lambda: (out / "last.pt").exists(), proc), proc.communicate()[1]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = _lines(err)
    assert len(lines) == 1 and lines[0].startswith("semiseg: interrupted by SIGTERM")
    assert "--resume" in lines[0]
    assert not list(out.glob("*.tmp"))
    done = _epoch(out / "last.pt")
    assert 1 <= done < 6
    from test_shipped_models import cli

    # what the line says to do, through main() in this process (the resume is not about
    # the process; a second start of torch cost seconds)
    r = cli("train", "-c", tiny_cfg, "-o", out, "--epochs", "6", "--resume", "-q")
    assert r.returncode == 0, r.stderr
    assert _epoch(out / "last.pt") == 6


OPEN_RACE_SCRIPT = """
import os, signal, sys
import numpy as np
import pyBigWig
from semiseg import runtime
from semiseg.genome import LabelScheme, OutputWriter
runtime.install()
real_open = pyBigWig.open
def open_then_signal(path, *mode):
    bw = real_open(path, *mode)
    if mode == ("w",):  # the signal lands as libBigWig's open returns
        os.kill(os.getpid(), signal.SIGINT)
    return bw
pyBigWig.open = open_then_signal
scheme = LabelScheme.from_dict({"name": "t", "labels": [{"name": "a"}, {"name": "b"}]})
try:
    with OutputWriter(sys.argv[1], scheme, {"c1": 100}, formats=("bed", "bigwig")) as w:
        w.add("c1", np.array([[0, 100, 0]]), np.full((100, 2), 0.5, np.float32))
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_signal_as_a_bigwig_opens_prints_nothing(tmp_path):
    """A SIGINT landing just as pyBigWig.open returns (the CI flake of stop 54: the new
    file, not yet kept by the writer, was freed unclosed and libBigWig printed its own
    '[bwClose] ... error' beside `semiseg: interrupted`): the interrupt is raised, stderr
    stays empty and no file is left."""
    r = subprocess.run([sys.executable, "-c", OPEN_RACE_SCRIPT, str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "interrupted", (r.stdout, r.stderr)
    assert r.stderr == ""
    assert os.listdir(tmp_path) == []



_FAULTS = r"""
import ctypes, resource, sys
from semiseg.runtime import keep_freed_memory
done = keep_freed_memory() if sys.argv[1] == "1" else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def touched():  # 100 MB from the C library's malloc, every page written, freed
    n = 100 * 2**20
    p = libc.malloc(n)
    ctypes.memset(p, 1, n)
    libc.free(p)
touched()  # the first time: faulted in either way
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
touched()
print(int(done), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_freed_memory_is_reused_without_page_faults():
    """keep_freed_memory (the command line's main): a 100 MB block freed and allocated
    again comes back from the heap, already faulted in, where by default the C library
    maps it afresh (25,600 pages faulted in again; fewer with transparent huge pages
    always on); SEMISEG_MALLOC=system leaves the default."""
    def run(on, **env):
        out = subprocess.run([sys.executable, "-c", _FAULTS, on], capture_output=True,
                             text=True, check=True, env={**os.environ, **env}).stdout.split()
        return int(out[0]), int(out[1])

    done, kept = run("1")
    assert done == 1  # glibc: mallopt is there
    done_sys, default_sys = run("1", SEMISEG_MALLOC="system")
    _, default = run("0")
    assert done_sys == 0 and default > 0 and default_sys > 0
    assert kept * 10 < min(default, default_sys)
