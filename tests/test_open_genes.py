"""benchmarks/open_genes.py's checks at the base, on genes built by hand in a made-up
sequence (the oracle: each gene's faults are decided here, by construction)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

import open_genes as og

COMP = str.maketrans("ACGT", "TGCA")


def _revcomp(s: str) -> str:
    return s.translate(COMP)[::-1]


def _plus_gene() -> tuple[str, list[tuple[int, int]]]:
    """ATG AAA | GTAAG...CAG | CCC TAA: two exons of 6 and 3 bp, an intron of 60 bp, the
    stop codon after the last CDS row."""
    intron = "GTAAGT" + "T" * 51 + "CAG"
    seq = "CC" + "ATGAAA" + intron + "CCC" + "TAA" + "GG"
    a = 2
    cds = [(a, a + 6), (a + 6 + len(intron), a + 6 + len(intron) + 3)]
    return seq, cds


def test_a_clean_plus_gene_passes_every_check():
    seq, cds = _plus_gene()
    r = og.check_gene(seq, "+", cds)
    assert r["frame"] and r["atg"] and r["stop"] and r["no_inner_stop"] and r["gt_ag"]
    assert r["introns"] == [60]


def test_the_same_gene_on_the_minus_strand_passes():
    seq, cds = _plus_gene()
    rc = _revcomp(seq)
    n = len(seq)
    r = og.check_gene(rc, "-", sorted((n - b, n - a) for a, b in cds))
    assert r["frame"] and r["atg"] and r["stop"] and r["no_inner_stop"] and r["gt_ag"]
    assert r["introns"] == [60]


def test_each_fault_is_named():
    seq, cds = _plus_gene()
    # a stop codon split by the intron: exon 1 ends ...TA, exon 2 begins G
    split = "CC" + "ATGTA" + seq[8:8 + 60] + "GCCC" + "TAA" + "GG"
    s_cds = [(2, 7), (67, 71)]
    r = og.check_gene(split, "+", s_cds)
    assert not r["no_inner_stop"] and r["frame"] and r["gt_ag"]
    # a GC donor, a missing ATG, a CDS one base short of a codon, no stop after it
    bad = seq[:8] + "GC" + seq[10:]
    assert not og.check_gene(bad, "+", cds)["gt_ag"]
    no_atg = seq[:2] + "CTG" + seq[5:]
    assert not og.check_gene(no_atg, "+", cds)["atg"]
    short = [(cds[0][0], cds[0][1]), (cds[1][0], cds[1][1] - 1)]
    r = og.check_gene(seq, "+", short)
    assert not r["frame"]
    no_stop = seq[:-5] + "CAA" + "GG"
    assert not og.check_gene(no_stop, "+", cds)["stop"]


def test_summary_counts_partial_genes_apart(tmp_path):
    seq, cds = _plus_gene()
    fa = tmp_path / "g.fa"
    fa.write_text(">c\n" + seq + "\n")
    rows = ["##gff-version 3"]
    # g2: cut, one exon; g3: cut inside the intron, read from there its first codon is
    # TAA (an inner stop, which a truncated start may read: still counted as cut)
    a = cds[0][0]
    spans = {"g1": cds, "g2": [cds[0]], "g3": [(a + 7, a + 16)]}
    assert seq[a + 7:a + 10] == "TAA"
    for gid, span in spans.items():
        tail = ";partial=true" if gid != "g1" else ""
        rows.append(f"c\tx\tmRNA\t3\t{len(seq) - 2}\t.\t+\t.\tID={gid}{tail}")
        rows += [f"c\tx\tCDS\t{a + 1}\t{b}\t.\t+\t0\tParent={gid}" for a, b in span]
    gff = tmp_path / "p.gff3"
    gff.write_text("\n".join(rows) + "\n")
    from semiseg.genome import Fasta

    with Fasta(str(fa)) as genome:
        row = og.summarise(str(gff), genome, og.read_regions(None), False)
    # genes, cut, multiple of 3, ATG, stop, no inner stop, introns, GT..AG
    assert row[1:9] == ["3", "2", "1", "1", "1", "1", "1", "1"]
