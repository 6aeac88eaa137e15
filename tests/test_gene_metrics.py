"""Exon- and gene-level scores (metrics.gene_level, evaluate/genelevel.py, `semiseg evaluate`) on
hand-built gene sets whose right answers are counted by hand in the comments."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from semiseg.errors import SemisegError
from semiseg.evaluate.genelevel import (
    GeneModel,
    models_from_segments,
    normalise_stops,
    read_gene_models,
)
from semiseg.evaluate.run import evaluate
from semiseg.genome import load_scheme
from semiseg.metrics import gene_level, loci, stop_variants


def _key(strand, *cds, chrom="c"):
    return (chrom, strand, tuple(cds))


def test_gene_level_hand_counted():
    t1 = _key("+", (100, 200), (300, 400))
    t2 = _key("+", (100, 200), (350, 400))  # isoform of t1 (shares exon 100-200)
    t3 = _key("-", (1000, 1100))
    t3_dup = _key("-", (1000, 1100))  # the same transcript listed again as another gene
    t4 = _key("+", (2000, 2100), (2200, 2300))
    truth = [t1, t2, t3, t3_dup, t4]
    p1 = t1
    p2 = t2
    p3 = _key("-", (1000, 1101))  # one base off at one end
    p4 = _key("+", (2000, 2100), (2201, 2300))  # second exon one base off
    p5 = _key("+", (5000, 5100))  # nothing there
    pred = [p1, p2, p3, p4, p5]
    r = gene_level(truth, pred)
    # loci: {t1, t2}, {t3, t3_dup}, {t4}
    assert r["truth_loci"] == 3 and r["truth_chains"] == 4 and r["truth_models"] == 5
    # distinct truth exons: 100-200, 300-400, 350-400, 1000-1100(-), 2000-2100, 2200-2300
    # distinct predicted: those of p1..p5 = 100-200, 300-400, 350-400, 1000-1101(-),
    # 2000-2100, 2201-2300, 5000-5100; right: 100-200, 300-400, 350-400, 2000-2100
    e = r["exon"]
    assert (e["truth"], e["pred"], e["truth_found"], e["pred_right"]) == (6, 7, 4, 4)
    assert e["sensitivity"] == pytest.approx(4 / 6)
    assert e["precision"] == pytest.approx(4 / 7)
    assert e["f1"] == pytest.approx(2 * (4 / 6) * (4 / 7) / (4 / 6 + 4 / 7))
    # genes: p1 and p2 right (two isoforms of one locus: each prediction is right, the
    # locus is found once); loci found 1 of 3; predictions right 2 of 5
    g = r["gene"]
    assert (g["loci_found"], g["chains_found"], g["pred_right"]) == (1, 2, 2)
    assert g["sensitivity"] == pytest.approx(1 / 3)
    assert g["precision"] == pytest.approx(2 / 5)
    assert g["f1"] == pytest.approx(4 / 11)


def test_a_prediction_matching_duplicated_isoforms_counts_once():
    t = _key("+", (10, 20), (30, 40))
    r = gene_level([t, t, t], [t])
    assert r["truth_loci"] == 1
    assert (r["gene"]["pred_right"], r["gene"]["loci_found"]) == (1, 1)
    assert r["gene"]["precision"] == 1.0 and r["gene"]["sensitivity"] == 1.0


def test_loci_join_overlapping_exons_not_nested_genes():
    outer = _key("+", (0, 10), (1000, 1010))
    nested = _key("+", (500, 600))  # inside outer's intron: another gene
    overlapping = _key("+", (5, 8), (2000, 2010))  # shares bases with outer's first exon
    other_strand = _key("-", (0, 10))
    lo = loci([outer, nested, overlapping, other_strand])
    assert lo[0] == lo[2]
    assert len({lo[0], lo[1], lo[3]}) == 3


def test_stop_variants_move_the_three_prime_end_only():
    assert stop_variants(_key("+", (0, 10), (20, 30))) == {
        _key("+", (0, 10), (20, 30)), _key("+", (0, 10), (20, 27)), _key("+", (0, 10), (20, 33))}
    assert stop_variants(_key("-", (10, 20), (30, 40))) == {
        _key("-", (10, 20), (30, 40)), _key("-", (13, 20), (30, 40)), _key("-", (7, 20), (30, 40))}


# --------------------------------------------------------------------------- files
# A 300-bp genome of C's (no stop codon on either strand) with three genes:
#   A (+): ATGAAA [10,16) | intron [16,40) GT..AG | CCCAAA [40,46), stop TAA [46,49)
#   B (-): CDS [100,112), its stop codon on - at [97,100) (TTA on +), ATG at [109,112)
#   C (+): ATGAAA [200,206), stop TAA [206,209)
def _genome():
    s = ["C"] * 300

    def put(i, text):
        s[i:i + len(text)] = list(text)

    put(10, "ATGAAA")
    put(16, "GT")
    put(38, "AG")
    put(40, "CCCAAA")
    put(46, "TAA")
    put(97, "TTA")
    put(109, "CAT")
    put(200, "ATGAAATAA")
    return "".join(s)


def _files(tmp_path):
    fa = tmp_path / "g.fa"
    fa.write_text(">c\n" + _genome() + "\n")
    # truth as the fly GFF3: gene > mRNA > CDS, stop codon just after the CDS rows; A listed
    # twice (a duplicate), B's second copy under another gene
    rows = []
    for gid, strand, cds in (("A", "+", [(11, 16), (41, 46)]), ("A2", "+", [(11, 16), (41, 46)]),
                             ("B", "-", [(101, 112)]), ("C", "+", [(201, 206)])):
        rows.append(f"c\tt\tgene\t{cds[0][0]}\t{cds[-1][1]}\t.\t{strand}\t.\tID={gid}")
        rows.append(f"c\tt\tmRNA\t{cds[0][0]}\t{cds[-1][1]}\t.\t{strand}\t.\tID={gid}.t;Parent={gid}")
        rows += [f"c\tt\tCDS\t{a}\t{b}\t.\t{strand}\t0\tParent={gid}.t" for a, b in cds]
    truth = tmp_path / "truth.gff3"
    truth.write_text("##gff-version 3\n" + "\n".join(rows) + "\n")
    # semiseg's BED, the yeast convention (stop codon inside the CDS): A and B right, C one
    # base short of its stop codon's end
    bed_rows = [(0, 10, "intergenic"), (10, 16, "CDS+"), (16, 40, "intron+"), (40, 49, "CDS+"),
                (49, 97, "intergenic"), (97, 112, "CDS-"), (112, 200, "intergenic"),
                (200, 208, "CDS+"), (208, 300, "intergenic")]
    bed = tmp_path / "pred.bed"
    bed.write_text("".join(f"c\t{a}\t{b}\t{n}\t900\t.\t{a}\t{b}\t0,0,0\n" for a, b, n in bed_rows))
    return str(fa), str(truth), str(bed)


def test_stop_codons_normalised_from_the_sequence(tmp_path):
    _, truth, _ = _files(tmp_path)
    seq = _genome()

    def fetch(c, a, b):
        return seq[a:b]

    t = read_gene_models(truth)
    assert [g.cds for g in t] == [((10, 16), (40, 46))] * 2 + [((100, 112),), ((200, 206),)]
    norm, n = normalise_stops(t, fetch, {"c": 300})
    assert n == 4
    assert sorted(g.cds for g in norm) == sorted(
        [((10, 16), (40, 49))] * 2 + [((97, 112),), ((200, 209),)])
    # already included: nothing changes
    again, n2 = normalise_stops(norm, fetch, {"c": 300})
    assert n2 == 0 and [g.cds for g in again] == [g.cds for g in norm]
    # a model ending one base short is no stop-codon case: left as is
    short = [GeneModel("x", "c", "+", ((200, 208),))]
    assert normalise_stops(short, fetch, {"c": 300})[0][0].cds == ((200, 208),)


def test_models_from_a_segmentation_bed():
    scheme = load_scheme("gene_structure")
    iv = {"c": ([0, 10, 16, 40, 49, 97, 112, 200, 204, 208, 220],
                [10, 16, 40, 49, 97, 112, 200, 204, 208, 220, 230],
                ["intergenic", "CDS+", "intron+", "CDS+", "intergenic", "CDS-", "intergenic",
                 "CDS+", "CDS+", "gap", "intron+"])}
    got = models_from_segments(iv, scheme)
    # 200-204 and 204-208 touch: one exon; the gap ends it; a lone intron is no gene
    assert [(g.strand, g.cds) for g in got] == [
        ("+", ((10, 16), (40, 49))), ("-", ((97, 112),)), ("+", ((200, 208),))]


@pytest.mark.parametrize("with_fasta", [True, False])
def test_evaluate_gene_scores_from_files(tmp_path, with_fasta):
    fa, truth, bed = _files(tmp_path)
    r = evaluate(bed, truth, scheme=load_scheme("gene_structure"), tolerance=0,
                 fasta=fa if with_fasta else None)
    g = r["genes"]
    # truth: A (twice), B, C -> 3 loci, 3 distinct exon sets; prediction: A, B right, C not
    assert (g["truth_models"], g["truth_loci"], g["pred_models"]) == (4, 3, 3)
    assert (g["gene"]["loci_found"], g["gene"]["pred_right"]) == (2, 2)
    assert g["gene"]["sensitivity"] == pytest.approx(2 / 3)
    assert g["gene"]["precision"] == pytest.approx(2 / 3)
    # exons: truth A1, A2, B, C; predicted A1, A2, B, C' (one short): 3 of 4 both ways
    assert (g["exon"]["truth"], g["exon"]["pred"], g["exon"]["truth_found"]) == (4, 4, 3)
    assert g["exon"]["precision"] == pytest.approx(3 / 4)
    assert (g["stop_extended"] is not None) == with_fasta


def test_augustus_gtf_and_regions(tmp_path):
    fa, truth, _ = _files(tmp_path)
    # AUGUSTUS-like GTF (yeast parameters: stop_codon rows outside the CDS rows), with
    # gene/transcript rows that carry no transcript_id; C exactly right this time, B one
    # base off at its 5' end
    gtf = tmp_path / "aug.gff"
    lines = ["c\tAUGUSTUS\tgene\t11\t49\t0.5\t+\t.\tg1",
             "c\tAUGUSTUS\ttranscript\t11\t49\t0.5\t+\t.\tg1.t1",
             'c\tAUGUSTUS\tCDS\t11\t16\t.\t+\t0\ttranscript_id "g1.t1"; gene_id "g1";',
             'c\tAUGUSTUS\tintron\t17\t40\t.\t+\t.\ttranscript_id "g1.t1"; gene_id "g1";',
             'c\tAUGUSTUS\tCDS\t41\t46\t.\t+\t0\ttranscript_id "g1.t1"; gene_id "g1";',
             'c\tAUGUSTUS\tstop_codon\t47\t49\t.\t+\t0\ttranscript_id "g1.t1"; gene_id "g1";',
             'c\tAUGUSTUS\tCDS\t101\t113\t.\t-\t0\ttranscript_id "g2.t1"; gene_id "g2";',
             'c\tAUGUSTUS\tstop_codon\t98\t100\t.\t-\t0\ttranscript_id "g2.t1"; gene_id "g2";',
             'c\tAUGUSTUS\tCDS\t201\t206\t.\t+\t0\ttranscript_id "g3.t1"; gene_id "g3";',
             'c\tAUGUSTUS\tstop_codon\t207\t209\t.\t+\t0\ttranscript_id "g3.t1"; gene_id "g3";']
    gtf.write_text("# AUGUSTUS output\n" + "\n".join(lines) + "\n")
    r = evaluate(str(gtf), truth, scheme=load_scheme("gene_structure"), tolerance=0, fasta=fa)
    g = r["genes"]["gene"]
    assert (g["loci_found"], g["pred_right"], g["pred"]) == (2, 2, 3)  # A and C
    assert r["bp_evaluated"] == 300
    # base level: truth CDS- = its CDS row 100-112 plus the stop codon 97-100 that the
    # normalisation adds (15 bp); predicted CDS- = stop_codon 97-100 + CDS 100-113 (16 bp)
    rows = {x["label"]: x for x in r["labels"]}
    assert rows["CDS-"]["bp_truth"] == 15 and rows["CDS-"]["bp_pred"] == 16
    # regions: only [0, 150): A and B; C outside on both sides
    reg = tmp_path / "r.bed"
    reg.write_text("c\t0\t150\n")
    r = evaluate(str(gtf), truth, scheme=load_scheme("gene_structure"), tolerance=0, fasta=fa,
                 regions=str(reg))
    g = r["genes"]
    assert r["bp_evaluated"] == 150
    assert g["outside_regions"] == {"truth": 1, "pred": 1}
    assert (g["truth_loci"], g["gene"]["loci_found"], g["gene"]["pred_right"]) == (2, 1, 1)
    assert sum(x["segments_truth"] for x in r["labels"] if x["label"] == "CDS+") == 2


def test_regions_restrict_segment_counts(tmp_path):
    _, truth, bed = _files(tmp_path)
    reg = tmp_path / "r.bed"
    reg.write_text("c\t150\t300\n")
    r = evaluate(bed, truth, scheme=load_scheme("gene_structure"), tolerance=0,
                 regions=str(reg))
    rows = {x["label"]: x for x in r["labels"]}
    # inside [150, 300): truth CDS+ 200-206 only (one segment), predicted 200-208
    assert rows["CDS+"]["segments_truth"] == 1 and rows["CDS+"]["bp_truth"] == 6
    assert rows["CDS+"]["segments_pred"] == 1 and rows["CDS+"]["bp_pred"] == 8
    assert rows["CDS-"]["bp_truth"] == 0 and rows["CDS-"]["segments_truth"] == 0
    # the region's ends are no boundaries: CDS+ boundaries truth {200, 206}, pred {200, 208}
    assert rows["CDS+"]["boundary_f1"] == pytest.approx(0.5)
    with pytest.raises(SemisegError, match="needs a gene-structure label scheme"):
        evaluate(truth, truth, scheme=load_scheme({"name": "ab", "labels": [
            {"name": "A"}, {"name": "B"}]}), tolerance=0)
    bad = tmp_path / "bad.bed"
    bad.write_text("zz\t0\t10\n")
    with pytest.raises(SemisegError, match="--regions: chromosome"):
        evaluate(bed, truth, tolerance=0, regions=str(bad))


def test_cli_prints_and_writes_gene_scores(tmp_path):
    fa, truth, bed = _files(tmp_path)
    out = tmp_path / "ev"
    res = subprocess.run([sys.executable, "-m", "semiseg.cli", "evaluate", "--pred", bed,
                          "--truth", truth, "--fasta", fa, "--tolerance", "0", "--out", str(out)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "gene (exact CDS chain)" in res.stdout and "0.6667" in res.stdout
    data = json.loads((tmp_path / "ev.json").read_text())
    assert data["genes"]["gene"]["f1"] == pytest.approx(2 / 3)
    bad = subprocess.run([sys.executable, "-m", "semiseg.cli", "evaluate", "--pred", bed,
                          "--truth", truth, "--regions", str(tmp_path / "none.bed")],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("semiseg: error: --regions: file not found")


def test_stop_convention_alone_makes_no_difference_with_the_sequence(tmp_path):
    """The truth keeps its stop codons after the CDS rows, the prediction (same genes)
    inside them: with the FASTA every level agrees; without it the base labels differ
    by the 3 stop-codon bp of each gene (A, B, C: 9 bp of CDS+/- against intergenic)."""
    fa, truth, _ = _files(tmp_path)
    bed_rows = [(0, 10, "intergenic"), (10, 16, "CDS+"), (16, 40, "intron+"), (40, 49, "CDS+"),
                (49, 97, "intergenic"), (97, 112, "CDS-"), (112, 200, "intergenic"),
                (200, 209, "CDS+"), (209, 300, "intergenic")]
    bed = tmp_path / "same.bed"
    bed.write_text("".join(f"c\t{a}\t{b}\t{n}\n" for a, b, n in bed_rows))
    r = evaluate(str(bed), truth, scheme=load_scheme("gene_structure"), tolerance=0, fasta=fa)
    assert r["accuracy"] == 1.0 and r["macro"]["boundary_f1"] == 1.0
    assert r["genes"]["gene"]["f1"] == 1.0 and r["genes"]["exon"]["f1"] == 1.0
    assert r["genes"]["stop_extended"] == {"truth": 4, "pred": 0}
    r = evaluate(str(bed), truth, scheme=load_scheme("gene_structure"), tolerance=0)
    conf = r["confusion"]["truth_by_pred"]
    assert conf[0][1] + conf[0][2] == 9 and r["accuracy"] == pytest.approx(291 / 300)
    assert r["genes"]["gene"]["f1"] == 1.0  # the +-3 bp rule


@pytest.mark.slow  # ~10 s on a shared 2-core CPU (one annotation with the shipped model)
def test_semiseg_bed_and_gff3_give_the_same_genes(tmp_path):
    """semiseg's two outputs of one annotation (the shipped yeast model on chrI
    31-42 kb) read as predictions: the BED's segment runs and the GFF3's CDS rows are the
    same gene models, so every score agrees; the piece has genes the model gets exactly
    right (GDH3, BDH2, BDH1 ... on chrI)."""
    import os

    from seqs import ROOT, SHIPPED_MODEL

    from semiseg.annotate.run import annotate

    fa = os.path.join(ROOT, "data", "yeast", "chrI.fa")
    gff = os.path.join(ROOT, "data", "yeast", "yeast_chrI_chrII.gff3")
    reg = tmp_path / "r.bed"
    reg.write_text("chrI\t31000\t42000\n")
    annotate(SHIPPED_MODEL, fa, str(tmp_path / "a"), regions=str(reg), device="cpu")
    res = [evaluate(str(tmp_path / f"a.{ext}"), gff, scheme=load_scheme("gene_structure"),
                    tolerance=0, regions=str(reg), fasta=fa) for ext in ("bed", "gff3")]
    a, b = (r["genes"] for r in res)
    assert a["pred_models"] == b["pred_models"] >= 3
    assert a["exon"] == b["exon"] and a["gene"] == b["gene"]
    assert a["gene"]["pred_right"] >= 1
    assert res[0]["macro"]["f1"] == pytest.approx(res[1]["macro"]["f1"])


def test_bad_gene_model_rows(tmp_path):
    bad = tmp_path / "bad.gff3"
    bad.write_text("c\tx\tCDS\t10\t20\t.\t.\t0\tParent=t1\n")
    with pytest.raises(SemisegError, match=r"bad.gff3:1: a CDS row needs strand \+ or -"):
        read_gene_models(bad)
    bad.write_text("c\tx\tCDS\t10\t20\t.\t+\t0\tParent=t1\nc\tx\tCDS\t30\t40\t.\t-\t0\tParent=t1\n")
    with pytest.raises(SemisegError, match=r"bad.gff3:2: parts of transcript 't1' disagree"):
        read_gene_models(bad)
    bad.write_text("c\tx\tCDS\t10\tx\t.\t+\t0\tParent=t1\n")
    with pytest.raises(SemisegError, match=r"bad.gff3:1: start and end must be integers"):
        read_gene_models(bad)
    bad.write_text("c\tx\tCDS\t10\n")
    with pytest.raises(SemisegError, match=r"bad.gff3:1: expected 9 tab-separated columns"):
        read_gene_models(bad)
