"""A long sequence's arrays held in mapped files (annotate/spill.py): the same numbers as
in memory, nothing left on disk, and the whole CLI run the same outputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from semiseg.annotate import spill

ROOT = Path(__file__).resolve().parent.parent


def _maps_of(folder: Path) -> list[str]:
    """This process's mappings of files in `folder` (deleted ones included)."""
    with open("/proc/self/maps") as fh:
        return [ln for ln in fh if str(folder) in ln]


def test_spilled_arrays_are_mapped_files_that_leave_no_name(tmp_path):
    before = spill.spilled()
    with spill.spilling(tmp_path, min_bytes=1000):
        small = spill.empty((10, 3), torch.float32)  # under min_bytes: memory
        big = spill.empty((1000, 58), torch.float32)
        flags = spill.np_empty(5000, np.bool_)
        runs = spill.np_full(2000, np.nan, np.float64)
        rows = spill.empty((1000, 58), torch.float32, torch.device("cpu"))
        assert spill.active()
    assert not spill.active()
    assert spill.spilled()[1] - before[1] == 4
    assert spill.spilled()[0] - before[0] == 2 * 1000 * 58 * 4 + 5000 + 2000 * 8
    assert np.isnan(runs).all() and runs.dtype == np.float64 and rows.shape == (1000, 58)
    assert os.listdir(tmp_path) == []  # unlinked as soon as mapped
    if os.path.exists("/proc/self/maps"):
        assert len(_maps_of(tmp_path)) >= 2  # ... and mapped while alive
    big[:] = torch.arange(58.0)
    flags[:] = True
    small[:] = 1
    assert float(big.sum()) == 1000 * sum(range(58)) and flags.all() and big.dtype == torch.float32
    del big, flags, runs, rows
    import gc

    gc.collect()
    if os.path.exists("/proc/self/maps"):
        assert _maps_of(tmp_path) == []  # unmapped with the arrays


def test_spilling_nests_and_restores(tmp_path):
    with spill.spilling(tmp_path / "a", 0):
        with spill.spilling(None):
            assert not spill.active()
        assert spill.active()
    assert not spill.active()


@pytest.fixture(scope="module")
def fly():
    """The shipped fly model's Annotator and the emissions of 30 kb of fly (CPU)."""
    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    ck = load_checkpoint(resolve_model("fly"))
    fa = Fasta(str(ROOT / "data" / "fly" / "chr2R_2M_6M.fa"))
    data = GenomeData.from_config(ck.genome, fa)
    # encoder windows of 10 kb: the 30 kb's emissions come from several
    ann = Annotator(ck, data, torch.device("cpu"), 10000, 1000, 2000000, 200000)
    item = Item("chr2R_2M_6M", 3_100_000, 3_130_000)
    em, _ = ann.emissions(item)
    yield ann, item, em
    fa.close()


def test_emissions_of_a_long_sequence_in_a_file_are_the_same(fly, tmp_path):
    ann, item, em = fly
    with spill.spilling(tmp_path, 0):
        before = spill.spilled()[1]
        em2, _ = ann.emissions(item)
        assert spill.spilled()[1] > before
    assert torch.equal(em, em2)


def test_gene_decode_with_its_arrays_in_files_is_the_same(fly, tmp_path, monkeypatch):
    """The certified gene decode of 30 kb of fly (windows of 15,000 steps, the terms and
    marginals in chunks of 5,000) with every whole-sequence array in a mapped file:
    the same labels and bit-identical marginals as in memory, no file left."""
    from semiseg.annotate import posterior_seams

    ann, _, em = fly
    head = ann.model.crf
    monkeypatch.setattr(posterior_seams, "TERMS_CHUNK", 5000)
    monkeypatch.setattr(posterior_seams, "TERMS_CONTEXT", 128)
    want = posterior_seams.gene_decode(head, em, 15000, 5000, 2)
    with spill.spilling(tmp_path, 0):
        before = spill.spilled()[1]
        got = posterior_seams.gene_decode(head, em, 15000, 5000, 2)
        # terms (2), windows' posteriors, stitched, decode scores, marginals (2)
        assert spill.spilled()[1] - before >= 7
    np.testing.assert_array_equal(got[0], want[0])
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
    del got
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_annotate_with_spilled_arrays_writes_the_same_files(tmp_path, monkeypatch):
    """`semiseg annotate` of 40 kb of fly in certified windows of 12,000 steps, once as is
    and once with SEMISEG_SPILL=always (every whole-sequence array in a file of a folder
    whose path has a space): the same BED and GFF3 rows and the same bigWig values, and
    the spill folder empty afterwards."""
    import pyBigWig
    from test_shipped_models import cli

    from semiseg.genome import Fasta

    with Fasta(str(ROOT / "data" / "fly" / "chr2R_2M_6M.fa")) as fa:
        seq = fa.fetch("chr2R_2M_6M", 3_200_000, 3_240_000)
    fasta = tmp_path / "p.fa"
    fasta.write_text(f">p\n{seq}\n")
    folder = tmp_path / "spill here"
    before = spill.spilled()[1]
    for name, env in (("mem", {}), ("files", {"SEMISEG_SPILL": "always",
                                              "SEMISEG_SPILL_DIR": str(folder)})):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        proc = cli("annotate", "--model", "fly", "--fasta", fasta, "--out",
                   tmp_path / name / "p", "--device", "cpu", "--max-decode-steps", "12000")
        assert proc.returncode == 0, proc.stderr
        assert "decoded in certified windows" in proc.stderr
    assert os.listdir(folder) == [] and spill.spilled()[1] > before
    for ext in ("bed", "gff3"):
        rows = [[r for r in (tmp_path / n / f"p.{ext}").read_text().splitlines()
                 if not r.startswith("#")] for n in ("mem", "files")]
        assert rows[0] == rows[1] and len(rows[0]) > 10
    for track in ("posterior.CDS+", "boundary", "entropy"):
        vals = []
        for n in ("mem", "files"):
            with pyBigWig.open(str(tmp_path / n / f"p.{track}.bw")) as bw:
                vals.append(np.asarray(bw.values("p", 0, 40000), np.float64))
        np.testing.assert_array_equal(vals[0], vals[1])


def test_spilling_shortens_the_cpus_windows_and_chunks(tmp_path):
    """While a sequence's arrays are in files the CPU's posterior windows and the terms'
    chunks are shorter (their own memory is then what the run takes); a GPU's are not."""
    from types import SimpleNamespace

    from semiseg.annotate import posterior_seams as ps

    cpu = SimpleNamespace(device=torch.device("cpu"), max_steps=10**8)
    gpu = SimpleNamespace(device=SimpleNamespace(type="cuda"), max_steps=10**8)
    assert ps.long_window(cpu) == ps.CPU_WINDOW and ps._chunk() == ps.TERMS_CHUNK
    with spill.spilling(tmp_path):
        assert ps.long_window(cpu) == ps.SPILL_WINDOW < ps.CPU_WINDOW
        assert ps._chunk() == ps.SPILL_CHUNK < ps.TERMS_CHUNK
        assert ps.long_window(gpu) == ps.GPU_WINDOW
    assert ps.long_window(SimpleNamespace(device=torch.device("cpu"), max_steps=1000)) == 1000
