"""A long sequence's head terms in chunks (annotate/long_terms.py) against the whole
sequence's, on real fly sequence with the shipped fly model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from semiseg.annotate import long_terms
from semiseg.annotate.long_terms import (
    PeriodicRows,
    chunk_context,
    chunked_terms,
    stop_positions,
)
from semiseg.genemodel.orflength import triplets

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fly():
    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    ck = load_checkpoint(resolve_model("fly"))
    with Fasta(str(ROOT / "data" / "fly" / "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, torch.device("cpu"), 100000, 5000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", 3_100_000, 3_130_000))
    return ann.model.crf, em


def _compare(head, em, got):
    with torch.no_grad():
        want = head._terms(em[None], torch.tensor([em.shape[0]]))
    assert set(got) == set(want)
    diff = {}
    for k, w in want.items():
        g = got[k]
        if isinstance(g, PeriodicRows):  # proj_start, kept as its rows (made whole here)
            g = g.materialize()[None]
        if not torch.is_tensor(w):
            assert g == w
            continue
        assert g.shape == w.shape and g.dtype == w.dtype, k
        if w.dtype == torch.bool:
            diff[k] = float((g != w).sum())
        else:
            both = torch.isfinite(w) & torch.isfinite(g)
            assert torch.equal(torch.isfinite(w), torch.isfinite(g)), k
            # float rounding of the site matrices' sums over different lengths: relative
            d = (g[both] - w[both]).abs() / (1.0 + w[both].abs())
            diff[k] = float(d.max()) if both.any() else 0.0
    return diff


def test_chunked_terms_equal_the_whole_sequence(fly):
    """30 kb of fly in chunks of 4,000 steps with a context of 128 (shorter than many
    of its ORFs, so the context must grow to their stop codons): every term as the
    whole sequence's (floats within 1e-5 relative, masks exactly)."""
    head, em = fly
    diff = _compare(head, em, chunked_terms(head, em, 4000, 128))
    assert all(v <= 1e-5 for v in diff.values()), sorted(diff.items())
    assert diff["allowed"] == 0
    assert diff["proj_start"] == 0  # its three rows, exactly the head's S rows


def test_periodic_rows_slices():
    p = torch.arange(6.0).view(3, 2)
    rows = PeriodicRows(p, 8)
    assert rows.shape == (8, 2) and len(rows) == 8
    assert torch.equal(rows[2:5], torch.tensor([[4.0, 5.0], [0.0, 1.0], [2.0, 3.0]]))
    assert torch.equal(rows.materialize(), p[torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])])
    assert rows[6:20].shape == (2, 2) and rows[5:5].shape == (0, 2)
    with pytest.raises(TypeError):
        rows[1]


def test_the_context_must_reach_the_orfs_ends(fly, monkeypatch):
    """The same chunks with a fixed context of 128 steps (no growth to the stop
    codons): the ORF-length scores differ, so the growth is what the first test shows."""
    head, em = fly

    def fixed(stops, a, b, S, context):
        lo = max(0, a - 128)
        return lo - lo % 3, min(S, b + 128)

    monkeypatch.setattr(long_terms, "chunk_context", fixed)
    diff = _compare(head, em, chunked_terms(head, em, 4000, 128))
    assert diff["scores"] > 1e-3


def test_stop_positions_and_context_against_a_scan():
    """stop_positions (of orflength.triplets) against a codon-by-codon scan of random
    sequence with Ns; the
    context returned holds a stop of every (strand, frame) on both sides."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, 3000)
    stops = stop_positions(triplets(torch.from_numpy(codes)[None])[0].numpy())
    plus, minus = {"TAA", "TAG", "TGA"}, {"TTA", "CTA", "TCA"}
    bases = "ACGTN"
    for i, (strand_set, f) in enumerate([(plus, f) for f in range(3)]
                                        + [(minus, f) for f in range(3)]):
        want = [p for p in range(len(codes) - 2) if p % 3 == f
                and "".join(bases[c] for c in codes[p:p + 3]) in strand_set]
        np.testing.assert_array_equal(stops[i], want)
    for a, b in ((900, 1200), (0, 500), (2500, 3000)):
        lo, hi = chunk_context(stops, a, b, len(codes), 10)
        assert lo % 3 == 0 and lo <= a and hi >= b
        for s in stops:
            assert lo == 0 or ((s >= lo) & (s <= a - 3)).any()
            assert hi == len(codes) or ((s >= b) & (s <= hi - 3)).any()


def test_gene_decode_with_chunked_terms_equals_whole_decode(fly, monkeypatch):
    """The certified gene decode of the 30 kb with its terms and marginals in chunks of
    5,000 steps (and the max-sum in windows side by side): the whole decode's labels,
    and the same marginals as the same decode with them computed whole (within 1e-5)."""
    from semiseg.annotate import posterior_seams
    from semiseg.annotate.seams import SeamStats

    head, em = fly
    with torch.no_grad():
        seg, _, _ = head.decode_with_marginals(em[None], torch.tensor([em.shape[0]]))
    # windows of 15,000 steps overlapping by 5,000: the posterior seams certify (at 6,000
    # and 1,000 they do not, and the posteriors go whole: docs/decoding.md)
    _, p_whole_terms, b_whole_terms = posterior_seams.gene_decode(head, em, 15000, 5000, 2)
    monkeypatch.setattr(posterior_seams, "TERMS_CHUNK", 5000)
    monkeypatch.setattr(posterior_seams, "TERMS_CONTEXT", 128)
    st = SeamStats()
    lab, p2, b2 = posterior_seams.gene_decode(head, em, 15000, 5000, 2, stats=st)
    np.testing.assert_array_equal(lab, seg.labels[0].numpy())
    assert float((p2 - p_whole_terms).abs().max()) < 1e-5
    assert float((b2 - b_whole_terms).abs().max()) < 1e-5
    assert st.side > 0
