"""Gene rules learned from the training annotation (semiseg/genemodel/learnedrules.py), on windows
built by hand so that the right answer is known by construction."""

from __future__ import annotations

import random

import numpy as np
from seqs import layout, onehot, rc

from semiseg.genemodel.learnedrules import (
    learn_donor_motif,
    learn_first_atg,
    learn_long_orfs,
    learn_masked_cds,
)
from semiseg.genome.scheme import load_scheme

LAY = layout()
KINDS = [LAY.kind_names[k] for k in LAY.kind]
SCHEME = load_scheme("gene_structure")


def code(kind: str, frame: int = 0) -> int:
    return [i for i, k in enumerate(KINDS) if k == kind][frame]


def rand(rng, n: int, alphabet: str = "ACGT") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def plain(rng, n: int) -> str:
    """Random C/G sequence: no start or stop codon of either strand in any frame."""
    return rand(rng, n, "CG")


def donor_windows(motifs: list[str], rng) -> tuple[list, list]:
    """One window per donor sequence (the intron's first bases), half of them on the
    minus strand; the donor label sits on the intron's first base."""
    xs, ys = [], []
    for i, m in enumerate(motifs):
        left, right = rand(rng, 30), rand(rng, 30)
        seq = left + m + right
        gold = np.full(len(seq), -1, np.int64)
        if i % 2 == 0:
            gold[len(left)] = code("donor+")
        else:  # the same donor read on the minus strand: its first base is the right end
            seq = rc(seq)
            gold[len(right) + len(m) - 1] = code("donor-")
        xs.append(onehot(seq))
        ys.append(gold)
    return xs, ys


def test_donor_motif_keeps_the_positions_every_donor_shares():
    rng = random.Random(0)
    motifs = ["GTA" + rng.choice("ACGT") + "G" + rng.choice("ACGT") for _ in range(40)]
    motif, ev = learn_donor_motif(*donor_windows(motifs, rng), LAY)
    assert motif == "GTANG", ev
    assert "40 of 40" in ev


def test_one_dissenting_donor_in_forty_drops_its_position():
    rng = random.Random(1)
    motifs = ["GTA" + rng.choice("ACGT") + "G" + rng.choice("ACGT") for _ in range(39)]
    motifs.append("GTCAGT")  # position 3 is no longer shared by 99% (39 / 40)
    motif, _ = learn_donor_motif(*donor_windows(motifs, rng), LAY)
    assert motif == "GTNNG"


def test_too_few_donors_or_nothing_shared_gives_no_motif():
    rng = random.Random(2)
    few, _ = learn_donor_motif(*donor_windows(["GTAAGT"] * 5, rng), LAY)
    assert few == ""
    varied = ["GT" + rand(rng, 4) for _ in range(200)]  # every base at every position
    none, ev = learn_donor_motif(*donor_windows(varied, rng), LAY)
    assert none == "" and "no base beyond GT" in ev


def gene_window(rng, first: bool) -> tuple[np.ndarray, np.ndarray]:
    """A plus-strand single-exon gene in intergenic sequence. first: its ATG is the
    first of its ORF (a stop codon in frame just upstream); else an in-frame ATG lies
    upstream with no stop between (firstatg would move the start)."""
    body = "ATG" + plain(rng, 3 * 30) + "TAA"
    up = plain(rng, 30)
    up = ("TAG" + up[3:]) if first else (up[:15] + "ATG" + up[18:])
    seq = up + body + plain(rng, 30)
    bg, cds = SCHEME.background, SCHEME.role_label("CDS", "+")
    lab_to_code = {bg: code("outside:intergenic")}
    gold = np.full(len(seq), lab_to_code[bg], np.int64)
    a, e = len(up), len(up) + len(body)
    gold[a:a + 3] = code("start+")
    gold[a + 3:e - 3] = code("CDS+")
    gold[e - 3:e] = code("stop+")
    assert SCHEME.background != cds
    return onehot(seq), gold


def test_first_atg_rule_follows_the_share_of_genes_at_their_first_atg():
    rng = random.Random(3)
    at_first = [gene_window(rng, True) for _ in range(19)] + [gene_window(rng, False)]
    on, ev = learn_first_atg(*zip(*at_first), LAY, SCHEME)
    assert on and "19 of 20" in ev, ev
    later = [gene_window(rng, True) for _ in range(10)] + [gene_window(rng, False)
                                                           for _ in range(10)]
    off, ev = learn_first_atg(*zip(*later), LAY, SCHEME)
    assert not off and "10 of 20" in ev, ev


def test_long_orfs_rule_is_off_where_long_orfs_are_not_whole_genes():
    rng = random.Random(4)
    genes = [gene_window(rng, True) for _ in range(12)]  # 32-codon ORFs, whole genes
    n, ev = learn_long_orfs(*zip(*genes), LAY, SCHEME)
    assert n == 0 and "no training ORFs" in ev  # shorter than the grid's 50 codons
    # 60-codon ORFs: as whole genes the rule turns on at 50; unlabelled (intergenic) off
    xs, ys = [], []
    for i in range(24):
        # no stop codon of either strand inside: the one ORF is the planted one
        body = "ATG" + plain(rng, 3 * 58) + "TGA"
        seq = "TAG" + body + "GGGGGG"
        gold = np.full(len(seq), code("outside:intergenic"), np.int64)
        a, e = 3, 3 + len(body)
        if i < 22:
            gold[a:a + 3], gold[a + 3:e - 3], gold[e - 3:e] = (
                code("start+"), code("CDS+"), code("stop+"))
        xs.append(onehot(seq))
        ys.append(gold)
    n, ev = learn_long_orfs(xs, ys, LAY, SCHEME)
    assert n == 50, ev
    n, ev = learn_long_orfs(xs[20:], ys[20:], LAY, SCHEME)
    assert n == 0  # 4 ORFs: too few for a rule


def masked_gene_window(rng, n_masked: int, cut: bool = False):
    """(gold codes, lowercase mask) of a window holding one two-exon plus-strand gene
    (60 CDS bases) with `n_masked` of its CDS bases soft-masked, between 40 intergenic
    bases on each side of which 30 are masked; `cut`: the window ends inside the gene's
    second exon (its whole CDS masked)."""
    parts = [("outside:intergenic", 40), ("start+", 3), ("CDS+", 27), ("donor+", 1),
             ("intron+", 28), ("acceptor+", 1), ("CDS+", 27), ("stop+", 3),
             ("outside:intergenic", 40)]
    gold = np.concatenate([np.full(n, code(k), np.int64) for k, n in parts])
    low = np.zeros(len(gold), bool)
    low[5:35] = True  # intergenic repeats: the training sequence is soft-masked
    cds = np.flatnonzero(np.isin(gold, [code("start+"), code("CDS+"), code("stop+")]))
    if cut:
        gold, low = gold[:len(gold) - 60], low[:len(gold) - 60]
        low[cds[cds < len(gold)]] = True
    else:
        low[rng.sample(sorted(cds.tolist()), n_masked)] = True
    return gold, low


def test_masked_cds_rule_is_the_most_masked_whole_training_gene():
    rng = random.Random(5)
    counts = [rng.randrange(0, 15) for _ in range(11)] + [15]  # the most: 15 of 60
    wins = [masked_gene_window(rng, k) for k in counts]
    cut = masked_gene_window(rng, 0, cut=True)  # a wholly masked gene cut by its window
    golds, lows = zip(*wins, cut)
    share, ev = learn_masked_cds(lows, golds, LAY, SCHEME)
    assert share == 15 / 60 and "12 whole training genes" in ev, ev
    # an unmasked FASTA, too few genes, a wholly masked whole gene: off
    share, ev = learn_masked_cds([np.zeros(len(g), bool) for g in golds], golds, LAY, SCHEME)
    assert share == 1.0 and "0.0% of the training sequence" in ev, ev
    share, ev = learn_masked_cds(lows[:9], golds[:9], LAY, SCHEME)
    assert share == 1.0 and "too few" in ev, ev
    g, low = masked_gene_window(rng, 60)
    share, ev = learn_masked_cds([*lows, low], [*golds, g], LAY, SCHEME)
    assert share == 1.0 and "wholly soft-masked" in ev, ev
