"""Evaluation metrics on hand-made examples whose answers are worked out by hand."""

from __future__ import annotations

import json
import math

import pytest

from semiseg.errors import SemisegError
from semiseg.evaluate.run import evaluate, write_report


def _bed(path, rows):
    path.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def pair(tmp_path):
    truth = _bed(tmp_path / "t.bed", [("c1", 0, 100, "A"), ("c1", 100, 200, "B"),
                                      ("c1", 200, 300, "A"), ("c2", 0, 50, "B")])
    pred = _bed(tmp_path / "p.bed", [("c1", 0, 105, "A"), ("c1", 105, 190, "B"),
                                     ("c1", 190, 300, "A"), ("c2", 0, 50, "A")])
    return pred, truth


def test_hand_computed(pair):
    res = evaluate(*pair, tolerance=5)
    rows = {r["label"]: r for r in res["labels"]}
    a, b = rows["A"], rows["B"]
    # base level: truth A = 200 bp, pred A = 265 bp, overlap 200
    assert (a["bp_truth"], a["bp_pred"]) == (200, 265)
    assert a["precision"] == pytest.approx(200 / 265)
    assert a["recall"] == 1.0
    assert a["f1"] == pytest.approx(2 * 200 / (200 + 265))
    # MCC of A vs rest: tp 200, fp 65, fn 0, tn 85
    mcc = (200 * 85 - 65 * 0) / math.sqrt(265 * 200 * 150 * 85)
    assert a["mcc"] == pytest.approx(mcc)
    assert b["mcc"] == pytest.approx(mcc)  # two labels: symmetric
    # segments: no exact match; A 2 of 3 predicted / 2 of 2 true overlap >= 50%
    assert a["segment_f1_exact"] == 0.0
    assert a["segment_f1_overlap50"] == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))
    # boundaries of A on c1: pred {105, 190}, truth {100, 200}; within 5 bp: 105~100 only
    assert a["boundary_f1"] == pytest.approx(0.5)
    assert res["accuracy"] == pytest.approx(285 / 350)


def test_tolerance_widens_boundary_matches(pair):
    res = evaluate(*pair, tolerance=10)
    rows = {r["label"]: r for r in res["labels"]}
    assert rows["A"]["boundary_f1"] == 1.0
    # but a boundary matches at most one other one
    assert rows["B"]["boundary_precision"] <= 1.0


def test_perfect_prediction(tmp_path):
    rows = [("c1", 0, 10, "x"), ("c1", 10, 40, "y"), ("c1", 40, 41, "x")]
    p = _bed(tmp_path / "p.bed", rows)
    t = _bed(tmp_path / "t.bed", rows)
    res = evaluate(p, t, tolerance=0)
    for r in res["labels"]:
        for k in ("precision", "recall", "f1", "mcc", "segment_f1_exact",
                  "segment_f1_overlap50", "boundary_f1"):
            assert r[k] == 1.0, (r["label"], k)


def test_gaps_are_skipped_and_uncovered_truth_is_background(tmp_path):
    p = _bed(tmp_path / "p.bed", [("c1", 0, 50, "A"), ("c1", 50, 60, "gap"),
                                  ("c1", 60, 100, "bg")])
    t = _bed(tmp_path / "t.bed", [("c1", 0, 40, "A")])
    res = evaluate(p, t, background="bg")
    assert res["bp_evaluated"] == 90
    rows = {r["label"]: r for r in res["labels"]}
    assert rows["A"]["bp_truth"] == 40 and rows["A"]["bp_pred"] == 50
    assert rows["bg"]["bp_truth"] == 50


def test_gff_truth_with_a_scheme_and_extra_chromosomes(tmp_path):
    from semiseg.genome import load_scheme

    gff = tmp_path / "t.gff3"
    gff.write_text(
        "##gff-version 3\n"
        "c1\tx\tgene\t11\t40\t.\t+\t.\tID=g1\n"
        "c1\tx\tCDS\t11\t40\t.\t+\t0\tParent=g1\n"
        "c9\tx\tgene\t1\t500\t.\t-\t.\tID=g2\n"
        "c9\tx\tCDS\t1\t500\t.\t-\t0\tParent=g2\n")
    p = _bed(tmp_path / "p.bed", [("c1", 0, 10, "intergenic"), ("c1", 10, 40, "CDS+"),
                                  ("c1", 40, 100, "intergenic")])
    res = evaluate(p, str(gff), scheme=load_scheme("gene_structure"), tolerance=0)
    rows = {r["label"]: r for r in res["labels"]}
    assert rows["CDS+"]["f1"] == 1.0 and rows["intergenic"]["f1"] == 1.0
    assert list(res["chromosomes"]) == ["c1"]


def test_reports(tmp_path, pair):
    res = evaluate(*pair)
    files = write_report(res, str(tmp_path / "out" / "ev"))
    tsv = (tmp_path / "out" / "ev.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[:3] == ["label", "bp_truth", "bp_pred"]
    assert [ln.split("\t")[0] for ln in tsv[1:]] == ["A", "B", "macro"]
    data = json.loads((tmp_path / "out" / "ev.json").read_text())
    assert data["labels"][0]["label"] == "A"
    assert len(files) == 2


def test_bad_inputs(tmp_path, pair):
    with pytest.raises(SemisegError, match="file not found"):
        evaluate(str(tmp_path / "nope.bed"), pair[1])
    bad = tmp_path / "bad.bed"
    bad.write_text("c1\t10\t5\tA\n")
    with pytest.raises(SemisegError, match=r"bad.bed:1: invalid interval"):
        evaluate(str(bad), pair[1])
    other = _bed(tmp_path / "o.bed", [("zz", 0, 10, "A")])
    with pytest.raises(SemisegError, match="no truth intervals on the predicted"):
        evaluate(other, pair[1])


def test_segment_counts_on_arrays_match_the_file_evaluation(pair):
    """The helpers training uses for validation give evaluate()'s segment/boundary F1."""
    import numpy as np

    from semiseg.metrics import add_segment_counts, new_segment_counts, segment_f1

    res = evaluate(*pair, tolerance=5)
    truth = np.array([0] * 100 + [1] * 100 + [0] * 100)
    pred = np.array([0] * 105 + [1] * 85 + [0] * 110)
    seg = new_segment_counts(2)
    add_segment_counts(seg, truth, pred, tolerance=5)
    add_segment_counts(seg, np.array([1] * 50), np.array([0] * 50), tolerance=5)
    ov, bf = segment_f1(seg)
    rows = {r["label"]: r for r in res["labels"]}
    assert ov[0] == pytest.approx(rows["A"]["segment_f1_overlap50"])
    assert ov[1] == pytest.approx(rows["B"]["segment_f1_overlap50"])
    assert bf[0] == pytest.approx(rows["A"]["boundary_f1"])
    assert bf[1] == pytest.approx(rows["B"]["boundary_f1"])
