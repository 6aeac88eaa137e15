"""Run-posterior scores, entropy tracks and samples in the outputs (write.py,
annotate/uncertainty.py) and the calibration table of `semiseg evaluate`
(evaluate/calibration.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semiseg.annotate import uncertainty
from semiseg.evaluate import calibration
from semiseg.genome import LabelScheme, OutputWriter
from semiseg.genome._util import runs

SCHEME = LabelScheme.from_dict({
    "name": "toy",
    "labels": [{"name": "low", "color": "10,20,30"},
               {"name": "high", "color": "200,0,0", "strand": "+"}],
})


def test_writer_run_posteriors_and_entropy(tmp_path):
    import pyBigWig

    seg = np.array([[0, 10, 0], [10, 30, 1], [30, 100, 0]])
    post = np.full((100, 2), 0.5, np.float32)
    runs = np.array([[0, 10, 0.25], [10, 30, 0.9996], [30, 100, 0.5]])
    h = (np.full(100, 0.3, np.float32), np.full(100, 0.1, np.float32))
    with OutputWriter(tmp_path / "o", SCHEME, {"c1": 100}, formats=("bed", "gff3", "bigwig"),
                      entropy=True) as w:
        w.add("c1", seg, post, np.zeros(100, np.float32), gaps=np.array([[80, 90]]),
              run_posteriors=runs, entropy=h)
    rows = [ln.split("\t") for ln in (tmp_path / "o.bed").read_text().splitlines()
            if not ln.startswith("#")]
    # the last run is cut by the gap: its pieces are not runs of the decoded path
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
        ("0", "10", "low", "250"), ("10", "30", "high", "1000"), ("30", "80", "low", "0"),
        ("80", "90", "gap", "0"), ("90", "100", "low", "0")]
    gff = [ln.split("\t") for ln in (tmp_path / "o.gff3").read_text().splitlines()
           if not ln.startswith("#")]
    assert gff[1][5] == "0.9996" and "mean_posterior=0.500" in gff[1][8]
    assert gff[2][5] == "." and "mean_posterior=0.500" in gff[2][8]
    for name, v in (("entropy", 0.3), ("boundary_entropy", 0.1)):
        bw = pyBigWig.open(str(tmp_path / f"o.{name}.bw"))
        vals = np.asarray(bw.values("c1", 0, 100))
        bw.close()
        np.testing.assert_allclose(vals[:80], v, rtol=1e-6)
        assert np.isnan(vals[80:90]).all()


def test_writer_without_run_posteriors_keeps_mean_score(tmp_path):
    seg = np.array([[0, 50, 0], [50, 100, 1]])
    post = np.zeros((100, 2), np.float32)
    post[:50, 0] = 0.8
    post[50:, 1] = 0.6
    with OutputWriter(tmp_path / "o", SCHEME, {"c1": 100}, formats=("bed",)) as w:
        w.add("c1", seg, post)
    rows = [ln.split("\t") for ln in (tmp_path / "o.bed").read_text().splitlines()
            if not ln.startswith("#")]
    assert [r[4] for r in rows] == ["800", "600"]


def test_entropy_tracks_and_runs():
    post = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [0.2, 0.8]]])  # (B, S, C)
    bnd = torch.tensor([[1.0, 0.5, 0.1]])
    h, hb = uncertainty.entropy_tracks(post, bnd)
    assert h.dtype == hb.dtype == torch.float32 and h.shape == hb.shape == (1, 3)
    h2 = -(0.2 * np.log(0.2) + 0.8 * np.log(0.8))
    hb2 = -(0.1 * np.log(0.1) + 0.9 * np.log(0.9))
    np.testing.assert_allclose(h[0], [0, np.log(2), h2], atol=1e-6)
    np.testing.assert_allclose(hb[0], [0, np.log(2), hb2], atol=1e-6)
    s, e, v = runs(np.array([0, 0, 1, 1, 1, 0]))
    assert s.tolist() == [0, 2, 5] and e.tolist() == [2, 5, 6] and v.tolist() == [0, 1, 0]
    s, e, v = runs(np.array([], np.int64))
    assert s.size == e.size == v.size == 0
    clipped = uncertainty.clip_samples([[(0, 3, 1), (3, 4, 0)]], 2, 5, 10)
    assert clipped == [[(12, 1, 1), (13, 2, 0)]]


def test_per_step_run_posteriors_with_the_head():
    from semiseg.crf import SemiCRF

    torch.manual_seed(0)
    crf = SemiCRF(2, 4).double()
    em = torch.randn(2, 7, 2, dtype=torch.float64)
    lengths = torch.tensor([7, 5])
    labels = crf.decode(em, lengths).labels
    per = uncertainty.per_step_run_posteriors(crf, em, None, lengths, labels)
    assert [len(p) for p in per] == [7, 5]
    for p in per:
        assert np.isfinite(p).all() and ((p >= 0) & (p <= 1)).all()
    smp = uncertainty.draw_samples(crf, em, None, lengths, 3, seed=1)
    assert len(smp) == 2 and all(sum(d for _, d, _ in s) == 7 for s in smp[0])


def test_calibration_counts(tmp_path):
    bed = tmp_path / "p.bed"
    bed.write_text("# header\n"
                   "c\t0\t10\tA\t950\t.\t0\t10\t0,0,0\n"   # exactly right
                   "c\t10\t20\tB\t920\t.\t10\t20\t0,0,0\n"  # truth B runs on to 25
                   "c\t20\t30\tA\t100\t.\t20\t30\t0,0,0\n"
                   "c\t30\t40\tgap\t0\t.\t30\t40\t0,0,0\n")
    rows = calibration.read_scores(str(bed))
    truth = np.array([0] * 10 + [1] * 15 + [0] * 15)
    counts = calibration.new_counts()
    calibration.add_counts(counts, truth, rows["c"], {"A": 0, "B": 1})
    cal = calibration.summarise(counts)
    assert cal["segments"] == 3 and cal["exactly_right"] == 1
    top = cal["bins"][9]
    assert top["segments"] == 2 and top["observed"] == 0.5
    assert top["mean_predicted"] == pytest.approx(0.935)
    assert cal["ece"] == pytest.approx((2 * abs(0.5 - 0.935) + abs(0 - 0.1)) / 3)
    paths = calibration.write(cal, str(tmp_path / "ev"))
    assert all((tmp_path / p).exists() for p in paths)
