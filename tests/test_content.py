"""Coding-content scores (semiseg/genemodel/content.py) against counts and scans of strings."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from seqs import codes_of, layout, onehot, rc

from semiseg.genemodel.content import (
    ORDER,
    PSEUDO,
    WORDS,
    ContentScores,
    content_channels,
    count_content,
    count_intron_content,
)
from semiseg.genemodel.frames import INTRON_ANY


def word_id(word: str) -> int:
    v = 0
    for b in word:
        v = v * 4 + "ACGT".index(b)
    return v


def read_word(seq: str, t: int, strand: str) -> str | None:
    """The ORDER+1 bases ending at t in the strand's direction, None off the sequence or
    with an N."""
    if strand == "+":
        w = seq[t - ORDER:t + 1] if t >= ORDER else ""
    else:
        w = rc(seq[t:t + ORDER + 1]) if t + ORDER < len(seq) else ""
    return w if len(w) == ORDER + 1 and set(w) <= set("ACGT") else None


def strand_words(seq: str):
    """(position, strand, word id) of every word read_word finds, both strands."""
    for t in range(len(seq)):
        for s in "+-":
            w = read_word(seq, t, s)
            if w is not None:
                yield t, s, word_id(w)


def log_odds(num: np.ndarray, den: np.ndarray, w: int) -> float:
    """log P(base | context) under counts `num` minus under `den`, PSEUDO added: the
    table entry of word w, by hand."""
    ctx = w - w % 4
    p = (num[w] + PSEUDO) / (num[ctx:ctx + 4].sum() + 4 * PSEUDO)
    q = (den[w] + PSEUDO) / (den[ctx:ctx + 4].sum() + 4 * PSEUDO)
    return math.log(p) - math.log(q)


def test_table_matches_a_direct_count():
    rng = random.Random(2)
    lay = layout()
    kinds = [lay.kind_names[k] for k in lay.kind]
    cds = {s: [i for i, k in enumerate(kinds) if k == f"CDS{s}"] for s in "+-"}
    outside = [i for i, k in enumerate(kinds) if k.startswith("outside:")]
    seqs, golds = [], []
    coding = np.zeros((3, WORDS))
    background = np.zeros(WORDS)
    for _ in range(3):
        seq = "".join(rng.choice("ACGTTAAN" if rng.random() < 0.02 else "ACGT")
                      for _ in range(500))
        gold = np.full(len(seq), -1)
        gold[:150] = outside[0]
        for s, (a, b) in (("+", (150, 300)), ("-", (320, 480))):
            c = rng.choice(cds[s])  # one frame for the whole run, as in a gene
            gold[a:b] = c
        for t, s, w in strand_words(seq):
            c = gold[t]
            if c in outside:
                background[w] += 1
            if c in cds[s]:
                pos = (t - lay.frame[c]) % 3  # base of the left-to-right codon
                coding[pos if s == "+" else 2 - pos, w] += 1
        seqs.append(onehot(seq))
        golds.append(gold)
    table, n = count_content(seqs, golds, lay)
    assert n == {"coding": int(coding.sum()), "outside": int(background.sum())}
    for j in range(3):
        for w in np.flatnonzero(coding[j] + background)[:200]:
            assert table[j, w] == pytest.approx(log_odds(coding[j], background, w),
                                                abs=1e-5)


def test_intron_table_matches_a_direct_count():
    """crf.intron_content's table: a homogeneous chain of the intron insides (gold
    INTRON_ANY of each strand, read in that strand's direction) against the outside
    bases, counted by hand here."""
    rng = random.Random(5)
    lay = layout()
    kinds = [lay.kind_names[k] for k in lay.kind]
    outside = [i for i, k in enumerate(kinds) if k.startswith("outside:")]
    cds_plus = next(i for i, k in enumerate(kinds) if k == "CDS+")
    seqs, golds = [], []
    inside, background = np.zeros(WORDS), np.zeros(WORDS)
    for _ in range(3):
        seq = "".join(rng.choice("ACGTN" if rng.random() < 0.02 else "ACGT")
                      for _ in range(400))
        gold = np.full(len(seq), -1)
        gold[:100] = outside[0]
        gold[100:150] = cds_plus  # neither intron nor outside
        gold[150:260] = INTRON_ANY["+"]
        gold[270:390] = INTRON_ANY["-"]
        for t, s, w in strand_words(seq):
            if gold[t] in outside:
                background[w] += 1
            if gold[t] == INTRON_ANY[s]:
                inside[w] += 1
        seqs.append(onehot(seq))
        golds.append(gold)
    table, n = count_intron_content(seqs, golds, lay)
    assert n == {"intron": int(inside.sum()), "outside": int(background.sum())}
    assert n["intron"] > 400
    for w in np.flatnonzero(inside + background)[:300]:
        assert table[w] == pytest.approx(log_odds(inside, background, w), abs=1e-5)


def test_head_scores_intron_labels_with_the_intron_table():
    """With introns: every intron label of strand s at base t gets the intron table's
    value of the word read on s ending at t, times its own weight; CDS labels keep the
    coding table (times the coding weight); all else 0."""
    lay = layout()
    m = ContentScores(lay, introns=True)
    itab = np.random.default_rng(4).normal(size=WORDS).astype(np.float32)
    m.set(random_table(4).numpy(), itab)
    with torch.no_grad():
        m.weight.fill_(0.5)
        m.intron_weight.fill_(-1.3)
    r = random.Random(4)
    seq = "".join(r.choice("ACGT") for _ in range(30)) + "N" + "".join(
        r.choice("ACGT") for _ in range(20))
    got = m(codes_of(seq))[0].detach().numpy()
    kinds = [lay.kind_names[k] for k in lay.kind]
    assert any(k.startswith("intron") for k in kinds)
    for c, kind in enumerate(kinds):
        for t in range(len(seq)):
            s = kind[-1]
            w = read_word(seq, t, s)
            if kind in ("intron+", "intron-"):
                want = 0.0 if w is None else -1.3 * float(itab[word_id(w)])
            elif kind in ("CDS+", "CDS-"):
                pos = (t - lay.frame[c]) % 3
                j = pos if s == "+" else 2 - pos
                want = 0.0 if w is None else 0.5 * float(m.table[j, word_id(w)])
            else:
                want = 0.0
            assert got[t, c] == pytest.approx(want, abs=1e-5), (kind, t)


def test_no_coding_bases_give_a_zero_table():
    table, n = count_content([onehot("ACGT" * 10)], [np.full(40, -1)], layout())
    assert n["coding"] == 0 and not table.any()


def random_table(seed: int) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).normal(size=(3, WORDS))).float()


@pytest.mark.parametrize("seed", [0, 1])
def test_channels_match_string_scans_on_both_strands(seed):
    r = random.Random(seed)
    seq = "".join(r.choice("ACGT") for _ in range(60)) + "N" + "".join(
        r.choice("ACGT") for _ in range(30))
    table = random_table(seed)
    got = content_channels(codes_of(seq), table)
    for s in "+-":
        for t in range(len(seq)):
            w = read_word(seq, t, s)
            want = [0.0] * 3 if w is None else [float(table[j, word_id(w)]) for j in range(3)]
            np.testing.assert_allclose(got[s][0, t].numpy(), want, atol=1e-6)


def test_head_scores_each_cds_label_at_its_codon_position():
    """A CDS label of frame f at base t gets the table value of t's codon position in
    its gene's direction, times the weight; every other label 0."""
    lay = layout()
    m = ContentScores(lay)
    m.set(random_table(3).numpy())
    with torch.no_grad():
        m.weight.fill_(1.7)
    r = random.Random(3)
    seq = "".join(r.choice("ACGT") for _ in range(40))
    got = m(codes_of(seq))[0].detach().numpy()
    kinds = [lay.kind_names[k] for k in lay.kind]
    for c, kind in enumerate(kinds):
        for t in range(len(seq)):
            if kind in ("CDS+", "CDS-"):
                s = kind[-1]
                pos = (t - lay.frame[c]) % 3
                j = pos if s == "+" else 2 - pos
                w = read_word(seq, t, s)
                want = 0.0 if w is None else 1.7 * float(m.table[j, word_id(w)])
            else:
                want = 0.0
            assert got[t, c] == pytest.approx(want, abs=1e-5), (kind, t)


def test_reverse_complement_swaps_the_strands():
    r = random.Random(8)
    seq = "".join(r.choice("ACGT") for _ in range(80))
    table = random_table(8)
    fwd = content_channels(codes_of(seq), table)
    back = content_channels(codes_of(rc(seq)), table)
    np.testing.assert_allclose(back["-"][0].numpy()[::-1], fwd["+"][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(back["+"][0].numpy()[::-1], fwd["-"][0].numpy(), atol=1e-6)


def test_content_scores_need_the_gene_model():
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError

    cfg = load_config("configs/demo.yaml", ["crf.content_scores=true", "crf.head=argmax",
                                            "crf.site_scores=false", "crf.orf_length_scores=false"])
    with pytest.raises(SemisegError, match="content_scores"):
        build_model(cfg, 4, 5)
