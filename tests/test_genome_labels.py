import os

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from semiseg.errors import SemisegError
from semiseg.genome import (
    Annotation,
    Fasta,
    LabelScheme,
    gff_transcripts,
    load_scheme,
    read_annotation,
    read_gff_rows,
)
from semiseg.genome._util import bin_majority

YEAST = os.path.join(os.path.dirname(__file__), "..", "data", "yeast")
GFF = os.path.join(YEAST, "yeast_chrI_chrII.gff3")
COMP = str.maketrans("ACGTacgt", "TGCAtgca")


@pytest.fixture(scope="module")
def yeast():
    fa = Fasta([os.path.join(YEAST, "chrI.fa"), os.path.join(YEAST, "chrII.fa")])
    scheme = load_scheme("gene_structure")
    rows, gtf = read_gff_rows(GFF, fa.chrom_sizes)
    yield fa, scheme, gff_transcripts(rows, gtf, scheme, GFF)
    fa.close()


def test_yeast_coding_units_and_gaps(yeast):
    fa, scheme, transcripts = yeast
    coding = [t for t in transcripts if t.coding]
    assert len(coding) == 583
    assert sum(len(t.cds) for t in coding) == 616
    for t in coding:
        assert (t.cds[:, 1] - t.cds[:, 0]).sum() % 3 == 0, t.id
    gaps = [(t, int(a), int(b)) for t in coding for a, b in zip(t.cds[:-1, 1], t.cds[1:, 0])]
    assert len(gaps) == 33
    short = [g for g in gaps if g[2] - g[1] < scheme.min_intron]
    assert [b - a for _, a, b in short] == [1, 1, 1]
    # the 1-bp gaps are the Ty frameshifts (transposable element genes), not introns
    assert {t.type for t, _, _ in short} == {"transposable_element_gene"}
    introns = [(t, int(a), int(b)) for t in coding for a, b in t.introns]
    assert len(introns) == 30
    assert sorted((a, b) for _, a, b in introns) == sorted(
        (a, b) for _, a, b in gaps if b - a >= scheme.min_intron)
    canonical = 0
    for t, a, b in introns:
        seq = fa.fetch(t.chrom, a, b).upper()
        if t.strand == "-":
            seq = seq.translate(COMP)[::-1]
        canonical += seq[:2] == "GT" and seq[-2:] == "AG"
    assert canonical == 29


def test_yeast_label_array(yeast):
    fa, scheme, transcripts = yeast
    ann = read_annotation(GFF, scheme, fa.chrom_sizes)
    cds_p, cds_m = scheme.index("CDS+"), scheme.index("CDS-")
    intron_p, intron_m = scheme.index("intron+"), scheme.index("intron-")
    labels = {c: ann.labels(c) for c in fa.chrom_sizes}
    # CDS has top priority and CDS+ beats CDS-: the CDS labels are exactly the CDS rows
    for chrom, size in fa.chrom_sizes.items():
        plus, minus = np.zeros(size, bool), np.zeros(size, bool)
        for t in transcripts:
            if t.chrom == chrom and t.coding:
                for a, b in np.concatenate([t.cds, t.short_gaps]):
                    (plus if t.strand == "+" else minus)[a:b] = True
        x = labels[chrom]
        np.testing.assert_array_equal(x == cds_p, plus)
        np.testing.assert_array_equal(x == cds_m, minus & ~plus)
    # intron labels only where the GFF has an intron
    n_intron = sum(int(np.isin(v, [intron_p, intron_m]).sum()) for v in labels.values())
    assert 0 < n_intron <= sum(int(b - a) for t in transcripts for a, b in t.introns)
    # tRNA with an intron: tP(UGG)A, exons 139154-139189 and 139221-139256 (1-based)
    x = labels["chrI"]
    assert (x[139153:139189] == scheme.index("ncRNA+")).all()
    assert (x[139189:139220] == intron_p).all()
    assert x[139152] == scheme.background
    # binned labels are the majority of the bp labels
    binned = ann.labels("chrI", 139000, 139400, resolution=10)
    bp = ann.labels("chrI", 139000, 139400)
    for i in range(40):
        vals, counts = np.unique(bp[i * 10:(i + 1) * 10], return_counts=True)
        assert binned[i] == vals[counts == counts.max()].min()


def test_chunked_rasterising_is_seamless(yeast, monkeypatch):
    fa, scheme, _ = yeast
    ann = read_annotation(GFF, scheme, fa.chrom_sizes)
    whole = {r: ann.labels("chrI", 3, 200003, r) for r in (1, 7)}
    import semiseg.genome.labels as labels_module

    monkeypatch.setattr(labels_module, "_CHUNK", 1000)
    for r, want in whole.items():
        np.testing.assert_array_equal(ann.labels("chrI", 3, 200003, r), want)
    bp = ann.labels("chrI", 3, 200003)
    np.testing.assert_array_equal(bin_majority(bp, 7, len(scheme)), whole[7])


def test_bin_majority_hand_cases():
    x = np.array([0, 0, 1, -1, -1, -1, 2, 1, 2, 1, 1])
    np.testing.assert_array_equal(bin_majority(x, 3, 3), [0, -1, 2, 1])
    # ties -> lowest label; masked do not vote
    np.testing.assert_array_equal(bin_majority(np.array([2, 1, -1, -1]), 4, 3), [1])


SCHEME = {
    "name": "chromatin",
    "labels": [
        {"name": "active", "color": "255,0,0", "aliases": ["Tss", "Enh"]},
        {"name": "repressed", "color": [0, 0, 255]},
        {"name": "quiet", "color": "#c8c8c8"},
    ],
    "priority": ["active", "repressed"],
    "background": "quiet",
}
SIZES = {"chr1": 100, "chr2": 50}


def test_scheme_round_trip_and_checks(tmp_path):
    s = LabelScheme.from_dict(SCHEME)
    assert s.names == ["active", "repressed", "quiet"]
    assert s.colors[2] == (200, 200, 200)
    assert s.index("Enh") == 0 and s.background == 2
    again = LabelScheme.from_dict(yaml.safe_load(yaml.safe_dump(s.to_dict())))
    assert again.to_dict() == s.to_dict()
    gs = load_scheme("gene_structure")
    assert LabelScheme.from_dict(gs.to_dict()).to_dict() == gs.to_dict()
    assert gs.kind == "gene_structure" and gs.names[gs.background] == "intergenic"
    for bad, msg in [({**SCHEME, "colour": 1}, "unknown keys"),
                     ({**SCHEME, "background": "x"}, "background 'x'"),
                     ({"labels": [{"name": "gap"}]}, "reserved"),
                     ({"labels": [{"name": "a"}, {"name": "a"}]}, "twice"),
                     ({"labels": [{"name": "a", "color": "300,0,0"}]}, "colour")]:
        with pytest.raises(SemisegError, match=msg):
            LabelScheme.from_dict(bad)
    with pytest.raises(SemisegError, match="neither a file nor a built-in"):
        load_scheme(str(tmp_path / "nope.yaml"))
    with pytest.raises(SemisegError, match="unknown label 'x'"):
        s.index("x")


def test_bed_labels_priority_background_and_mask(tmp_path):
    s = LabelScheme.from_dict(SCHEME)
    bed = tmp_path / "l.bed"
    bed.write_text("track name=x\n# comment\nchr1\t10\t30\trepressed\nchr1\t20\t40\tTss\n"
                   "chr1\t50\t60\tquiet\nchr1\t5\t8\tgap\n")
    ann = read_annotation(bed, s, SIZES)
    x = ann.labels("chr1")
    want = np.full(100, 2)
    want[10:20] = 1
    want[20:40] = 0
    want[5:8] = -1
    np.testing.assert_array_equal(x, want)
    np.testing.assert_array_equal(ann.labels("chr2"), np.full(50, 2))
    np.testing.assert_array_equal(ann.labels("chr1", 15, 25), want[15:25])
    # without a background, unlabelled positions are masked
    masked = LabelScheme.from_dict({**SCHEME, "background": None})
    y = read_annotation(bed, masked, SIZES).labels("chr1")
    want2 = want.copy()
    want2[(want == 2)] = -1
    want2[50:60] = 2
    np.testing.assert_array_equal(y, want2)


@pytest.mark.parametrize("text,msg", [
    ("chr1\t10\t20\tunknownlabel\n", r"l.bed:1: unknown label 'unknownlabel'"),
    ("chr1\t10\t20\tactive\nchr1\tx\t20\tactive\n", r"l.bed:2: start/end must be integers"),
    ("chr1\t10\t200\tactive\n", r"l.bed:1: end 200 is past the end of chr1 \(100 bp\)"),
    ("chr1\t10\t20\n", r"l.bed:1: expected at least 4 columns"),
    ("chr1\t30\t20\tactive\n", r"l.bed:1: bad coordinates"),
    ("1\t10\t20\tactive\n", (r"chromosome names in .*l.bed do not match the FASTA: 1 not in "
                             r"FASTA names \(chr1, chr2\)")),
    ("", r"empty BED"),
])
def test_bed_errors(tmp_path, text, msg):
    bed = tmp_path / "l.bed"
    bed.write_text(text)
    with pytest.raises(SemisegError, match=msg):
        read_annotation(bed, LabelScheme.from_dict(SCHEME), SIZES)


def test_alias_map(tmp_path):
    bed = tmp_path / "l.bed"
    bed.write_text("1\t10\t20\tactive\n")
    ann = read_annotation(bed, LabelScheme.from_dict(SCHEME), SIZES, alias={"1": "chr1"})
    assert (ann.labels("chr1")[10:20] == 0).all()
    bed.write_text("1\t10\t20\tactive\nchrM\t1\t5\trepressed\n")
    with pytest.raises(SemisegError, match="chrM not in FASTA names"):
        read_annotation(bed, LabelScheme.from_dict(SCHEME), SIZES, alias={"1": "chr1"})
    # an empty alias drops a chromosome on purpose
    ann = read_annotation(bed, LabelScheme.from_dict(SCHEME), SIZES,
                          alias={"1": "chr1", "chrM": ""})
    assert (ann.labels("chr1")[10:20] == 0).all()


GFF_SMALL = """##gff-version 3
chr1\tt\tgene\t11\t90\t.\t+\t.\tID=g1
chr1\tt\tmRNA\t11\t90\t.\t+\t.\tID=m1;Parent=g1
chr1\tt\texon\t11\t40\t.\t+\t.\tParent=m1
chr1\tt\texon\t61\t90\t.\t+\t.\tParent=m1
chr1\tt\tCDS\t21\t40\t.\t+\t0\tParent=m1
chr1\tt\tCDS\t61\t80\t.\t+\t1\tParent=m1
chr2\tt\tgene\t5\t20\t.\t-\t.\tID=g2
chr2\tt\tCDS\t5\t10\t.\t-\t0\tParent=g2
chr2\tt\tCDS\t12\t20\t.\t-\t0\tParent=g2
chr2\tt\ttRNA\t30\t40\t.\t-\t.\tID=t1
"""


def test_small_gff_hand_computed(tmp_path):
    p = tmp_path / "a.gff3"
    p.write_text(GFF_SMALL)
    s = load_scheme("gene_structure")
    ann = read_annotation(p, s, SIZES)
    x = ann.labels("chr1")
    want = np.full(100, s.index("intergenic"))
    want[10:20] = s.index("UTR+")
    want[20:40] = s.index("CDS+")
    want[40:60] = s.index("intron+")
    want[60:80] = s.index("CDS+")
    want[80:90] = s.index("UTR+")
    np.testing.assert_array_equal(x, want)
    y = ann.labels("chr2")
    want = np.full(50, s.index("intergenic"))
    want[4:20] = s.index("CDS-")  # 1-bp gap < min_intron stays coding
    want[29:40] = s.index("ncRNA-")
    np.testing.assert_array_equal(y, want)


def test_non_coding_transcript_kinds(tmp_path):
    p = tmp_path / "nc.gff3"
    p.write_text(
        "chr1\tt\tncRNA_gene\t1\t50\t.\t+\t.\tID=g1\n"
        "chr1\tt\tlnc_RNA\t1\t50\t.\t+\t.\tID=l1;Parent=g1\n"
        "chr1\tt\texon\t1\t10\t.\t+\t.\tParent=l1\n"
        "chr1\tt\texon\t41\t50\t.\t+\t.\tParent=l1\n"
        "chr1\tt\tpseudogene\t61\t90\t.\t-\t.\tID=p1\n"
        "chr1\tt\tpseudogenic_transcript\t61\t90\t.\t-\t.\tID=pt1;Parent=p1\n"
        "chr1\tt\texon\t61\t70\t.\t-\t.\tParent=pt1\n"
        "chr1\tt\texon\t81\t90\t.\t-\t.\tParent=pt1\n"
        "chr2\tt\tsnoRNA\t5\t9\t.\t-\t.\tID=s1\n")
    s = load_scheme("gene_structure")
    ann = read_annotation(p, s, SIZES)
    want = np.full(100, s.index("intergenic"))
    want[0:10] = want[40:50] = s.index("ncRNA+")
    want[10:40] = s.index("intron+")
    np.testing.assert_array_equal(ann.labels("chr1"), want)  # pseudogene: unlabelled
    assert (ann.labels("chr2")[4:9] == s.index("ncRNA-")).all()


def test_exon_shared_by_two_transcripts(tmp_path):
    p = tmp_path / "shared.gff3"
    p.write_text(
        "chr1\tt\tgene\t1\t90\t.\t+\t.\tID=g\n"
        "chr1\tt\tmRNA\t1\t90\t.\t+\t.\tID=m1;Parent=g\n"
        "chr1\tt\tmRNA\t1\t60\t.\t+\t.\tID=m2;Parent=g\n"
        "chr1\tt\tCDS\t1\t30\t.\t+\t0\tParent=m1,m2\n"
        "chr1\tt\tCDS\t61\t90\t.\t+\t0\tParent=m1\n"
        "chr1\tt\tCDS\t51\t60\t.\t+\t0\tParent=m2\n")
    s = load_scheme("gene_structure")
    rows, gtf = read_gff_rows(p, SIZES)
    ts = {t.id: t for t in gff_transcripts(rows, gtf, s)}
    assert ts["m1"].introns.tolist() == [[30, 60]]
    assert ts["m2"].introns.tolist() == [[30, 50]]  # needs the shared first CDS row
    x = read_annotation(p, s, SIZES).labels("chr1")
    assert (x[30:50] == s.index("intron+")).all() and (x[50:60] == s.index("CDS+")).all()


def test_gtf(tmp_path):
    p = tmp_path / "a.gtf"
    p.write_text(
        'chr1\tt\texon\t11\t40\t.\t+\t.\tgene_id "g1"; transcript_id "t1";\n'
        'chr1\tt\texon\t61\t90\t.\t+\t.\tgene_id "g1"; transcript_id "t1";\n'
        'chr1\tt\tCDS\t21\t40\t.\t+\t0\tgene_id "g1"; transcript_id "t1";\n'
        'chr1\tt\tCDS\t61\t77\t.\t+\t1\tgene_id "g1"; transcript_id "t1";\n'
        'chr1\tt\tstop_codon\t78\t80\t.\t+\t0\tgene_id "g1"; transcript_id "t1";\n'
        'chr2\tt\texon\t1\t5\t.\t+\t.\tgene_id "g2"; transcript_id "t2"; '
        'transcript_biotype "lncRNA";\n'
        'chr2\tt\texon\t11\t15\t.\t+\t.\tgene_id "g3"; transcript_id "t3"; '
        'transcript_biotype "processed_pseudogene";\n')
    s = load_scheme("gene_structure")
    ann = read_annotation(p, s, SIZES)
    x = ann.labels("chr1")
    assert (x[60:80] == s.index("CDS+")).all() and (x[80:90] == s.index("UTR+")).all()
    y = ann.labels("chr2")
    assert (y[0:5] == s.index("ncRNA+")).all() and (y[10:15] == s.index("intergenic")).all()
    assert (x[40:60] == s.index("intron+")).all()


@pytest.mark.parametrize("line,msg", [
    ("chr1\tt\tCDS\t5\t10\t.\t+\t0\n", r"a.gff3:2: expected 9 tab-separated columns, got 8"),
    ("chr1\tt\tCDS\t5\t500\t.\t+\t0\tParent=x\n", r"a.gff3:2: end 500 is past the end of chr1"),
    ("chr1\tt\tCDS\t0\t10\t.\t+\t0\tID=x\n", r"a.gff3:2: bad coordinates"),
    ("chr1\tt\tCDS\t5\t10\t.\t*\t0\tID=x\n", r"a.gff3:2: strand"),
    ("chr1\tt\tCDS\t5\t10\t.\t+\t0\tParent=nothere\n", r"a.gff3:2: Parent 'nothere'"),
    ("chr1\tt\tCDS\t5\t10\t.\t+\t0\tbroken\n", r"a.gff3:2: attribute 'broken'"),
    ("chrX\tt\tCDS\t5\t10\t.\t+\t0\tID=x\n", r"chrX not in FASTA names \(chr1, chr2\)"),
])
def test_gff_errors(tmp_path, line, msg):
    p = tmp_path / "a.gff3"
    p.write_text("##gff-version 3\n" + line)
    with pytest.raises(SemisegError, match=msg):
        read_annotation(p, load_scheme("gene_structure"), SIZES)


def test_gff_empty_and_unmatched(tmp_path):
    p = tmp_path / "a.gff3"
    p.write_text("##gff-version 3\n\n")
    with pytest.raises(SemisegError, match="empty GFF3"):
        read_annotation(p, load_scheme("gene_structure"), SIZES)
    p.write_text("chr1\tt\tARS\t5\t10\t.\t+\t.\tID=x\n")
    with pytest.raises(SemisegError, match="no feature maps to a label"):
        read_annotation(p, load_scheme("gene_structure"), SIZES)


def test_annotation_intervals_are_resolved():
    s = LabelScheme.from_dict(SCHEME)  # priority active(0) > repressed(1) > quiet(2)
    ann = Annotation({"chr1": ([0, 5, 5, 30, 40], [10, 20, 20, 40, 45], [1, 0, 1, 2, 2])},
                     s, SIZES)
    st, en, lab = ann.intervals("chr1")
    assert (st.tolist(), en.tolist(), lab.tolist()) == ([0, 5, 30], [5, 20, 45], [1, 0, 2])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 25), st.integers(-1, 2)),
                max_size=25),
       st.permutations([0, 1, 2]), st.sampled_from([None, 1]), st.integers(1, 5))
def test_overlaps_resolved_like_a_naive_painter(ivs, order, background, resolution):
    scheme = LabelScheme.from_dict({
        "labels": ["a", "b", "c"], "priority": [["a", "b", "c"][i] for i in order],
        "background": None if background is None else "b"})
    sizes = {"x": 90}
    starts = [s for s, _, _ in ivs]
    ends = [min(90, s + n) for s, n, _ in ivs]
    labs = [lab for _, _, lab in ivs]
    ann = Annotation({"x": (starts, ends, labs)}, scheme, sizes)
    # naive: per position, the covering label of highest priority; masked (-1) beats all
    rank = {lab: -i for i, lab in enumerate(order)}
    rank[-1] = 1
    want = np.full(90, -1 if background is None else 1)
    for p in range(90):
        cover = [lab for s, e, lab in zip(starts, ends, labs) if s <= p < e]
        if cover:
            want[p] = max(cover, key=lambda lab: rank[lab])
    np.testing.assert_array_equal(ann.labels("x"), want)
    np.testing.assert_array_equal(ann.labels("x", 7, 61), want[7:61])
    binned = ann.labels("x", 0, 90, resolution)
    for i, b in enumerate(binned):
        chunk = want[i * resolution:(i + 1) * resolution]
        votes = np.bincount(chunk[chunk >= 0], minlength=3)
        assert b == (-1 if votes.sum() == 0 else votes.argmax())
    s, e, lab = ann.intervals("x")
    assert (s[1:] >= e[:-1]).all() and (e > s).all()
