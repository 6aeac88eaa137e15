"""Long intergenic ORFs called genes (semiseg/genemodel/orffill.py, annotate.long_orfs).

Oracle: a codon-by-codon string walk over the sequence and its reverse complement that
lists every ORF (first ATG after the previous in-frame stop, to its stop codon), keeps
those on background labels and paints them longest first.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from seqs import BG, CM, CP, OTHER, ROOT, SHIPPED_MODEL, bed_labels, chrI_piece
from seqs import rc as revcomp

from semiseg.errors import SemisegError
from semiseg.genemodel.orffill import long_orfs

STOPS = ("TAA", "TAG", "TGA")


def walk_orfs(s: str, min_codons: int) -> list[tuple[int, int]]:
    """ORFs of the plus strand of s by walking codons one at a time."""
    s = s.upper()
    out = []
    for i in range(len(s) - 2):
        if s[i:i + 3] != "ATG":
            continue
        j = i - 3  # an in-frame ATG upstream before any stop: not the first ATG
        first = True
        while j >= 0:
            if s[j:j + 3] in STOPS:
                break
            if s[j:j + 3] == "ATG":
                first = False
                break
            j -= 3
        if not first:
            continue
        k = i + 3
        while k + 3 <= len(s) and s[k:k + 3] not in STOPS:
            k += 3
        if k + 3 <= len(s) and k + 3 - i >= 3 * min_codons:
            out.append((i, k + 3))
    return out


def oracle(seq: str, labels: list[int], min_codons: int) -> list[int]:
    n = len(seq)
    cand = [(a, e, "+") for a, e in walk_orfs(seq, min_codons)]
    cand += [(n - e, n - a, "-") for a, e in walk_orfs(revcomp(seq), min_codons)]
    cand = [c for c in cand if all(x == BG for x in labels[c[0]:c[1]])]
    cand.sort(key=lambda c: (c[0] - c[1], c[0], c[2] != "+"))
    out = list(labels)
    used = [False] * n
    for a, e, strand in cand:
        if any(used[a:e]):
            continue
        for q in range(a, e):
            used[q] = True
            out[q] = CP if strand == "+" else CM
    return out


def random_case(rng: random.Random):
    n = rng.randint(50, 900)
    # AT-rich with few stops on one strand now and then, so ORFs of 5-40 codons occur
    alphabet = rng.choice(["ACGT", "AACGTTGC", "ACGTN", "acgtACGT"])
    seq = "".join(rng.choice(alphabet) for _ in range(n))
    labels = [BG] * n
    for _ in range(rng.randint(0, 4)):
        a, width = rng.randrange(n), rng.randint(1, 120)
        labels[a:a + width] = [rng.choice([CP, CM, OTHER])] * len(labels[a:a + width])
    return seq, labels, rng.choice([1, 3, 5, 10, 20])


@pytest.mark.parametrize("seed", range(60))
def test_long_orfs_match_a_string_walk(seed):
    seq, labels, m = random_case(random.Random(seed))
    lab = np.array(labels)
    painted = long_orfs(lab, seq, {"+": CP, "-": CM}, BG, m)
    assert lab.tolist() == oracle(seq, labels, m)
    assert painted == sorted(painted)
    for a, e in painted:
        assert (lab[a:e] != BG).all()


def test_hand_cases():
    #          0         1         2         3
    #          0123456789012345678901234567890123456
    seq = "CCATGAAAATGCCCTAAGG"  # ATG at 2 (first) and 8 (in frame, not first), stop 14
    lab = np.zeros(len(seq), np.int64)
    assert long_orfs(lab, seq, {"+": CP, "-": CM}, BG, 3) == [(2, 17)]
    assert lab.tolist() == [0, 0] + [CP] * 15 + [0, 0]
    # an N in a codon makes neither a start nor a stop; lower case reads the same
    lab = np.zeros(len(seq), np.int64)
    assert long_orfs(lab, "ccNtgaaaatgccctaagg", {"+": CP}, BG, 3) == [(8, 17)]
    # too short, or touching another label: left alone
    lab = np.zeros(len(seq), np.int64)
    assert long_orfs(lab, seq, {"+": CP}, BG, 6) == []
    lab = np.zeros(len(seq), np.int64)
    lab[16] = OTHER
    assert long_orfs(lab, seq, {"+": CP}, BG, 3) == []
    # the minus strand: its ORF read through the reverse complement, painted CDS-
    lab = np.zeros(len(seq), np.int64)
    assert long_orfs(lab, revcomp(seq), {"+": CP, "-": CM}, BG, 3) == [(2, 17)]
    assert lab.tolist() == [0, 0] + [CM] * 15 + [0, 0]
    # a strand the scheme has no CDS label for is not read
    lab = np.zeros(len(seq), np.int64)
    assert long_orfs(lab, revcomp(seq), {"+": CP}, BG, 3) == []
    # no stop codon before the end: no ORF
    lab = np.zeros(12, np.int64)
    assert long_orfs(lab, "ATGAAAAAAAAA", {"+": CP}, BG, 1) == []


def test_annotate_long_orfs_on_the_shipped_model(tmp_path):
    """chrI's first 12 kb: the --long-orfs 100 output equals the oracle applied to the
    --long-orfs 0 output (both with the shipped first-ATG rule), and adds genes."""
    from semiseg.annotate.run import annotate

    seq, fasta = chrI_piece(tmp_path, 0, 12000)
    got = {}
    for n in (0, 100):
        out = tmp_path / f"o{n}"
        annotate(SHIPPED_MODEL, fasta, str(out), device="cpu", long_orfs=n)
        got[n] = bed_labels(f"{out}.bed", len(seq))
    assert got[100].tolist() == oracle(seq, got[0].tolist(), 100)
    assert (got[100] != got[0]).any()
    gff = Path(f"{tmp_path / 'o100'}.gff3").read_text()
    assert gff.count("\tCDS\t") > Path(f"{tmp_path / 'o0'}.gff3").read_text().count("\tCDS\t")


def test_bad_long_orfs(tmp_path):
    from semiseg.genemodel.generules import gene_rules
    from semiseg.genome import load_scheme

    gene = load_scheme("gene_structure")
    with pytest.raises(SemisegError, match="--long-orfs: expected a whole number"):
        gene_rules(gene, 1, False, None, 0, -1)
    chromatin = load_scheme({"name": "chromatin", "kind": "bed", "background": "quiet",
                             "labels": [{"name": "quiet"}, {"name": "active"}]})
    with pytest.raises(SemisegError, match="--long-orfs: only a gene model"):
        gene_rules(chromatin, 200, False, None, 0, 100)
    assert gene_rules(chromatin, 200, False, None, 100, None) is None  # a config's value
    rules = gene_rules(gene, 1, False, None, 100, None)
    assert rules.long_orfs == 100 and not rules.first_atg
    proc = subprocess.run(
        [sys.executable, "-m", "semiseg.cli", "annotate", "--model",
         SHIPPED_MODEL, "--fasta",
         os.path.join(ROOT, "data", "yeast", "chrI.fa"), "--out", str(tmp_path / "a"),
         "--long-orfs", "-5"], check=False, capture_output=True, text=True,
        env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("semiseg: error: --long-orfs")
    assert not list(tmp_path.glob("a.*"))
