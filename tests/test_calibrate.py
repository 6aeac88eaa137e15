"""train.calibrate: the gene model's encoder scale (semiseg/genemodel/calibrate.py)
against scaled emissions and a grid search of the validation NLL."""

from __future__ import annotations

import os

import numpy as np
import torch
from seqs import ROOT
from test_frames import _gold, _intron_friendly, rc, tx

from semiseg.checkpoint import Checkpoint, build_model, load_checkpoint
from semiseg.genemodel.calibrate import fit_encoder_scale, fit_head_terms, validation_nll
from semiseg.genemodel.head import FrameHead

# + gene ATG AAG [intron] GGT TAA, then a - gene: gold codes with an intron
INTRON = "GT" + "CTTAC" * 5 + "CAG"
FLY_MODEL = os.path.join(ROOT, "semiseg", "models", "fly_gene_frames.pt")
PLUS = "ATGAA" + INTRON + "GGGTTAA"
MINUS = rc("ATGCCCAAATGA")
SEQ = "CCAC" + PLUS + "CACCT" + MINUS + "ACCA"


def _data(seed: int, gain: float):
    """Emissions (float32, as the head computes: random channels plus `gain` on each
    gold base's channel, then the one-hot) and gold codes of SEQ's two genes."""
    p0, m0 = 4, SEQ.index(MINUS)
    lay, codes, rep = _gold(SEQ, [tx("+", (p0, p0 + 5), (p0 + 5 + len(INTRON),
                                                          p0 + len(PLUS))),
                                  tx("-", (m0, m0 + len(MINUS)))])
    assert rep.kept == 2
    head = FrameHead(lay, max_duration=40, tie_noncoding=True)
    R, onehot, _ = _intron_friendly(lay, SEQ, seed)
    r = np.arange(len(SEQ)) % 3
    for t, c in enumerate(codes.tolist()):
        if c >= 0:
            R[0, t, int(head.em_idx[r[t], c])] += gain
    return head, torch.cat([R, onehot], -1).float(), torch.as_tensor(codes)[None]


def test_the_scale_multiplies_the_encoder_channels_only():
    """encoder_scale s: log Z and the NLL are those of the emissions with their encoder
    channels times s (introns tied to the background plus its bias, which is not
    scaled), the one-hot untouched."""
    head, em, y = _data(3, 1.0)
    with torch.no_grad():
        head.noncoding_bias.fill_(0.7)
    lengths = torch.tensor([em.shape[1]])
    n = head.n_channels
    for s in (0.5, 1.3):
        scaled = em.clone()
        scaled[..., :n] *= s
        want = head.log_partition(scaled, lengths, backend="torch")
        want_nll = head.nll(scaled, y, lengths, backend="torch")
        head.encoder_scale = s
        assert torch.allclose(head.log_partition(em, lengths, backend="torch"), want,
                              atol=1e-4)
        assert torch.allclose(head.nll(em, y, lengths, backend="torch"), want_nll,
                              atol=1e-4)
        head.encoder_scale = 1.0
    assert not torch.allclose(want, head.log_partition(em, lengths, backend="torch"))


class _Emits(torch.nn.Module):
    """A stand-in Segmenter whose encoder is the identity: the input is the emissions."""

    def __init__(self, head):
        super().__init__()
        self.crf = head

    def forward(self, x, lengths):
        return x, None, None


class _Windows:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def batch(self, idx):
        x = torch.cat([self.items[i][0] for i in idx])
        y = torch.cat([self.items[i][1] for i in idx])
        return x, torch.tensor([x.shape[1]] * len(idx)), y


def test_the_fit_is_the_minimum_of_the_validation_nll():
    """The fitted scale's NLL is the least of a grid over [0.3, 1.5] in steps of 0.005 (within the
    search's tolerance), at a minimum inside the range, and validation_nll is the NLL
    per base of the windows."""
    head, em0, y0 = _data(1, 1.5)
    _, em1, y1 = _data(2, 1.5)
    windows = _Windows([(em0, y0), (em1, y1)])
    model = _Emits(head)
    lengths = torch.tensor([em0.shape[1]])
    cached = [(torch.cat([em0, em1]), torch.tensor([em0.shape[1]] * 2), torch.cat([y0, y1]))]
    head.encoder_scale = 0.8
    with torch.no_grad():
        direct = (head.nll(em0, y0, lengths).sum() + head.nll(em1, y1, lengths).sum()) / (
            2 * em0.shape[1])
    head.encoder_scale = 1.0
    assert abs(validation_nll(head, cached, 0.8, "cpu") - float(direct)) < 1e-6
    grid = np.linspace(0.3, 1.5, 241)
    nll = [validation_nll(head, cached, float(s), "cpu") for s in grid]
    best = float(grid[int(np.argmin(nll))])
    assert 0.4 < best < 1.4, best  # the case has an inside minimum
    fit = fit_encoder_scale(model, windows, "cpu", batch_size=2)
    assert abs(fit["encoder_scale"] - best) < 0.01
    assert fit["nll_after"] <= min(nll) + 1e-6
    assert fit["nll_before"] == validation_nll(head, cached, 1.0, "cpu")
    assert fit["windows"] == 2 and head.encoder_scale == 1.0


def test_no_validation_windows_no_fit():
    head, _, _ = _data(1, 1.0)
    assert fit_encoder_scale(_Emits(head), _Windows([]), "cpu") is None
    assert fit_encoder_scale(torch.nn.Linear(2, 2), _Windows([1]), "cpu") is None


def _windows_and_cache():
    head, em0, y0 = _data(1, 1.5)
    _, em1, y1 = _data(2, 1.5)
    cached = [(torch.cat([em0, em1]), torch.tensor([em0.shape[1]] * 2), torch.cat([y0, y1]))]
    return head, _Windows([(em0, y0), (em1, y1)]), cached


def test_the_terms_fit_is_a_minimum_at_least_as_low_as_the_scale_alone():
    """train.calibrate "terms": the scale and the tied introns' constants fitted together
    reach an NLL no higher than the scale alone (a point of their search), every
    coordinate step of 0.02 from the fit lowers the NLL by no more than float32 noise
    (validation_nll, no autograd; at the same scale the trained constants score worse),
    and the head is left as trained."""
    head, windows, cached = _windows_and_cache()
    with torch.no_grad():
        head.noncoding_bias.copy_(torch.tensor([0.3, -0.2]))
    trained = head.noncoding_bias.detach().clone()
    model = _Emits(head)
    alone = fit_encoder_scale(model, windows, "cpu", batch_size=2)
    fit = fit_head_terms(model, windows, "cpu", batch_size=1)  # a backward per window
    assert fit["nll_before"] == validation_nll(head, cached, 1.0, "cpu")
    assert fit["nll_after"] <= alone["nll_after"] + 1e-7 < fit["nll_before"]
    assert head.encoder_scale == 1.0 and torch.equal(head.noncoding_bias, trained)
    bias = torch.tensor(fit["params"]["crf.noncoding_bias"])
    assert not torch.allclose(bias, trained)

    def nll(scale, b):
        with torch.no_grad():
            head.noncoding_bias.copy_(b)
        try:
            return validation_nll(head, cached, scale, "cpu")
        finally:
            with torch.no_grad():
                head.noncoding_bias.copy_(trained)

    s = fit["encoder_scale"]
    at = nll(s, bias)
    assert abs(at - fit["nll_after"]) < 1e-6
    noise = 1e-6
    for d in (-0.02, 0.02):
        assert nll(s * (1 + d), bias) > at - noise
        for i in range(2):
            step = bias.clone()
            step[i] += d
            assert nll(s, step) > at - noise
    assert nll(s, trained) > at + 5 * noise  # the constants' own part of the fit


def test_a_checkpoint_applies_its_refitted_terms():
    """Loading a checkpoint whose calibration holds refitted head parameters sets them
    (and the scale); the stored weights themselves are unchanged."""
    shipped = load_checkpoint(FLY_MODEL).data
    want = [0.25, -0.5]
    ck = dict(shipped, calibration={"encoder_scale": 0.9,
                                    "params": {"crf.noncoding_bias": want}})
    model, _ = build_model(Checkpoint("cal", ck))
    assert model.crf.encoder_scale == 0.9
    assert model.crf.noncoding_bias.tolist() == want
    plain, _ = build_model(Checkpoint("plain", shipped))
    assert plain.crf.noncoding_bias.tolist() != want


def test_the_orf_weight_is_the_minimum_of_the_validation_nll_over_0_1():
    """train.calibrate_orf: the fitted weight's NLL (the curves times w) is the least of a
    grid over [0, 1] in steps of 0.01 (within the search's tolerance), its params are
    the trained knots times w, and the head keeps its trained knots."""
    from semiseg.genemodel.calibrate import fit_orf_weight

    _, em0, y0 = _data(1, 1.5)
    _, em1, y1 = _data(2, 1.5)
    plain, _, _ = _data(1, 1.5)
    head = FrameHead(plain.layout, max_duration=40, tie_noncoding=True,
                     orf_length_scores=True)
    head.load_state_dict(plain.state_dict(), strict=False)
    with torch.no_grad():  # curves that mislead: a minimum inside [0, 1]
        head.orf_length.knots.copy_(torch.linspace(-3, 3, head.orf_length.knots.numel())
                                    .reshape(head.orf_length.knots.shape))
    k0 = head.orf_length.knots.detach().clone()
    cached = [(torch.cat([em0, em1]), torch.tensor([em0.shape[1]] * 2), torch.cat([y0, y1]))]
    grid = np.linspace(0, 1, 101)
    nll = []
    for w in grid:
        with torch.no_grad():
            head.orf_length.knots.copy_(k0 * float(w))
        nll.append(validation_nll(head, cached, 1.0, "cpu"))
    with torch.no_grad():
        head.orf_length.knots.copy_(k0)
    assert max(nll) - min(nll) > 1e-3 and int(np.argmin(nll)) < 90  # w matters here
    fit = fit_orf_weight(_Emits(head), _Windows([(em0, y0), (em1, y1)]), "cpu", batch_size=2)
    assert fit["nll_after"] <= min(nll) + 2e-4 * (max(nll) - min(nll)) + 1e-6
    assert fit["nll_before"] == nll[-1]
    want = (k0 * fit["orf_weight"]).tolist()
    assert np.allclose(fit["params"]["crf.orf_length.knots"], want)
    assert torch.equal(head.orf_length.knots, k0)
    assert fit_orf_weight(_Emits(plain), _Windows([(em0, y0)]), "cpu") is None
