"""crf.tie_noncoding: the gene head's intron labels score as the background label plus a
learned constant per strand, whatever the encoder's own intron channels say."""

from __future__ import annotations

import torch
from seqs import layout, onehot

from semiseg.genemodel.head import FrameHead

LAY = layout()


def emissions(seq: str, gen) -> torch.Tensor:
    ch = torch.randn(1, len(seq), len(LAY.channels), generator=gen)
    return torch.cat([ch, torch.as_tensor(onehot(seq))[None]], -1)


def test_intron_scores_ignore_the_encoders_intron_channels():
    gen = torch.Generator().manual_seed(0)
    head = FrameHead(LAY, 16, tie_noncoding=True)
    with torch.no_grad():
        head.noncoding_bias.copy_(torch.tensor([0.7, -1.3]))
    seq = "ATGGTAAGTCCCTTTAGGCCATGA" * 3
    em = emissions(seq, gen)
    em2 = em.clone()
    for st in "+-":  # scramble the encoder's intron channels: nothing may change
        em2[..., LAY.channels.index(f"intron{st}")] = torch.randn(1, len(seq), generator=gen)
    t1, t2 = head._terms(em, None), head._terms(em2, None)
    assert torch.equal(t1["scores"], t2["scores"])
    # an intron label's score is the intergenic channel plus its strand's constant
    bg = em[0, :, LAY.channels.index("intergenic")]
    for i, name in enumerate(LAY.names):
        if name.startswith("intron"):
            bias = 0.7 if name.startswith("intron+") else -1.3
            torch.testing.assert_close(t1["scores"][0, :, i], bg + bias)


def test_untied_head_reads_its_intron_channels():
    gen = torch.Generator().manual_seed(1)
    head = FrameHead(LAY, 16)
    seq = "ACGT" * 10
    em = emissions(seq, gen)
    em2 = em.clone()
    em2[..., LAY.channels.index("intron+")] += 1.0
    assert not torch.equal(head._terms(em, None)["scores"], head._terms(em2, None)["scores"])


def test_intron_rate_adds_to_each_intron_inside_base_only():
    gen = torch.Generator().manual_seed(2)
    head = FrameHead(LAY, 16)
    seq = "ATGGTAAGTCCCTTTAGG" * 2
    em = emissions(seq, gen)
    before = head._terms(em, None)["scores"]
    head.intron_rate = 0.25
    after = head._terms(em, None)["scores"]
    for i, name in enumerate(LAY.names):
        want = 0.25 if name.split("_")[0] in ("intron+", "intron-") else 0.0
        torch.testing.assert_close(after[0, :, i] - before[0, :, i],
                                   torch.full((len(seq),), want))
