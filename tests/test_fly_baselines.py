"""benchmarks/fly_baselines.py's own steps: the held-out truth, the AUGUSTUS coordinate
shift, and one row scored (against counts made here independently)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

import fly_baselines as fb
import gene_metrics as gm


def test_shift_augustus(tmp_path):
    raw = ("# a comment\n"
           "r1\tAUGUSTUS\tgene\t1\t1415\t0.23\t-\t.\tg1\n"
           'r1\tAUGUSTUS\tCDS\t900\t1376\t1\t-\t0\ttranscript_id "g1.t1"; gene_id "g1";\n')
    out = tmp_path / "a.gtf"
    assert fb.shift_augustus(raw, 3_000_000, str(out), header="# head\n") == 2
    lines = out.read_text().splitlines()
    assert lines[:2] == ["# head", "# a comment"]
    assert lines[2].split("\t")[:5] == [fb.CHROM, "AUGUSTUS", "gene", "3000001", "3001415"]
    assert lines[3].split("\t")[3:5] == ["3000900", "3001376"]
    assert lines[3].split("\t")[8] == 'transcript_id "g1.t1"; gene_id "g1";'


@pytest.fixture(scope="module")
def fly_seq():
    return gm.read_fasta(fb.FASTA)[fb.CHROM]


def test_held_out_truth_is_the_transcripts_inside(tmp_path, fly_seq):
    # counted here from the mRNA rows: every mRNA of the file lies either >= 3 bp inside
    # [3,000,000, 4,000,000) or outside it (no stop codon can decide), so the count of
    # those inside is the oracle
    inside = set()
    with open(fb.GFF) as fh:
        for line in fh:
            f = line.split("\t")
            if len(f) == 9 and f[2] == "mRNA" and int(f[3]) - 1 >= 3_000_003 and \
                    int(f[4]) <= 3_999_997:
                inside.add(f[8].split("ID=")[1].split(";")[0].strip())
    bed, truth, n = fb.region_files("test", fly_seq, str(tmp_path))
    assert n == len(inside) == 256
    kept = set()
    with open(truth) as fh:
        for line in fh:
            f = line.split("\t")
            if len(f) == 9 and f[2] == "mRNA":
                kept.add(f[8].split("ID=")[1].split(";")[0].strip())
    assert kept == inside
    with open(bed) as fh:
        assert fh.read() == f"{fb.CHROM}\t3000000\t4000000\n"


def test_saved_augustus_row(tmp_path, fly_seq):
    """The saved AUGUSTUS test-region output scored: 118 transcripts, 64 of them the CDS
    chain of a truth transcript (counted in the session that wrote it by a separate
    script: transcript_id grouping and truth stop codons extended by 3 bp)."""
    bed, truth, _ = fb.region_files("test", fly_seq, str(tmp_path))
    row = fb.score(os.path.join(fb.OUTDIR, "augustus_test.gtf"), truth, bed, str(tmp_path),
                   "test", "AUGUSTUS")
    g = row["genes"]
    assert (g["pred_models"], g["gene"]["pred_right"], g["truth_loci"]) == (118, 64, 144)
    assert (g["exon"]["truth"], g["exon"]["pred"], g["exon"]["pred_right"]) == (748, 648, 548)
    assert row["bp"] == 1_000_000


def test_folds_pool_keeps_each_folds_genes_apart(tmp_path):
    # two annotations that both name their gene "c:gene1" (IDs restart per run): pooled,
    # the reader must see two transcripts with each file's own CDS rows (oracle: the
    # rows written here), and the header once
    import fly_folds

    from semiseg.evaluate.genelevel import read_gene_models

    def gff(path, lo):
        path.write_text(
            "##gff-version 3\n# semiseg header\n"
            f"c\ts\tgene\t{lo}\t{lo + 99}\t.\t+\t.\tID=c:gene1\n"
            f"c\ts\tmRNA\t{lo}\t{lo + 99}\t.\t+\t.\tID=c:gene1.t1;Parent=c:gene1\n"
            f"c\ts\tCDS\t{lo}\t{lo + 29}\t.\t+\t0\tID=c:gene1.t1.cds;Parent=c:gene1.t1\n"
            f"c\ts\tCDS\t{lo + 70}\t{lo + 99}\t.\t+\t0\tID=c:gene1.t1.cds;Parent=c:gene1.t1\n"
            "###\n")
        return str(path)

    out = tmp_path / "pooled.gff3"
    fly_folds.pool_gff([gff(tmp_path / "a.gff3", 1), gff(tmp_path / "b.gff3", 1001)], out)
    text = out.read_text()
    assert text.count("##gff-version") == 1 and text.count("# semiseg header") == 1
    models = sorted(read_gene_models(out), key=lambda g: g.start)
    assert [m.cds for m in models] == [((0, 30), (70, 100)), ((1000, 1030), (1070, 1100))]
    assert "Parent=f1.c:gene1.t1" in text and "ID=f0.c:gene1" in text


def test_folds_pool_bed_keeps_each_files_rows_in_its_block(tmp_path):
    # an annotation of one block writes the rest of the sequence as gap rows: pooled,
    # only each file's rows inside its own block remain (oracle: the rows written here)
    import fly_folds

    a = tmp_path / "a.bed"
    a.write_text("track name=x\nc\t0\t60\tCDS+\nc\t60\t100\tintergenic\nc\t100\t300\tgap\n")
    b = tmp_path / "b.bed"
    b.write_text("track name=x\nc\t0\t100\tgap\nc\t100\t250\tintron+\nc\t250\t300\tCDS+\n")
    out = tmp_path / "pooled.bed"
    fly_folds.pool_bed([str(a), str(b)], str(out), [(0, 100), (100, 300)])
    rows = [ln.split("\t")[1:4] for ln in out.read_text().splitlines()[1:]]
    assert out.read_text().count("track") == 1
    assert rows == [["0", "60", "CDS+"], ["60", "100", "intergenic"],
                    ["100", "250", "intron+"], ["250", "300", "CDS+"]]


def test_blocks_truth_drops_a_transcript_across_two_blocks(tmp_path, fly_seq, monkeypatch):
    # t127's CDS runs 391,193-501,610 (a 110 kb intron): inside 0-1 Mb as one region,
    # across the blocks 0-0.5 / 0.5-1 Mb; the oracle is the truth GFF3's own mRNA rows
    # (read here) and those coordinates
    monkeypatch.setitem(fb.REGIONS, "two", (0, 1_000_000))
    bed, truth, n_one = fb.region_files("two", fly_seq, str(tmp_path / "one"))
    assert "ID=t127;" in open(truth).read()
    monkeypatch.setitem(fb.BLOCKS, "two", [(0, 500_000), (500_000, 1_000_000)])
    bed, truth, n_blocks = fb.region_files("two", fly_seq, str(tmp_path / "blocks"))
    rows = [ln.split("\t") for ln in open(bed).read().splitlines()]
    assert [r[1:] for r in rows] == [["0", "500000"], ["500000", "1000000"]]
    text = open(truth).read()
    assert "ID=t127;" not in text and n_blocks < n_one
    # every kept mRNA lies inside one block
    for ln in text.splitlines():
        f = ln.split("\t")
        if len(f) == 9 and f[2] == "mRNA":
            a, b = int(f[3]) - 1, int(f[4])
            assert b <= 500_000 or a >= 500_000, ln
