"""Start codons moved to the first ATG of their ORF (semiseg/genemodel/firstatg.py, annotate
--first-atg), checked against a walk over plain strings: the plus strand read left to
right, the minus strand through the reverse complement of the whole sequence."""

import random

import numpy as np
import pytest
from seqs import BG, CM, CP, OTHER, SHIPPED_MODEL, bed_labels, chrI_piece
from seqs import rc as revcomp

from semiseg.errors import SemisegError
from semiseg.genemodel.firstatg import extend_starts

STOPS = ("TAA", "TAG", "TGA")


def oracle_plus(seq: str, labels: list[int], a: int) -> int:
    """The new start of a plus-strand CDS run beginning at a (a itself if none)."""
    best, p = a, a - 3
    while p >= 0:
        codon = seq[p:p + 3]
        if codon in STOPS or any(x != BG for x in labels[p:p + 3]):
            break
        if codon == "ATG":
            best = p
        p -= 3
    return best


def oracle(seq: str, labels: list[int]) -> list[int]:
    """Every qualifying gene extended, plus strand directly, minus strand as the plus
    strand of the reverse complement (labels reversed, CDS- read as CDS+)."""
    n = len(seq)
    out = list(labels)
    runs = []  # (start, end, label) of the input's runs
    a = 0
    for i in range(1, n + 1):
        if i == n or labels[i] != labels[a]:
            runs.append((a, i, labels[a]))
            a = i
    # left to right; a gene extended first takes the background a later one would want
    for a, b, c in runs:
        if c == CP and a > 0 and out[a - 1] == BG and seq[a:a + 3] == "ATG":
            new = oracle_plus(seq, out, a)
            out[new:a] = [CP] * (a - new)
        elif c == CM and b < n and out[b] == BG and seq[b - 3:b] == "CAT":
            rs, rl = revcomp(seq), out[::-1]
            ra = n - b  # the gene's 5' end in reverse-complement coordinates
            new = n - oracle_plus(rs, rl, ra)
            out[b:new] = [CM] * (new - b)
    return out


def random_case(rng: random.Random, n: int = 900):
    seq = "".join(rng.choice("ACGT") for _ in range(n))
    labels = [BG] * n
    pos = 30
    while pos < n - 60:
        length = 3 * rng.randint(5, 20)
        strand = rng.choice("+-")
        gene = list("ATG" + "".join(rng.choice("ACG") + rng.choice("ACG") + rng.choice("CGT")
                                    for _ in range(length // 3 - 2)) + "TAA")
        g = "".join(gene) if strand == "+" else revcomp("".join(gene))
        if rng.random() < 0.2:  # a partial gene: no start codon at its 5' end
            g = ("CCC" + g[3:]) if strand == "+" else (g[:-3] + "GGG")
        seq = seq[:pos] + g + seq[pos + len(g):]
        labels[pos:pos + len(g)] = [CP if strand == "+" else CM] * len(g)
        if rng.random() < 0.3:  # another label just upstream or downstream
            k = (pos - rng.randint(1, 20) if rng.random() < 0.5
                 else pos + len(g) + rng.randint(0, 20))
            labels[max(0, k):max(0, k) + 2] = [OTHER, OTHER]
        pos += len(g) + rng.randint(1, 120)
    return seq, labels


@pytest.mark.parametrize("seed", range(40))
def test_extension_matches_a_string_walk_on_both_strands(seed):
    rng = random.Random(seed)
    seq, labels = random_case(rng)
    lab = np.asarray(labels, np.int64)
    spans = extend_starts(lab, seq, {"+": CP, "-": CM}, BG)
    assert lab.tolist() == oracle(seq, labels)
    for lo, hi, glo, ghi in spans:  # each extension lies inside its gene's new run
        assert glo <= lo < hi <= ghi and set(lab[glo:ghi].tolist()) in ({CP}, {CM})


def test_what_is_left_alone():
    # plus gene ATG AAA TAA at 12 with an in-frame ATG at 6 and a stop (TGA) at 0
    seq = "TGACCCATGCCCATGAAATAACCC"
    lab = np.array([BG] * 12 + [CP] * 9 + [BG] * 3)
    extend_starts(lab, seq, {"+": CP}, BG)
    assert lab.tolist() == [BG] * 6 + [CP] * 15 + [BG] * 3  # to the ATG at 6, not past TGA
    # the same with another label at 8: blocked before the ATG at 6
    lab = np.array([BG] * 8 + [OTHER] + [BG] * 3 + [CP] * 9 + [BG] * 3)
    extend_starts(lab, seq, {"+": CP}, BG)
    assert lab.tolist() == [BG] * 8 + [OTHER] + [BG] * 3 + [CP] * 9 + [BG] * 3
    # a partial gene (no ATG at its 5' end) and a gene at the sequence start: unchanged
    lab = np.array([BG] * 13 + [CP] * 8 + [BG] * 3)
    extend_starts(lab, seq, {"+": CP}, BG)
    assert lab.tolist() == [BG] * 13 + [CP] * 8 + [BG] * 3
    # coarser resolutions carry no codons: annotate leaves the step off there
    from semiseg.genemodel.generules import gene_rules
    from semiseg.genome import load_scheme

    assert gene_rules(load_scheme("gene_structure"), 20, True, None, 0, None) is None


def test_annotate_first_atg_on_the_shipped_model(tmp_path):
    """With --first-atg every gene of the GFF3 whose 5' side is intergenic starts at the
    first ATG of its ORF or at a base next to another feature; without it the same genes
    end at the same stop codons. A model without CDS labels refuses the flag."""
    from semiseg.annotate.run import annotate
    from semiseg.genemodel.generules import gene_rules
    from semiseg.genome import load_scheme

    seq, fasta = chrI_piece(tmp_path, 30000, 40000)
    genes = {}
    for flag in (False, True):
        out = tmp_path / ("on" if flag else "off")
        annotate(SHIPPED_MODEL, fasta, str(out), device="cpu", first_atg=flag, long_orfs=0)
        genes[flag] = bed_labels(f"{out}.bed", len(seq))
    off, on = genes[False], genes[True]
    assert on.tolist() == oracle(seq, off.tolist())
    assert (on != off).any()  # this piece has a gene the model starts at a later ATG
    chromatin = load_scheme({"name": "chromatin", "kind": "bed", "background": "quiet",
                             "labels": [{"name": "quiet"}, {"name": "active"}]})
    with pytest.raises(SemisegError, match="--first-atg"):
        gene_rules(chromatin, 200, False, True, 0, None)
    assert gene_rules(chromatin, 200, True, None, 0, None) is None  # a config's default
    assert gene_rules(load_scheme("gene_structure"), 1, False, None, 0, None) is None
