"""Training windows around long introns (semiseg/genemodel/intronwindows.py,
windows.intron_windows): the windows against a painted-array oracle, the epoch's
batches against their definition, and a fly region that trains with them."""

import re
import types

import numpy as np
import pytest
import torch

from semiseg.genemodel.intronwindows import batch_count, batches, intron_windows


def _win(chrom, start, end):
    return (chrom, start, end)


def _oracle(transcripts, regions, size, L=20000):
    """Paint every long intron and its flanks on a per-chromosome array, read the runs,
    keep those wholly inside a region."""
    paint = {}
    for t in transcripts:
        for a, b in t.introns:
            if b - a > size // 2:
                arr = paint.setdefault(t.chrom, np.zeros(L + 2 * size, bool))
                arr[a - size // 4 + size:b + size // 4 + size] = True  # offset: no negatives
    out = []
    for chrom, arr in paint.items():
        edges = np.flatnonzero(np.diff(np.concatenate([[0], arr.astype(np.int8), [0]])))
        for s, e in zip(edges[::2] - size, edges[1::2] - size):
            if any(c == chrom and rs <= s and e <= re_ for c, rs, re_ in regions):
                out.append((chrom, int(s), int(e)))
    return sorted(out)


@pytest.mark.parametrize("seed", range(15))
def test_windows_equal_painted_runs(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.choice([1000, 2000, 4000]))
    ts = []
    for _ in range(int(rng.integers(1, 8))):
        chrom = str(rng.choice(["a", "b"]))
        pos, introns = int(rng.integers(0, 15000)), []
        for _ in range(int(rng.integers(0, 4))):
            a = pos + int(rng.integers(10, 300))
            b = a + int(rng.integers(50, 3 * size))
            introns.append((a, b))
            pos = b
        ts.append(types.SimpleNamespace(chrom=chrom, introns=np.array(introns or
                                                                      np.zeros((0, 2)))))
    regions = [("a", 0, 12000), ("a", 14000, 30000), ("b", 2000, 40000)]
    got = sorted(intron_windows(ts, regions, size, _win))
    assert got == _oracle([types.SimpleNamespace(chrom=t.chrom, introns=t.introns.astype(int)
                                                 .tolist()) for t in ts], regions, size,
                          L=60000)


@pytest.mark.parametrize("seed", range(10))
def test_batches(seed):
    rng = np.random.default_rng(seed)
    n, size, bs = int(rng.integers(1, 40)), 100, int(rng.integers(1, 6))
    lengths = [int(v) for v in rng.integers(10, 101, n)]
    long_ix = rng.choice(n, int(rng.integers(0, n + 1)), replace=False)
    for i in long_ix:
        lengths[i] = int(rng.integers(101, 500))
    order = rng.permutation(n).tolist()
    gen = torch.Generator().manual_seed(seed)
    plan = batches(order, lengths, size, bs, gen)
    assert sorted(i for b in plan for i in b) == list(range(n))  # each window once
    n_long = sum(v > size for v in lengths)  # whole batches of each kind
    want = -(-(n - n_long) // bs) + -(-n_long // bs)
    assert len(plan) == want == batch_count(lengths, size, bs)
    for b in plan:
        assert 1 <= len(b) <= bs
        kinds = {lengths[i] > size for i in b}
        assert len(kinds) == 1  # a batch is all tiles or all long windows
    short = [b for b in plan if lengths[b[0]] <= size]
    # tiles keep the order's sequence within and across their batches
    assert [i for b in sorted(short, key=lambda b: order.index(b[0])) for i in b] == \
        [i for i in order if lengths[i] <= size]
    longs = sorted((b for b in plan if lengths[b[0]] > size), key=lambda b: -lengths[b[0]])
    flat = [i for b in longs for i in b]
    assert [lengths[i] for i in flat] == sorted((lengths[i] for i in flat), reverse=True)
    if not len(long_ix):  # no long window: consecutive batches, the generator untouched
        assert plan == [order[i:i + bs] for i in range(0, n, bs)]
        assert torch.equal(gen.get_state(), torch.Generator().manual_seed(seed).get_state())


def test_fly_region_trains_with_intron_windows(tmp_path, monkeypatch):
    """18 kb of fly holding t186's 3,962 bp intron (over half of the 5 kb tiles): one
    intron window, inside the training part, trained on for an epoch, with
    train.calibrate_introns: the calibration keeps the scale in range and does not
    raise the held-out NLL (test_calibration_of_the_introns checks the steps)."""
    from test_real_annotations import _config, _write_region

    from semiseg import ui
    from semiseg.train.loop import train

    lines = []
    monkeypatch.setattr(ui, "log", lambda m: lines.append(str(m)))
    fa, gff = _write_region(tmp_path, 548_000, 566_000)
    cfg = _config(tmp_path, fa, gff, windows__intron_windows=True,
                  train__calibrate_introns=True)
    out = train(cfg, tmp_path / "run")
    assert out["epochs_run"] == 1
    line = next(m for m in lines if "intron window(s)" in m)
    n, bp = re.search(r"(\d+) intron window\(s\) \(([\d,]+) bp\)", line).groups()
    # t186's intron [550262, 554224) (2,262-6,224 in region coordinates) and 1,250 bp
    # of flank each side: one window of 6,462 bp (other introns of the region are short)
    assert int(n) >= 1 and int(bp.replace(",", "")) >= 6462
    from semiseg.checkpoint import load_checkpoint

    cal = load_checkpoint(out["best"]).data["calibration"]
    assert cal["nll_after"] <= cal["nll_before"] and 0.3 <= cal["encoder_scale"] <= 1.5


@pytest.mark.parametrize("scale", [0.9, 3.0])
def test_calibration_of_the_introns(monkeypatch, scale):
    """train.calibrate_introns in calibrate.after_training, the fits replaced by known
    results: the joint fit starts from the scale fitted alone; a joint fit in range is
    applied to the model before the symmetric step
    (whose constants equal those of a fresh model given the fitted ones); one that takes
    the scale out of [0.3, 1.5] is dropped for the scale alone, constants as trained."""
    import dataclasses

    from semiseg.checkpoint import build_model, load_checkpoint, resolve_model
    from semiseg.genemodel import calibrate
    from semiseg.genemodel.symmetry import symmetric_intron_bias

    ck = load_checkpoint(resolve_model("fly"))
    bare = dict(ck.data)
    bare.pop("calibration", None)  # the constants as trained
    from semiseg.checkpoint import Checkpoint

    model = build_model(Checkpoint("trained", bare))[0]
    trained = model.crf.noncoding_bias.tolist()
    want = [0.25, -0.5]
    fit = {"encoder_scale": scale, "nll_before": 1.0, "nll_after": 0.9, "windows": 1,
           "evaluations": 3, "params": {"crf.noncoding_bias": want}}
    alone = {"encoder_scale": 0.8, "nll_before": 1.0, "nll_after": 0.95, "windows": 1,
             "evaluations": 5}
    starts = []  # the head's scale when the joint fit starts

    def joint(model, *a, **k):
        starts.append(model.crf.encoder_scale)
        return dict(fit)

    monkeypatch.setattr(calibrate, "fit_head_terms", joint)
    monkeypatch.setattr(calibrate, "fit_encoder_scale", lambda *a, **k: dict(alone))
    cfg = dataclasses.replace(ck.config, train=dataclasses.replace(
        ck.config.train, calibrate=True, calibrate_introns=True, symmetric_introns=True))
    cal, lines = calibrate.after_training(model, cfg, object(), "cpu")
    # the joint fit starts from the scale fitted alone (L-BFGS from 1 stopped near 1 on
    # fly), and the head's own scale is left as trained
    assert starts == [0.8] and model.crf.encoder_scale == 1.0
    fresh = build_model(Checkpoint("trained", bare))[0]
    if scale <= 1.5:
        assert model.crf.noncoding_bias.tolist() == want  # applied before the next step
        with torch.no_grad():
            fresh.crf.noncoding_bias.copy_(torch.tensor(want))
        assert cal["encoder_scale"] == scale
    else:
        assert any("outside [0.3, 1.5]" in m for m in lines)
        assert model.crf.noncoding_bias.tolist() == trained
        assert cal["encoder_scale"] == 0.8
    assert cal["params"]["crf.noncoding_bias"] == symmetric_intron_bias(fresh.crf)


def test_calibration_of_the_orf_weight(monkeypatch):
    """train.calibrate_orf in calibrate.after_training, the fits replaced by known
    results: the ORF weight is fitted with the fitted encoder scale in place (the head's
    own left as trained), its weighted curves are applied to the model and recorded
    beside the symmetric step's intron constants (neither replaces the other)."""
    import dataclasses

    from semiseg.checkpoint import Checkpoint, build_model, load_checkpoint, resolve_model
    from semiseg.genemodel import calibrate

    ck = load_checkpoint(resolve_model("fly"))
    bare = dict(ck.data)
    bare.pop("calibration", None)
    model = build_model(Checkpoint("trained", bare))[0]
    k0 = model.crf.orf_length.knots.detach().clone()
    want = (k0 * 0.25).tolist()
    scales = []

    def orf(model, *a, **k):
        scales.append(model.crf.encoder_scale)
        return {"orf_weight": 0.25, "nll_before": 1.0, "nll_after": 0.9, "evaluations": 4,
                "params": {"crf.orf_length.knots": want}}

    monkeypatch.setattr(calibrate, "fit_orf_weight", orf)
    monkeypatch.setattr(calibrate, "fit_encoder_scale", lambda *a, **k: {
        "encoder_scale": 0.8, "nll_before": 1.0, "nll_after": 0.95, "windows": 1,
        "evaluations": 5})
    cfg = dataclasses.replace(ck.config, train=dataclasses.replace(
        ck.config.train, calibrate=True, calibrate_introns=False, symmetric_introns=True,
        calibrate_orf=True))
    cal, lines = calibrate.after_training(model, cfg, object(), "cpu")
    assert scales == [0.8] and model.crf.encoder_scale == 1.0
    assert cal["orf_weight"] == 0.25
    assert cal["params"]["crf.orf_length.knots"] == want
    assert "crf.noncoding_bias" in cal["params"]
    assert torch.allclose(model.crf.orf_length.knots, k0 * 0.25)
    assert any("ORF-length weight 0.25" in m for m in lines)
