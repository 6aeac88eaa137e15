"""The gold half of the gene model's loss by its one path (genemodel/goldpath.py):
the path's score against the contract's score written term by term (tests/bruteforce.py),
and FrameHead.nll with the paths against the clamped log-partition it replaces, on real
fly gene windows (values and every gradient)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bruteforce import path_score as oracle_score

from semiseg.genemodel import goldpath

pytest.importorskip("numba")


def test_path_score_is_the_contract_score():
    g = torch.Generator().manual_seed(11)
    B, T, K, C, P = 2, 23, 5, 4, 3
    leaves = dict(scores=torch.randn(B, T, C, generator=g, dtype=torch.float64),
                  transition=torch.randn(P, C, C, generator=g, dtype=torch.float64),
                  duration_bias=torch.randn(K, C, generator=g, dtype=torch.float64),
                  start=torch.randn(C, generator=g, dtype=torch.float64),
                  end=torch.randn(C, generator=g, dtype=torch.float64),
                  proj_start=torch.randn(B, T, C, generator=g, dtype=torch.float64),
                  proj_end=torch.randn(B, T, C, generator=g, dtype=torch.float64))
    for v in leaves.values():
        v.requires_grad_(True)
    rng = np.random.default_rng(2)
    for b, L in ((0, 23), (1, 17)):
        durs = []
        while sum(durs) < L:
            durs.append(int(min(rng.integers(1, K + 1), L - sum(durs))))
        st = np.cumsum([0] + durs[:-1]).astype(np.int64)
        lab = rng.integers(0, C, len(durs)).astype(np.int64)
        path = (st, np.array(durs, np.int64), lab)
        got = goldpath.path_score(leaves, b, path)
        want = oracle_score(b, list(zip(st.tolist(), durs, lab.tolist())), **leaves)
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
        names = list(leaves)
        for a, w in zip(torch.autograd.grad(got, [leaves[n] for n in names]),
                        torch.autograd.grad(want, [leaves[n] for n in names])):
            assert torch.allclose(a, w, rtol=1e-12, atol=1e-12)
    # static transitions, no start / end / projections
    two = dict(scores=leaves["scores"], transition=leaves["transition"][0],
               duration_bias=leaves["duration_bias"])
    path = (np.array([0, 3, 4]), np.array([3, 1, 5]), np.array([1, 1, 2]))
    assert torch.allclose(goldpath.path_score(two, 0, path),
                          oracle_score(0, [(0, 3, 1), (3, 1, 1), (4, 5, 2)], **two))


@pytest.fixture(scope="module")
def fly_windows():
    """The shipped fly model's head (run tails: one segmentation per gene structure), and
    four windows of 3,000 bp of the project's fly sequence: their one-hot bases and gold
    codes (FrameGold, as training makes them). The first two hold genes; the third
    starts inside an intron (three frames: three gold paths)."""
    from semiseg.checkpoint import build_model, load_checkpoint
    from semiseg.genemodel.frames import base_codes
    from semiseg.genemodel.gold import FrameGold
    from semiseg.genome import Fasta, read_annotation
    from semiseg.genome.gff import gff_transcripts, read_gff_rows

    ckpt = load_checkpoint("fly")
    model, _ = build_model(ckpt)
    head = model.crf
    fa = Fasta(["data/fly/chr2R_2M_6M.fa"])
    gff = "data/fly/chr2R_2M_6M.gff3"
    sizes = dict(fa.chrom_sizes)
    ann = read_annotation(gff, ckpt.scheme, sizes)
    rows, gtf = read_gff_rows(gff, sizes)
    gold = FrameGold(head.layout, ann, list(gff_transcripts(rows, gtf, ckpt.scheme)), fa)
    chrom, W = "chr2R_2M_6M", 3000
    starts = (100_000, 123_000, 399_000, 146_000)
    onehot = torch.zeros(len(starts), W, 4)
    y = torch.zeros(len(starts), W, dtype=torch.int64)
    for i, a in enumerate(starts):
        codes = torch.as_tensor(base_codes(fa.fetch(chrom, a, a + W))).long()
        ok = codes < 4
        onehot[i, torch.arange(W)[ok], codes[ok]] = 1
        y[i] = torch.as_tensor(gold.labels(chrom, a, a + W))
    return head, onehot, y


def _nll_and_grads(head, onehot, y, lengths, enabled, monkeypatch):
    monkeypatch.setattr(goldpath, "ENABLED", enabled)
    torch.manual_seed(0)
    R = (torch.randn(*y.shape, head.n_channels) * 2).requires_grad_(True)
    em = torch.cat([R, onehot], -1)
    head.zero_grad()
    nll = head.nll(em, y, lengths)
    nll.sum().backward()
    grads = {n: p.grad.clone() for n, p in head.named_parameters() if p.grad is not None}
    return nll.detach(), R.grad.clone(), grads


def test_nll_by_gold_paths_is_the_clamped_nll(fly_windows, monkeypatch):
    head, onehot, y = fly_windows
    y = y.clone()
    y[3, 1000:1400] = -1  # unknown bases: many gold paths, summed by the chain
    lengths = torch.tensor([3000, 2600, 3000, 3000])
    want, g_r, g_p = _nll_and_grads(head, onehot, y, lengths, False, monkeypatch)
    head._gold_cache = None
    for _ in range(2):  # the first call finds the paths, the second reads them
        got, h_r, h_p = _nll_and_grads(head, onehot, y, lengths, True, monkeypatch)
        assert torch.isfinite(want).all()
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-4)
        assert torch.allclose(h_r, g_r, rtol=1e-4, atol=1e-6)
        assert set(h_p) == set(g_p)
        for n in g_p:
            assert torch.allclose(h_p[n], g_p[n], rtol=1e-4, atol=1e-5), n
    paths = list(head._gold_cache.paths.values())  # (in the batch's order)
    assert len(paths) == 4
    assert [p is not None for p in paths] == [True, True, False, False]
    st, du, lab = paths[1]
    assert st[0] == 0 and st[-1] + du[-1] == 2600  # the path tiles the sequence
