"""crf.duration_step_sd: a Gaussian random-walk prior on the learned duration scores.

Oracles: the squared steps summed in float64 by plain loops over the layout's duration
mask (which lengths a kind may last), and the prior's gradient written out by hand,
2 (b[d] - b[d-1]) - 2 (b[d+1] - b[d]); the loss with the prior against the loss without
it on the same batch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from semiseg.errors import SemisegError


def _frame_head(K=24):
    from test_run_tails import _scheme

    from semiseg.genemodel.frames import FrameLayout
    from semiseg.genemodel.head import FrameHead

    lay = FrameLayout.from_scheme(_scheme(6), tails=True)
    return lay, FrameHead(lay, max_duration=K).double()


def test_the_frame_heads_roughness_counts_the_lengths_each_kind_may_last():
    K = 24
    lay, head = _frame_head(K)
    torch.manual_seed(3)
    with torch.no_grad():
        head.duration.normal_(0, 1.5)
    dm = lay.duration_mask(K)  # (K, labels): 0 where a label may last d, -inf elsewhere
    _, pkind = lay.param_kinds()
    b = head.duration.detach().numpy()
    want = 0.0
    for k in range(b.shape[1]):
        cols = [c for c in range(len(pkind)) if pkind[c] == k]
        for d in range(K - 1):
            if (any(np.isfinite(dm[d, c]) for c in cols)
                    and any(np.isfinite(dm[d + 1, c]) for c in cols)):
                want += (b[d + 1, k] - b[d, k]) ** 2
    got = head.duration_roughness().detach()
    assert float(got) == pytest.approx(want, rel=1e-12)
    # lengths a kind cannot last count nothing: the intron's floor (min_intron 6 here)
    # and every length of a run tail's kind but its one
    intron = lay.names.index("intron+_0")
    short = [d for d in range(K) if not np.isfinite(dm[d, intron])]
    tail = lay.names.index("intron+_0~")
    assert short and sum(np.isfinite(dm[:, tail])) == 1, "the test wants both cases"
    with torch.no_grad():
        before = float(head.duration_roughness().detach())
        head.duration[short, pkind[intron]] += 50.0
        head.duration[:, pkind[tail]] = torch.randn(K, dtype=torch.float64) * 9
    assert float(head.duration_roughness().detach()) == pytest.approx(before, rel=1e-12)
    with torch.no_grad():
        head.duration.fill_(0.7)  # a constant table is smooth
    assert float(head.duration_roughness().detach()) == 0.0


def _generic_setup(tmp_path, sd):
    from synth import tiny_training

    return tiny_training(tmp_path, crf={"max_duration": 8, "duration_step_sd": sd})


def test_the_batch_loss_holds_the_prior_and_its_gradient(tmp_path):
    from semiseg.train.loop import BatchLoss
    from semiseg.train.priors import duration_prior_weight

    c, model, ds = _generic_setup(tmp_path, 0.25)
    w = duration_prior_weight(c, ds.windows)
    steps = sum((x.end - x.start) // 10 for x in ds.windows)  # resolution 10, bin 1
    assert w == pytest.approx(1 / (2 * 0.25 ** 2 * steps))
    torch.manual_seed(1)
    bias = model.crf.duration.bias
    with torch.no_grad():
        bias.normal_(0, 2.0)
    x, lengths, y = ds.batch([0, 1])
    grads, losses = [], []
    for prior in (0.0, w):
        model.zero_grad()
        loss, _, _ = BatchLoss(model, torch.device("cpu"), False, prior)(x, lengths, y, 0.5)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append(bias.grad.double().numpy().copy())
    b = bias.detach().double().numpy()
    step = np.diff(b, axis=0)
    assert losses[1] - losses[0] == pytest.approx(w * (step ** 2).sum(), rel=1e-4)
    g = np.zeros_like(b)
    g[1:] += 2 * step
    g[:-1] -= 2 * step
    np.testing.assert_allclose(grads[1] - grads[0], w * g, rtol=1e-4, atol=1e-9)


def test_the_prior_is_off_by_default_and_checked(tmp_path):
    from semiseg.config.load import load_config
    from semiseg.train.priors import duration_prior_weight

    c, _, ds = _generic_setup(tmp_path, 0.0)
    assert duration_prior_weight(c, ds.windows) == 0.0
    base = yaml.safe_load((tmp_path / "cfg.yaml").read_text())
    for crf, msg in (({"duration_step_sd": -1.0}, "must not be negative"),
                     ({"duration_step_sd": 0.3, "duration": "geometric"}, "learned"),
                     ({"duration_step_sd": 0.3, "head": "argmax"}, "argmax")):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**base, "crf": crf}))
        with pytest.raises(SemisegError, match=msg):
            load_config(tmp_path / "bad.yaml")
