"""ORF-length scores (semiseg/genemodel/orflength.py) against string scans of the sequence."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from seqs import codes_of, layout, rc

from semiseg.genemodel.frames import FrameLayout
from semiseg.genemodel.orflength import (
    LOG_MAX,
    LOG_MIN,
    N_KNOTS,
    N_UPSTREAM,
    OrfLengthScores,
    UpstreamStartScores,
    hat_basis,
    orf_lengths,
    upstream_starts,
)

STOPS = ("TAA", "TAG", "TGA")


def scan(seq: str) -> dict[str, np.ndarray]:
    """The lengths by walking codon by codon along each strand's transcript direction."""
    T = len(seq)
    out = {k: np.zeros(T) for k in ("start+", "stop+", "start-", "stop-")}
    for u in range(T - 2):
        if seq[u:u + 3] == "ATG":  # walk right to the first in-frame stop
            v = u + 3
            while v + 3 <= T and seq[v:v + 3] not in STOPS:
                v += 3
            out["start+"][u] = (v + 3 - u) if v + 3 <= T else T - u
        if seq[u:u + 3] in STOPS:  # walk left to the previous in-frame stop
            v = u - 3
            while v >= 0 and seq[v:v + 3] not in STOPS:
                v -= 3
            out["stop+"][u] = u - v if v >= 0 else u + 3
    r = rc(seq)  # the minus strand, read in its own direction
    for i in range(T - 2):  # i on r is the base T-1-i on seq: the anchor
        if r[i:i + 3] == "ATG":
            v = i + 3
            while v + 3 <= T and r[v:v + 3] not in STOPS:
                v += 3
            out["start-"][T - 1 - i] = (v + 3 - i) if v + 3 <= T else T - i
        if r[i:i + 3] in STOPS:
            v = i - 3
            while v >= 0 and r[v:v + 3] not in STOPS:
                v -= 3
            out["stop-"][T - 1 - i] = i - v if v >= 0 else i + 3
    return out


def draw_seq(seed: int, n: int, piece) -> str:
    """n bases of pieces drawn by piece(rng) until there are enough."""
    r = random.Random(seed)
    parts = []
    while sum(map(len, parts)) < n:
        parts.append(piece(r))
    return "".join(parts)[:n]


def random_seq(seed: int, n: int) -> str:
    return draw_seq(seed, n, lambda r: r.choice(
        ["ATG", "CAT", "TAA", "TGA", "TTA", "CTA", "N"]
        + ["".join(r.choice("ACGT") for _ in range(4))] * 3))


@pytest.mark.parametrize("seed", range(4))
def test_lengths_match_a_codon_walk_on_both_strands(seed):
    seq = random_seq(seed, 200 + 37 * seed)
    got = orf_lengths(codes_of(seq))
    want = scan(seq)
    for k in want:
        np.testing.assert_array_equal(got[k][0].numpy(), want[k], err_msg=k)


def test_lengths_stop_at_the_sequence_length_given():
    seq = random_seq(9, 120)
    padded = codes_of(seq + "ACGTACGTAAACC")
    got = orf_lengths(padded, torch.tensor([len(seq)]))
    want = scan(seq)
    for k in want:
        np.testing.assert_array_equal(got[k][0, :len(seq)].numpy(), want[k], err_msg=k)


def test_hat_basis_interpolates_in_log_length():
    lengths = torch.tensor([1.0, 3.0, 50.0, 300.0, 29999.0, 1e6])
    w = hat_basis(lengths)
    assert torch.allclose(w.sum(-1), torch.ones(6))
    pos = (torch.arange(N_KNOTS, dtype=torch.float32) * w).sum(-1)
    x = ((lengths.log() - LOG_MIN) / (LOG_MAX - LOG_MIN) * (N_KNOTS - 1)).clamp(0, N_KNOTS - 1)
    assert torch.allclose(pos, x, atol=1e-5)
    assert ((w > 0).sum(-1) <= 2).all()
    # bit for bit the two-mask form it replaces, at many lengths and both clamps
    v = torch.cat([torch.rand(2000, generator=torch.Generator().manual_seed(1)) * 40000,
                   torch.tensor([0.0, 1.0, 3.0, 30000.0, 5e5])])
    x = ((v.clamp(min=1.0).log() - LOG_MIN) / (LOG_MAX - LOG_MIN) * (N_KNOTS - 1))
    x = x.clamp(0, N_KNOTS - 1)
    lo = x.floor().clamp(max=N_KNOTS - 2)
    knots = torch.arange(N_KNOTS, dtype=torch.float32)
    want = ((knots == lo[:, None]) * (1 - (x - lo))[:, None]
            + (knots == lo[:, None] + 1) * (x - lo)[:, None])
    assert torch.equal(hat_basis(v), want)


def test_scores_are_the_knot_curve_at_each_anchor():
    lay = layout()
    m = OrfLengthScores(lay)
    with torch.no_grad():
        m.knots.copy_(torch.randn(2, N_KNOTS))
    seq = random_seq(3, 240)
    got = m(codes_of(seq))[0].detach().numpy()
    want = scan(seq)
    kinds = [lay.kind_names[k] for k in lay.kind]
    grid = np.linspace(LOG_MIN, LOG_MAX, N_KNOTS)
    for c, kind in enumerate(kinds):
        if kind not in want:
            assert not got[:, c].any()
            continue
        curve = m.knots[0 if kind.startswith("start") else 1].detach().numpy()
        expect = np.array([np.interp(math.log(v), grid, curve) if v > 0 else 0.0
                           for v in want[kind]])
        np.testing.assert_allclose(got[:, c], expect, atol=1e-5, err_msg=kind)


def test_reverse_complement_swaps_the_strands():
    seq = random_seq(5, 180)
    fwd = orf_lengths(codes_of(seq))
    back = orf_lengths(codes_of(rc(seq)))
    for a, b in (("start+", "start-"), ("stop+", "stop-")):
        np.testing.assert_array_equal(back[b][0].numpy()[::-1], fwd[a][0].numpy())


# ------------------------------------------------- start codons upstream in the same ORF
def scan_upstream(seq: str) -> dict[str, np.ndarray]:
    """Walk upstream codon by codon from each start codon (in its transcript's direction)
    counting start codons until an in-frame stop or the sequence's edge; -1 elsewhere."""
    T = len(seq)
    out = {}
    for key, s in (("start+", seq), ("start-", rc(seq))):
        a = np.full(T, -1)
        for i in range(T - 2):
            if s[i:i + 3] != "ATG":
                continue
            n, v = 0, i - 3
            while v >= 0 and s[v:v + 3] not in STOPS:
                n += s[v:v + 3] == "ATG"
                v -= 3
            a[i if key == "start+" else T - 1 - i] = n  # the anchor on the given strand
        out[key] = a
    return out


def nested_starts_seq(seed: int, n: int) -> str:
    """Random sequence rich in in-frame ATG runs (ATGATG..., CATCAT...) and stops."""
    return draw_seq(seed, n, lambda r: r.choice(
        ["ATG" * r.randint(1, 4), "CAT" * r.randint(1, 4), "TAA", "TGA", "TTA", "TCA", "N",
         "AAA", "GCG", "A", "CC"]))


@pytest.mark.parametrize("seed", range(4))
def test_upstream_starts_match_a_codon_walk_on_both_strands(seed):
    seq = nested_starts_seq(seed, 300 + 41 * seed)
    got = upstream_starts(codes_of(seq))
    want = scan_upstream(seq)
    assert max(want["start+"].max(), want["start-"].max()) >= 3  # the 3+ bin is reached
    for k in want:
        np.testing.assert_array_equal(got[k][0].numpy(), want[k], err_msg=k)


def test_upstream_starts_stop_at_the_sequence_length_given():
    seq = nested_starts_seq(11, 150)
    got = upstream_starts(codes_of(seq + "ATGATGTAAATG"), torch.tensor([len(seq)]))
    want = scan_upstream(seq)
    for k in want:
        np.testing.assert_array_equal(got[k][0, :len(seq)].numpy(), want[k], err_msg=k)
        assert (got[k][0, len(seq):] == -1).all()


def test_upstream_starts_swap_under_reverse_complement():
    seq = nested_starts_seq(7, 200)
    fwd, back = upstream_starts(codes_of(seq)), upstream_starts(codes_of(rc(seq)))
    np.testing.assert_array_equal(back["start-"][0].numpy()[::-1], fwd["start+"][0].numpy())


def test_upstream_scores_are_the_weight_of_the_count_at_each_start_anchor():
    lay = layout()
    m = UpstreamStartScores(lay)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([1.5, -0.25, -2.0, -4.0]))
    assert len(m.weight) == N_UPSTREAM
    seq = nested_starts_seq(4, 260)
    got = m(codes_of(seq))[0].detach().numpy()
    want = scan_upstream(seq)
    w = [1.5, -0.25, -2.0, -4.0]
    kinds = [lay.kind_names[k] for k in lay.kind]
    for c, kind in enumerate(kinds):
        if kind not in want:
            assert not got[:, c].any(), kind
            continue
        expect = np.array([w[min(n, 3)] if n >= 0 else 0.0 for n in want[kind]])
        np.testing.assert_allclose(got[:, c], expect, err_msg=kind)


# ------------------------------------------------- in the gene model, against enumeration
def _no_splice_seq(seed: int, n: int) -> str:
    """A sequence with start and stop codons on both strands and no GT, AG, CT or AC
    (no splice site on either strand: every gene is one exon)."""
    r = random.Random(seed)
    while True:
        s = "".join(r.choice(["ATG", "CAT", "TAA", "TGA", "TTA", "TCA", "A", "T", "G", "C"])
                    for _ in range(n))[:n]
        if not any(d in s for d in ("GT", "AG", "CT", "AC")) and "ATG" in s and "CAT" in s:
            return s


@pytest.mark.parametrize("seed", [0, 1])
def test_a_start_codon_scores_the_length_of_its_own_gene(seed):
    """log Z of the gene model with ORF-length scores equals a brute-force sum over every
    allowed segmentation in which each start codon adds the knot curve at the length of
    the gene it opens, read off the segmentation itself (to the end of its stop codon, or
    to the sequence's edge for a gene that runs off it), and each stop codon the curve
    at the longest ORF it can close (walked on the string)."""
    import sys

    sys.path.insert(0, "tests")
    from test_frames import allowed_segmentations, scheme

    from semiseg.genemodel.frames import base_codes
    from semiseg.genemodel.head import FrameHead

    seq = _no_splice_seq(seed, 13)
    lay = FrameLayout.from_scheme(scheme())
    K = 6
    head = FrameHead(lay, max_duration=K, start_end=False, orf_length_scores=True).double()
    torch.manual_seed(seed)
    with torch.no_grad():
        head.transition.normal_()
        head.duration.normal_()
        head.orf_length.knots.copy_(torch.randn(2, N_KNOTS, dtype=torch.float64) * 2)
    R = torch.randn(1, len(seq), len(lay.channels), dtype=torch.float64)
    onehot = torch.zeros(1, len(seq), 4, dtype=torch.float64)
    onehot[0, torch.arange(len(seq)), torch.as_tensor(base_codes(seq)).long()] = 1
    got = head.log_partition(torch.cat([R, onehot], -1), backend="torch")

    grid = np.linspace(LOG_MIN, LOG_MAX, N_KNOTS)
    knots = head.orf_length.knots.detach().numpy()
    walk = scan(seq)
    emi = lay.expand_index()
    tr = head.transition.detach()[lay.kind][:, lay.kind].numpy() + lay.transition_mask()
    du = head.duration.detach()[:, lay.kind].numpy() + lay.duration_mask(K)
    T = len(seq)
    scores = []
    segmentations = allowed_segmentations(lay, seq, K)
    for segs in segmentations:
        kinds = [lay.kind_names[lay.kind[c]] for c, _, _ in segs]
        score, prev = 0.0, None
        for i, (c, a, b) in enumerate(segs):
            score += sum(float(R[0, u, emi[u % 3, c]]) for u in range(a, b)) + du[b - a - 1, c]
            if prev is not None:
                score += tr[(b - a - 1) % 3, prev, c]
            prev = c
            if kinds[i] == "start+":  # its gene ends at the next stop+ segment, or runs off
                end = next((bb for k, (_, _, bb) in zip(kinds[i:], segs[i:]) if k == "stop+"), T)
                score += np.interp(math.log(end - a), grid, knots[0])
            elif kinds[i] == "start-":  # its gene begins at the last stop- before it
                left = next((aa for k, (_, aa, _) in zip(kinds[i::-1], segs[i::-1])
                             if k == "stop-"), 0)
                score += np.interp(math.log(b - left), grid, knots[0])
            elif kinds[i] in ("stop+", "stop-"):
                anchor = a if kinds[i] == "stop+" else b - 1
                score += np.interp(math.log(walk[kinds[i]][anchor]), grid, knots[1])
        scores.append(score)
    assert any("start+" in {lay.kind_names[lay.kind[c]] for c, _, _ in s} for s in segmentations)
    want = float(np.logaddexp.reduce(scores))
    assert float(got[0]) == pytest.approx(want, abs=1e-5)  # the head scores in float32


def test_orf_length_scores_need_the_gene_model():
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError

    cfg = load_config("configs/demo.yaml", ["crf.orf_length_scores=true", "crf.head=argmax",
                                            "crf.site_scores=false", "crf.content_scores=false"])
    with pytest.raises(SemisegError, match="orf_length_scores"):
        build_model(cfg, 4, 5)
