"""N runs cut out before encoding (semiseg/annotate/gaps.py) and annotate's progress during long
sequences (semiseg/annotate/progress.py), issue 42."""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
from seqs import ROOT, SHIPPED_MODEL

from semiseg import ui
from semiseg.annotate import gaps, progress
from semiseg.annotate import run as A
from semiseg.annotate.annotator import Item
from semiseg.annotate.run import annotate

CHRI = os.path.join(ROOT, "data", "yeast", "chrI.fa")


def _chrI(start: int, end: int) -> str:
    from semiseg.genome import Fasta

    with Fasta(CHRI) as fa:
        return fa.fetch("chrI", start, end).upper()


class _Runs:
    """A stand-in Fasta: n_runs of given sequences, by brute force."""

    def __init__(self, seqs: dict[str, str]):
        self.seqs = seqs

    def n_runs(self, chrom, min_length=1):
        s, out, i = self.seqs[chrom], [], 0
        while i < len(s):
            if s[i] in "Nn":
                j = i
                while j < len(s) and s[j] in "Nn":
                    j += 1
                if j - i >= min_length:
                    out.append((i, j))
                i = j
            else:
                i += 1
        return np.asarray(out, np.int64).reshape(-1, 2)


def _oracle_pieces(seq: str, start: int, end: int, res: int) -> list[tuple[int, int]]:
    """Per step of the res grid from `start`: kept unless every base of it is in an N run
    of gap_min(res)+ bp; the pieces are the maximal runs of kept steps."""
    long_n = np.zeros(len(seq), bool)
    for a, b in _Runs({"c": seq}).n_runs("c", gaps.gap_min(res)).tolist():
        long_n[a:b] = True
    keep = [not long_n[p:min(p + res, end)].all() for p in range(start, end, res)]
    pieces, cur = [], None
    for k, p in zip(keep, range(start, end, res)):
        if k and cur is None:
            cur = p
        if not k and cur is not None:
            pieces.append((cur, p))
            cur = None
    if cur is not None:
        pieces.append((cur, end))
    return pieces


@pytest.mark.parametrize("res", [1, 3, 64, 200])
def test_cut_against_per_step_oracle(res):
    rng = np.random.default_rng(res)
    for trial in range(60):
        n = int(rng.integers(1, 3000))
        seq = np.array(list("ACGT"))[rng.integers(0, 4, n)]
        for _ in range(int(rng.integers(0, 5))):  # N runs, some long, some short
            a = int(rng.integers(0, n))
            seq[a:a + int(rng.choice([1, 50, 99, 100, 101, 250, 700, 2000]))] = "N"
        seq = "".join(seq)
        fa = _Runs({"c": seq})
        start = int(rng.integers(0, n)) // res * res if trial % 2 else 0  # a region
        end = n if trial % 3 else int(rng.integers(start + 1, n + 1))
        got = [(p.start, p.end) for p in gaps.cut([Item("c", start, end)], fa, res)]
        assert got == _oracle_pieces(seq, start, end, res), (trial, res)


def test_cut_keeps_short_runs_and_drops_all_n():
    fa = _Runs({"a": "ACGT" * 10 + "N" * 99 + "ACGT" * 10, "b": "N" * 500,
                "c": "AC" + "N" * 100 + "GT"})
    items = [Item("a", 0, 179), Item("b", 0, 500), Item("c", 0, 104)]
    got = [(p.chrom, p.start, p.end) for p in gaps.cut(items, fa, 1)]
    assert got == [("a", 0, 179), ("c", 0, 2), ("c", 102, 104)]


def _write(path: Path, records: dict[str, str]) -> str:
    path.write_text("".join(f">{n}\n{s}\n" for n, s in records.items()))
    return str(path)


def _rows(path: str) -> list[list[str]]:
    with open(path) as fh:
        return [line.rstrip("\n").split("\t") for line in fh if not line.startswith(("#", "track"))]


def _labels(rows, chrom: str, start: int, end: int) -> list[str]:
    """The BED's label per base of chrom[start:end]."""
    lab = [None] * (end - start)
    for f in rows:
        if f[0] != chrom:
            continue
        a, b = max(int(f[1]), start), min(int(f[2]), end)
        for i in range(a, b):
            lab[i - start] = f[3]
    return lab


def _summary(path: str) -> dict[str, tuple[int, int]]:
    out = {}
    for f in _rows(path):
        if f[0] != "label":
            out[f[0]] = (int(f[1]), int(f[2]))
    return out


def _run(fasta: str, out: str, **kw) -> None:
    annotate(SHIPPED_MODEL, fasta, out, device="cpu", threads=1, **kw)


@pytest.fixture(autouse=True)
def _inline_writer(monkeypatch):
    monkeypatch.setattr(A, "WRITER", "inline")
    ui.set_quiet(False)


def test_long_n_run_is_cut_pieces_as_if_alone(tmp_path):
    """One record A + 3 kb of N + B is annotated as the two records A and B (the oracle:
    a separate run), with one gap row exactly over the N run; a 40-bp N run inside A
    stays in the sequence (no gap row, annotated through)."""
    a, b = _chrI(30_000, 36_000), _chrI(41_000, 45_000)
    a = a[:2_000] + "N" * 40 + a[2_040:]
    joined = _write(tmp_path / "j.fa", {"s": a + "N" * 3_000 + b})
    alone = _write(tmp_path / "p.fa", {"A": a, "B": b})
    _run(joined, str(tmp_path / "j"))
    _run(alone, str(tmp_path / "p"))
    rj, rp = _rows(str(tmp_path / "j.bed")), _rows(str(tmp_path / "p.bed"))
    g0, g1 = len(a), len(a) + 3_000
    assert [(int(f[1]), int(f[2])) for f in rj if f[3] == "gap"] == [(g0, g1)]
    assert not [f for f in rp if f[3] == "gap"]
    assert _labels(rj, "s", 0, g0) == _labels(rp, "A", 0, len(a))
    assert _labels(rj, "s", g1, g1 + len(b)) == _labels(rp, "B", 0, len(b))
    # the summary counts what the two pieces count (the gap is no segment of any label)
    assert _summary(str(tmp_path / "j.summary.tsv")) == _summary(str(tmp_path / "p.summary.tsv"))
    # bigWigs: no value over the gap, the pieces' values elsewhere
    import pyBigWig

    for bw in sorted(tmp_path.glob("j.*.bw")):
        with pyBigWig.open(str(bw)) as j, pyBigWig.open(str(tmp_path / ("p" + bw.name[1:]))) as p:
            assert not j.intervals("s", g0, g1), bw.name
            assert np.allclose(j.values("s", 0, g0), p.values("A", 0, len(a)), equal_nan=True)
            assert np.allclose(j.values("s", g1, g1 + len(b)), p.values("B", 0, len(b)),
                               equal_nan=True)


def test_all_n_sequences_cost_nothing(tmp_path):
    """1 Mb of N is one gap row, fast (generous bound; measured: RESULTS-log.md, "N runs"),
    and all-N records before, between and after a real one keep their FASTA order."""
    fa = _write(tmp_path / "n.fa", {"n1": "N" * 1_000_000})
    t0 = time.perf_counter()
    _run(fa, str(tmp_path / "n"))
    assert time.perf_counter() - t0 < 20
    assert _rows(str(tmp_path / "n.bed")) == [
        ["n1", "0", "1000000", "gap", "0", ".", "0", "1000000", "0,0,0"]]
    real = _chrI(30_000, 33_000)
    fa = _write(tmp_path / "m.fa", {"x": "N" * 700, "r": real, "y": "n" * 300, "z": "N" * 150})
    _run(fa, str(tmp_path / "m"))
    rows = _rows(str(tmp_path / "m.bed"))
    assert [f[0] for f in rows if f[3] == "gap"] == ["x", "y", "z"]
    assert [f[0] for f in rows] == sorted([f[0] for f in rows], key="xryz".index)
    assert {f[0] for f in rows if f[3] != "gap"} == {"r"}


def test_progress_moves_within_one_long_sequence(tmp_path, monkeypatch, capsys):
    """An 8 kb sequence in several encoder chunks and decoding windows: the bar and the
    log (stderr is not a terminal here) advance several times before the end."""
    updates = []

    class Bar:  # a recording stand-in for rich's Progress
        def add_task(self, *a, **k):
            return 0

        def update(self, task, **k):
            updates.append(k.get("completed"))

    @contextlib.contextmanager
    def fake_progress():
        yield Bar()

    monkeypatch.setattr(ui, "progress", fake_progress)
    monkeypatch.setattr(progress, "LOG_EVERY", 0.0)
    seq = _chrI(30_000, 38_000)
    fa = _write(tmp_path / "s.fa", {"s": seq})
    # the centre-keeping windows (the certified ones report through annotate/seams.py)
    _run(fa, str(tmp_path / "o"), window=2_000, context=500, batch_steps=2_000,
         max_decode_steps=2_000, certified_seams=False)
    err = capsys.readouterr().err
    lines = re.findall(r"annotating: ([\d,]+)/8,000 bp", err)
    done = [int(x.replace(",", "")) for x in lines]
    # 8 encoder chunks (1,000 bp kept each) and 6 decoding calls (one window each); the
    # last call ends the sequence, so no line for it
    enc = 8_000 * progress.ENCODE_SHARE
    assert done == sorted(done) and done[0] > 0 and done[-1] < 8_000
    assert len([d for d in done if d <= enc]) == 8
    assert len([d for d in done if d > enc]) == 5
    assert "left" in err and "bp/s" in err
    assert len(updates) >= 10 and updates == sorted(updates) and updates[-1] == 8_000
    assert 0 < updates[0] < 8_000
