"""Pieces of train/annotate checked on their own: the encoder's batch invariance, the
schedule, reverse-complement augmentation, region parsing and the checkpoint format."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semiseg.config.load import from_dict
from semiseg.errors import SemisegError


def test_encoder_output_does_not_depend_on_the_batch():
    """Padding and batch neighbours leave a sequence's emissions unchanged (per-position
    normalisation, masked pooling), including a last partial bin."""
    from semiseg.model import Segmenter

    torch.manual_seed(0)
    cfg = from_dict({"model": {"resolution": 10, "channels": 16, "layers": 3,
                               "encoder": "cnn_lstm", "lstm_hidden": 8},
                     "crf": {"max_duration": 8}})
    m = Segmenter(4, 3, cfg).eval()
    x = torch.randn(3, 1000, 4)
    lengths = torch.tensor([1000, 731, 95])
    with torch.no_grad():
        em, hid, steps = m(x, lengths)
        assert steps.tolist() == [100, 74, 10]
        for b in range(3):
            L = int(lengths[b])
            e1, h1, s1 = m(x[b:b + 1, :L], lengths[b:b + 1])
            torch.testing.assert_close(em[b, :s1[0]], e1[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(hid[b, :s1[0]], h1[0], atol=1e-5, rtol=1e-5)
            assert (hid[b, s1[0]:] == 0).all()


def test_learning_rate_schedule():
    from semiseg.train.loop import learning_rate

    lrs = [learning_rate(s, 100, 10, 1.0) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))  # cosine decay after warm-up
    assert lrs[-1] < 0.01


def test_strand_swap_and_reverse_complement():
    from semiseg.genome import LabelScheme, load_scheme
    from semiseg.genome.scheme import strand_swap
    from semiseg.genome.sequence import rc_columns
    from semiseg.train.data import Dataset

    gs = load_scheme("gene_structure")
    swap = strand_swap(gs)
    for i, n in enumerate(gs.names):
        twin = gs.names[swap[i]]
        assert twin == (n if n == "intergenic" else n[:-1] + {"+": "-", "-": "+"}[n[-1]])
    with pytest.raises(SemisegError, match="no unique twin"):
        strand_swap(LabelScheme.from_dict({"labels": [{"name": "a"},
                                                      {"name": "fwd", "strand": "+"}]}))
    assert rc_columns(["A", "C", "G", "T", "dnase", "dnase.missing"]) == [3, 2, 1, 0, 4, 5]

    ds = Dataset.__new__(Dataset)
    seq = "AACGTTTGCA" * 2 + "ACG"  # 23 bp, resolution 5 -> 5 steps, last one partial
    onehot = np.eye(4, dtype=np.float32)[["ACGT".index(c) for c in seq]]
    ds.x = [onehot[:20], onehot]
    ds.y = [np.array([0, 1, 1, -1]), np.array([0, 1, 2, 2, 0])]
    ds.rc_columns, ds.rc_labels, ds.pool = [3, 2, 1, 0], np.array([0, 2, 1]), 5
    x, lengths, y = ds.batch([0, 1], flip=[True, True])
    rc = "".join({"A": "T", "C": "G", "G": "C", "T": "A"}[c] for c in reversed(seq[:20]))
    assert "".join("ACGT"[i] for i in x[0, :20].argmax(1).tolist()) == rc
    assert y[0, :4].tolist() == [-1, 2, 2, 0]
    # 23 bp is not a whole number of steps: left as it is
    assert torch.equal(x[1], torch.from_numpy(onehot)) and y[1].tolist() == [0, 1, 2, 2, 0]
    assert lengths.tolist() == [20, 23]


def test_read_regions(tmp_path):
    from semiseg.annotate.run import read_regions

    bed = tmp_path / "r.bed"
    bed.write_text("b\t5\t17\n#c\na\t0\t10\na\t8\t30\n")
    items = read_regions(str(bed), {"a": 100, "b": 20}, res=10)
    assert [(i.chrom, i.start, i.end) for i in items] == [("a", 0, 30), ("b", 0, 20)]
    bed.write_text("z\t0\t10\n")
    with pytest.raises(SemisegError, match="not in the FASTA"):
        read_regions(str(bed), {"a": 100})
    bed.write_text("a\t50\t200\n")
    with pytest.raises(SemisegError, match="outside"):
        read_regions(str(bed), {"a": 100})
    for bad in ("a\t50\t20\n", "a\t50\t50\n"):  # start past or at the end
        bed.write_text("#h\n" + bad)
        with pytest.raises(SemisegError, match=r"r\.bed:2: region .* is empty"):
            read_regions(str(bed), {"a": 100})


def test_groups_batch_consecutive_short_items():
    from semiseg.annotate.annotator import Item
    from semiseg.annotate.batches import groups as _groups

    items = [Item("big", 0, 10_000), Item("s1", 0, 300), Item("s2", 0, 200),
             Item("s3", 0, 250), Item("big2", 0, 9_000), Item("s4", 0, 100)]
    groups = list(_groups(items, res=10, window=1000, max_steps=10_000, batch_steps=80))
    assert [[i.chrom for i in g] for g in groups] == [["big"], ["s1", "s2"], ["s3"],
                                                      ["big2"], ["s4"]]


def test_model_hash_changes_with_weights():
    from semiseg.model import model_hash

    sd = {"a": torch.zeros(3), "b": torch.ones(2, 2)}
    h = model_hash(sd)
    assert len(h) == 12 and h == model_hash(dict(sd))
    sd2 = dict(sd, a=torch.tensor([0.0, 0.0, 1e-7]))
    assert model_hash(sd2) != h


def test_writer_thread_gives_the_same_files(tmp_path):
    """annotate writes each chromosome in a background thread on a GPU (annotate.WRITER,
    emit.LocalWriter): forced on here on the CPU, every output file must be byte for byte
    the one written in the caller's thread, the summary's counts included."""
    import os

    import semiseg.annotate.run as A
    from semiseg import ui
    from semiseg.genome import Fasta

    root = os.path.join(os.path.dirname(__file__), "..")
    with Fasta(os.path.join(root, "data", "yeast", "chrI.fa")) as fa:
        seq = fa.fetch("chrI", 30000, 42000)
    fasta = tmp_path / "three.fa"
    fasta.write_text("".join(f">c{i}\n{seq[i * 4000:(i + 1) * 4000]}\n" for i in range(3)))
    model = os.path.join(root, "semiseg", "models", "yeast_cds_frames.pt")
    modes = ("inline", "thread")
    ui.set_quiet(True)
    try:
        for mode in modes:  # one prefix name (the browser BED's track line)
            A.WRITER = mode
            (tmp_path / mode).mkdir()
            A.annotate(model, str(fasta), str(tmp_path / mode / "out"),
                       device="cpu", intron_penalty=8.0)
    finally:
        A.WRITER = None
        ui.set_quiet(False)
    names = sorted(p.name for p in (tmp_path / "inline").iterdir())
    assert {"out.bed", "out.gff3", "out.boundary.bw", "out.summary.tsv"} <= set(names)
    assert "CDS+" in (tmp_path / "inline" / "out.bed").read_text()
    def body(path):  # without the provenance comments (date, output paths)
        return [ln for ln in path.read_bytes().splitlines() if not ln.startswith(b"# ")]

    for mode in modes[1:]:
        assert names == sorted(p.name for p in (tmp_path / mode).iterdir()), mode
        for n in names:
            if n == "out.json":  # the provenance sidecar: date and paths differ
                continue
            assert body(tmp_path / "inline" / n) == body(tmp_path / mode / n), (mode, n)


def test_behind_runs_in_order_and_raises_the_first_error():
    from semiseg.annotate.background import Behind

    for threaded in (False, True):
        done = []
        b = Behind(threaded, depth=1)
        for i in range(5):
            b.submit(done.append, i)
        b.wait()
        assert done == list(range(5))

        def boom():
            raise RuntimeError("disk full")

        b = Behind(threaded)
        with pytest.raises(RuntimeError, match="disk full"):
            b.submit(boom)
            b.wait()
        b.close()


def test_behind_queues_light_calls_and_holds_back_heavy_ones():
    """Light calls (weights within the budget) queue beyond `depth` without blocking the
    caller; a heavy one then makes `submit` wait until the backlog is written."""
    import threading

    from semiseg.annotate.background import Behind

    go, done = threading.Event(), []

    def work(i):
        go.wait(10)
        done.append(i)

    b = Behind(True, depth=1, budget=10)

    def submit_all(calls):
        for i, w in calls:
            b.submit(work, i, weight=w)

    light = threading.Thread(target=submit_all, args=([(i, 1) for i in range(6)],))
    light.start()
    light.join(2)
    assert not light.is_alive() and done == []  # six light calls queued, none written
    heavy = threading.Thread(target=submit_all, args=([(6, 100)],))
    heavy.start()
    heavy.join(0.3)
    assert heavy.is_alive()  # 7 pending, weight 106 > 10: the caller waits
    go.set()
    heavy.join(10)
    assert not heavy.is_alive()
    b.wait()
    assert done == list(range(7))


def test_empty_fasta_record_is_left_out(tmp_path):
    """An empty FASTA record (nothing to annotate) is left out of every output, with a
    note, and the others are annotated as without it (it once reached the semi-CRF as a
    length-0 sequence of a batch: a ValueError traceback)."""
    import os

    import pyBigWig

    import semiseg.annotate.run as A
    from semiseg import ui
    from semiseg.genome import Fasta

    root = os.path.join(os.path.dirname(__file__), "..")
    with Fasta(os.path.join(root, "data", "yeast", "chrI.fa")) as fa:
        seq = fa.fetch("chrI", 30000, 36000)
    model = os.path.join(root, "semiseg", "models", "yeast_cds_frames.pt")
    with_empty = tmp_path / "e.fa"
    with_empty.write_text(f">a\n{seq[:3000]}\n>gone\n\n>b\n{seq[3000:]}\n")
    plain = tmp_path / "p.fa"
    plain.write_text(f">a\n{seq[:3000]}\n>b\n{seq[3000:]}\n")
    ui.set_quiet(True)
    try:
        A.annotate(model, str(with_empty), str(tmp_path / "e"), device="cpu")
        A.annotate(model, str(plain), str(tmp_path / "p"), device="cpu")
    finally:
        ui.set_quiet(False)
    assert (tmp_path / "e.bed").read_text() == (tmp_path / "p.bed").read_text()
    assert {r.split("\t")[0] for r in (tmp_path / "e.bed").read_text().splitlines()} == \
        {"a", "b"}
    bw = pyBigWig.open(str(tmp_path / "e.boundary.bw"))
    assert bw.chroms() == {"a": 3000, "b": 3000}
    bw.close()


def test_reverse_rows_against_a_loop():
    from semiseg.annotate.annotator import _reverse_rows

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 9, 2, generator=g)
    end, length = torch.tensor([9, 7, 4]), torch.tensor([9, 5, 4])
    got = _reverse_rows(x, end, length, 11)
    want = torch.zeros(3, 11, 2)
    for b in range(3):
        e, n = int(end[b]), int(length[b])
        want[b, e - n:e] = x[b, :n].flip(0)
    assert torch.equal(got, want)


def test_annotate_emissions_over_both_strands_against_the_reverse_complement():
    """annotate's --reverse-complement emissions of a batch of two sequences: the mean of
    each one's forward emissions and those of its reverse complement, read back to front
    with the strands' channels swapped (each encoded alone, from the reversed string). The
    encoder's output at a base moves by ~1e-3 with the batch's zero padding, where a
    missed reversal or channel swap moves it by ~1."""
    from seqs import ROOT, SHIPPED_MODEL, onehot, rc

    from semiseg.annotate.annotator import Annotator
    from semiseg.checkpoint import load_checkpoint
    from semiseg.genome import Fasta, GenomeData

    ckpt = load_checkpoint(SHIPPED_MODEL)
    with Fasta(f"{ROOT}/data/yeast/chrI.fa") as fa:
        data = GenomeData.from_config(ckpt.genome, fa)
        seqs = [fa.fetch("chrI", 30000, 31500), fa.fetch("chrI", 40000, 41237)]
        ann = Annotator(ckpt, data, torch.device("cpu"), 100000, 5000, 10**9, 10**9,
                        reverse_complement=True)
        x = np.zeros((2, 1500, 4), np.float32)
        for b, s in enumerate(seqs):
            x[b, :len(s)] = onehot(s.upper())
        got, _ = ann._encode(x, [len(s) for s in seqs])
        ann.rc = None
        swap = ann.model.channel_swap
        for b, s in enumerate(seqs):
            fwd, _ = ann._encode(onehot(s.upper())[None], [len(s)])
            back, _ = ann._encode(onehot(rc(s.upper()))[None], [len(s)])
            want = (fwd[0] + back[0].flip(0)[:, swap]) / 2
            assert torch.allclose(got[b, :len(s)], want, atol=5e-3), b
