"""The Segmenter on CUDA: bfloat16 autocast for the encoder, the semi-CRF in float32
(Triton backend), a few training steps on a task with a known answer, and decoding
that agrees with the float32 encoder. Needs only torch, triton and pyyaml."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.gpu
pytest.importorskip("yaml")


def _task(B, T, device, gen):
    """Features (B, T, 4): a run of 'high' positions marks label 1, else label 0."""
    labels = torch.zeros(B, T, dtype=torch.long)
    for b in range(B):
        pos = 0
        while pos < T:
            length = int(torch.randint(20, 120, (1,), generator=gen))
            if torch.rand(1, generator=gen) < 0.5:
                labels[b, pos:pos + length] = 1
            pos += length
    x = torch.randn(B, T, 4, generator=gen) * 0.5
    x[..., 0] += 2.0 * labels
    return x.to(device), labels.to(device)


def test_amp_training_and_decoding_on_cuda():
    from semiseg.config.load import from_dict
    from semiseg.model import Segmenter
    from semiseg.train.loop import _forward

    dev = torch.device("cuda")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    cfg = from_dict({"model": {"channels": 32, "layers": 3, "resolution": 1},
                     "crf": {"max_duration": 32}})
    model = Segmenter(4, 2, cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x, y = _task(8, 2000, dev, gen)
    lengths = torch.full((8,), 2000, device=dev)
    lengths[3] = 1500
    y[3, 1500:] = -1
    losses = []
    for _ in range(30):
        em, hid, steps = _forward(model, x, lengths, dev, amp=True)
        assert em.dtype == torch.float32 and hid.dtype == torch.float32
        nll = model.crf.nll(em, y, steps, hidden=hid)
        loss = (nll / steps).mean()
        assert torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    model.eval()
    with torch.no_grad():
        xt, yt = _task(4, 3000, dev, gen)
        lt = torch.full((4,), 3000, device=dev)
        em, hid, steps = _forward(model, xt, lt, dev, amp=True)
        seg = model.crf.decode(em, steps, hidden=hid)
        post, bnd = model.crf.marginals(em, steps, hidden=hid)
        em32, hid32, _ = _forward(model, xt, lt, dev, amp=False)
        seg32 = model.crf.decode(em32, steps, hidden=hid32)
    acc = (seg.labels == yt).float().mean().item()
    assert acc > 0.9
    assert (seg.labels == seg32.labels).float().mean().item() > 0.99
    torch.testing.assert_close(post.sum(-1), torch.ones_like(post.sum(-1)), atol=1e-4,
                               rtol=0)
