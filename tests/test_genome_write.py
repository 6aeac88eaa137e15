import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semiseg.genome import (
    Fasta,
    LabelScheme,
    OutputWriter,
    labels_to_segments,
    load_scheme,
    read_annotation,
    read_bedgraph,
    read_bigwig,
    write_outputs,
)

YEAST = os.path.join(os.path.dirname(__file__), "..", "data", "yeast")
SCHEME = LabelScheme.from_dict({
    "name": "toy",
    "labels": [{"name": "low", "color": "10,20,30"},
               {"name": "high", "color": "200,0,0", "strand": "+"},
               {"name": "mid", "color": "0,200,0"}],
})
SIZES = {"c1": 100, "c2": 30}


def test_labels_to_segments():
    seg = labels_to_segments(np.array([0, 0, 1, 1, 1, 0]), start=10, resolution=5, end=38)
    assert seg.tolist() == [[10, 20, 0], [20, 35, 1], [35, 38, 0]]
    with pytest.raises(ValueError):
        labels_to_segments(np.array([0, 1]), start=0, resolution=5, end=11)


def _files(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir())


def test_bed9_round_trip_scores_gaps_and_headers(tmp_path):
    # unmerged input: two adjacent 'high' segments must come out as one
    seg = np.array([[0, 10, 0], [10, 30, 1], [30, 50, 1], [50, 100, 2]])
    post = np.zeros((100, 3), np.float32)
    post[:, 0] = 0.25
    post[10:50, 1] = np.linspace(0, 1, 40)
    post[50:, 2] = 0.5
    gaps = np.array([[60, 70]])
    with OutputWriter(tmp_path / "o", SCHEME, SIZES, formats=("bed",), version="9.9",
                      model_hash="h123") as w:
        w.add("c1", seg, post, gaps=gaps)
        w.add("c2", np.array([[0, 30, 0]]))
    assert _files(tmp_path) == ["o.bed", "o.browser.bed"]
    lines = (tmp_path / "o.bed").read_text().splitlines()
    # plain BED9, no header: the provenance is in the browser BED's track line
    assert not any(line.startswith(("#", "track", "browser")) for line in lines)
    rows = [line.split("\t") for line in lines]
    assert all(len(r) == 9 for r in rows)
    got = [(r[0], int(r[1]), int(r[2]), r[3], int(r[4]), r[5], int(r[6]), int(r[7]), r[8])
           for r in rows]
    high = round(1000 * np.linspace(0, 1, 40).mean())
    assert got == [
        ("c1", 0, 10, "low", 250, ".", 0, 10, "10,20,30"),
        ("c1", 10, 50, "high", high, "+", 10, 50, "200,0,0"),
        ("c1", 50, 60, "mid", 500, ".", 50, 60, "0,200,0"),
        ("c1", 60, 70, "gap", 0, ".", 60, 70, "0,0,0"),
        ("c1", 70, 100, "mid", 500, ".", 70, 100, "0,200,0"),
        ("c2", 0, 30, "low", 0, ".", 0, 30, "10,20,30"),
    ]
    browser = (tmp_path / "o.browser.bed").read_text().splitlines()
    assert browser[0].startswith("track ") and 'itemRgb="On"' in browser[0]
    assert 'description="semiseg 9.9 model=h123 scheme=' in browser[0]
    assert browser[1:] == lines
    back = read_annotation(tmp_path / "o.bed", SCHEME, SIZES)
    want = np.repeat([0, 1, 2, -1, 2], [10, 40, 10, 10, 30])
    np.testing.assert_array_equal(back.labels("c1"), want)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=60), st.integers(1, 4))
def test_random_segments_round_trip_bed_and_gff(tmp_path_factory, labels, resolution):
    tmp = tmp_path_factory.mktemp("rt")
    size = len(labels) * resolution - (resolution - 1 if resolution > 1 else 0)
    sizes = {"x": size}
    seg = labels_to_segments(np.array(labels), 0, resolution, end=size)
    write_outputs(tmp / "o", SCHEME, sizes, {"x": seg}, formats=("bed", "gff3"),
                  resolution=resolution)
    per_bp = np.repeat(labels, resolution)[:size]
    for ext in ("bed", "gff3"):
        back = read_annotation(tmp / f"o.{ext}", SCHEME, sizes)
        np.testing.assert_array_equal(back.labels("x"), per_bp)


GENE_SEGMENTS = [  # (start, end, label) -- gene-structure scheme names
    (0, 10, "intergenic"), (10, 20, "UTR+"), (20, 41, "CDS+"), (41, 60, "intron+"),
    (60, 79, "CDS+"), (79, 90, "UTR+"), (90, 100, "intergenic"),
    (100, 130, "CDS-"), (130, 160, "intron-"), (160, 175, "CDS-"), (175, 180, "intergenic"),
    (180, 190, "ncRNA+"), (190, 220, "intron+"), (220, 230, "ncRNA+"),
    (230, 240, "intergenic"), (240, 270, "intron-"), (270, 300, "intergenic"),
]


def _gene_segments(scheme):
    return np.array([(a, b, scheme.index(n)) for a, b, n in GENE_SEGMENTS])


def test_gff3_gene_structure_round_trip_and_phase(tmp_path):
    scheme = load_scheme("gene_structure")
    sizes = {"chrA": 300}
    seg = _gene_segments(scheme)
    write_outputs(tmp_path / "g", scheme, sizes, {"chrA": seg}, formats=("gff3",))
    text = (tmp_path / "g.gff3").read_text()
    lines = text.splitlines()
    assert lines[0] == "##gff-version 3" and lines[1] == "##sequence-region chrA 1 300"
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    types = [r[2] for r in rows]
    assert types.count("gene") == 2 and types.count("mRNA") == 2
    assert types.count("ncRNA_gene") == 1 and types.count("ncRNA") == 1
    cds = [(int(r[3]), int(r[4]), r[6], r[7]) for r in rows if r[2] == "CDS"]
    # + gene: CDS 21..41 (21 bp, phase 0), 61..79 (phase 0 after 21 bp);
    # - gene read 3'->5': CDS 161..175 (15 bp, phase 0) then 101..130 (phase 0)
    assert cds == [(21, 41, "+", "0"), (61, 79, "+", "0"), (101, 130, "-", "0"),
                   (161, 175, "-", "0")]
    utr = [(r[2], int(r[3]), int(r[4])) for r in rows if "UTR" in r[2]]
    assert utr == [("five_prime_UTR", 11, 20), ("three_prime_UTR", 80, 90)]
    ids = [dict(kv.split("=") for kv in r[8].split(";"))["ID"] for r in rows]
    assert all(i.startswith("chrA:") for i in ids)
    # IDs are unique but for the CDS rows of one transcript, which share one (GFF3)
    other = [i for r, i in zip(rows, ids) if r[2] != "CDS"]
    assert len(other) == len(set(other))
    cds_ids = [i for r, i in zip(rows, ids) if r[2] == "CDS"]
    assert cds_ids == ["chrA:gene1.t1.cds"] * 2 + ["chrA:gene2.t1.cds"] * 2
    back = read_annotation(tmp_path / "g.gff3", scheme, sizes)
    want = np.repeat(seg[:, 2], seg[:, 1] - seg[:, 0])
    np.testing.assert_array_equal(back.labels("chrA"), want)


def test_gff3_phase_with_partial_codons(tmp_path):
    scheme = load_scheme("gene_structure")
    names = [(0, 5, "intergenic"), (5, 15, "CDS+"), (15, 45, "intron+"), (45, 56, "CDS+"),
             (56, 80, "intron+"), (80, 86, "CDS+"), (86, 100, "intergenic")]
    seg = np.array([(a, b, scheme.index(n)) for a, b, n in names])
    write_outputs(tmp_path / "p", scheme, {"z": 100}, {"z": seg}, formats=("gff3",))
    rows = [r.split("\t") for r in (tmp_path / "p.gff3").read_text().splitlines()
            if not r.startswith("#")]
    # 10 bp (phase 0), then 1 leftover -> next starts with 2 bases to skip, 10+11=21 -> 0
    assert [r[7] for r in rows if r[2] == "CDS"] == ["0", "2", "0"]


def _gff_rows(path) -> list[list[str]]:
    return [r.split("\t") for r in path.read_text().splitlines() if not r.startswith("#")]


def _partial_genes(rows) -> list[tuple]:
    """(start, end, partial, start_range, end_range) of each gene row."""
    genes = [(int(r[3]), int(r[4]), dict(kv.split("=") for kv in r[8].split(";")))
             for r in rows if r[2] == "gene"]
    return [(a, b, g.get("partial"), g.get("start_range"), g.get("end_range"))
            for a, b, g in genes]


def test_gff3_gene_cut_by_an_intron_at_a_sequence_end_is_partial(tmp_path):
    """A gene whose last exon is followed by an intron of its strand running to the
    sequence's end (or a gap), or whose first exon follows one running from the start,
    is cut there: partial, with the open side's range; an intron of the other strand, or
    one followed by intergenic sequence, does not make it partial."""
    scheme = load_scheme("gene_structure")
    names = [(0, 8, "intron+"), (8, 20, "CDS+"), (20, 30, "intergenic"),
             (30, 42, "CDS+"), (42, 50, "intron+"), (50, 55, "intergenic"),
             (55, 67, "CDS-"), (67, 75, "intron+"), (75, 80, "intergenic"),
             (80, 92, "CDS-"), (92, 100, "intron-")]
    seg = np.array([(a, b, scheme.index(n)) for a, b, n in names])
    for gap in (False, True):
        if gap:  # the same structure before a gap (label -1) instead of the end
            seg = np.concatenate([seg, [(100, 110, -1)]])
        write_outputs(tmp_path / f"p{gap}", scheme, {"z": 110 if gap else 100}, {"z": seg},
                      formats=("gff3",))
        rows = _gff_rows(tmp_path / f"p{gap}.gff3")
        assert _partial_genes(rows) == [(9, 20, "true", ".,9", None),
                                       (31, 42, None, None, None),
                                       (56, 67, None, None, None),
                                       (81, 92, "true", None, "92,.")]


def test_gff3_partial_genes_at_chromosome_ends(tmp_path):
    """A gene that runs into a chromosome end is marked partial (NCBI's attributes), and
    when its 5' end is the cut one its CDS phases count codons from the whole 3' end."""
    scheme = load_scheme("gene_structure")
    names = [(0, 10, "CDS+"), (10, 20, "intron+"), (20, 30, "CDS+"), (30, 40, "intergenic"),
             (40, 52, "CDS+"), (52, 60, "intergenic"),
             (60, 74, "CDS-"), (74, 90, "intron-"), (90, 100, "CDS-")]
    seg = np.array([(a, b, scheme.index(n)) for a, b, n in names])
    write_outputs(tmp_path / "p", scheme, {"z": 100}, {"z": seg}, formats=("gff3",))
    rows = _gff_rows(tmp_path / "p.gff3")
    assert _partial_genes(rows) == [(1, 30, "true", ".,1", None),
                                    (41, 52, None, None, None),
                                    (61, 100, "true", None, "100,.")]
    mrna = [dict(kv.split("=") for kv in r[8].split(";")) for r in rows if r[2] == "mRNA"]
    assert [m.get("partial") for m in mrna] == ["true", None, "true"]

    def oracle(parts, strand):  # 5'-cut genes: codons end where the CDS ends
        order = parts if strand == "+" else parts[::-1]
        total = sum(b - a for a, b in order)
        starts = [p for p in range(total) if (total - p) % 3 == 0]
        out, done = {}, 0
        for a, b in order:
            out[(a + 1, b)] = str(min(q for q in starts + [total + 3] if q >= done) - done)
            done += b - a
        return out

    want = {**oracle([(0, 10), (20, 30)], "+"), (41, 52): "0",
            **oracle([(60, 74), (90, 100)], "-")}
    got = {(int(r[3]), int(r[4])): r[7] for r in rows if r[2] == "CDS"}
    assert got == want
    assert want[(1, 10)] == "2" and want[(91, 100)] == "0"  # the oracle itself, by hand


def test_ids_unique_across_concatenated_outputs(tmp_path):
    scheme = load_scheme("gene_structure")
    sizes = {"chrA": 300, "chrB": 300}
    seg = _gene_segments(scheme)
    ids = []
    for chrom in sizes:  # one run per chromosome, outputs concatenated
        write_outputs(tmp_path / chrom, scheme, sizes, {chrom: seg}, formats=("gff3",))
        for line in (tmp_path / f"{chrom}.gff3").read_text().splitlines():
            if not line.startswith("#") and line.split("\t")[2] != "CDS":
                ids.append(line.split("\t")[8].split(";")[0])
    # (the CDS rows of one transcript share one ID: test_gene_outputs.py)
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("resolution", [1, 3])
def test_bigwig_and_bedgraph_round_trip(tmp_path, resolution):
    sizes = {"c1": 100, "c2": 31}
    rng = np.random.default_rng(3)
    post, bnd, segs = {}, {}, {}
    for c, n in sizes.items():
        t = -(-n // resolution)
        p = rng.random((t, 3)).astype(np.float32)
        post[c] = p / p.sum(1, keepdims=True)
        bnd[c] = rng.random(t).astype(np.float32)
        segs[c] = labels_to_segments(post[c].argmax(1), 0, resolution, end=n)
    gaps = {"c1": np.array([[40, 52]]), "c2": np.zeros((0, 2))}
    with OutputWriter(tmp_path / "s", SCHEME, sizes, resolution=resolution,
                      formats=("bigwig", "bedgraph")) as w:
        for c in sizes:
            w.add(c, segs[c], post[c], bnd[c], gaps=gaps[c])
    for c, n in sizes.items():
        bad = np.zeros(n, bool)
        for a, b in gaps[c]:
            # a bin touching a gap has no entry
            bad[(a // resolution) * resolution: -(-b // resolution) * resolution] = True
        for key, values in [(f"posterior.{name}", post[c][:, i])
                            for i, name in enumerate(SCHEME.names)] + [("boundary", bnd[c])]:
            want = np.repeat(values, resolution)[:n].astype(np.float32)
            want[bad] = np.nan
            got = read_bigwig(tmp_path / f"s.{key}.bw", c, 0, n)
            np.testing.assert_array_equal(got, want)
            got_bg = read_bedgraph(tmp_path / f"s.{key}.bedGraph", sizes, c, 0, n)
            np.testing.assert_allclose(got_bg, want, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("resolution", [1, 3])
@pytest.mark.parametrize("noisy", [False, True])
def test_signal_precision_rounds_and_merges_runs(tmp_path, resolution, noisy):
    """With signal_precision p every value reads back as the nearest multiple of p; flat
    stretches become one entry per run (counted here from the rounded values), a track
    that changes at every step stays one value per step."""
    import pyBigWig

    p = 0.01
    n = 2000
    sizes = {"c1": n * resolution - resolution // 2}  # at 3 bp the last step is shorter
    rng = np.random.default_rng(5)
    level = np.repeat(rng.random(n // 100), 100)
    values = (level + rng.normal(0, 0.3 if noisy else 1e-4, n)).astype(np.float32)
    segs = labels_to_segments(np.zeros(n, int), 0, resolution, end=sizes["c1"])
    post = np.tile(values[:, None], (1, 3))
    with OutputWriter(tmp_path / "q", SCHEME, sizes, resolution=resolution,
                      formats=("bigwig", "bedgraph"), signal_precision=p) as w:
        w.add("c1", segs, post, values, gaps=np.zeros((0, 2)))
    want_steps = np.array([round(float(x) * 100) / 100 for x in values])
    want = np.repeat(want_steps, resolution)[:sizes["c1"]].astype(np.float32)
    got = read_bigwig(tmp_path / "q.boundary.bw", "c1", 0, sizes["c1"])
    np.testing.assert_array_equal(got, want)
    got_bg = read_bedgraph(tmp_path / "q.boundary.bedGraph", sizes, "c1", 0, sizes["c1"])
    np.testing.assert_allclose(got_bg, want, rtol=1e-6)
    runs = 1 + sum(want_steps[i] != want_steps[i - 1] for i in range(1, n))
    bw = pyBigWig.open(str(tmp_path / "q.boundary.bw"))
    entries = len(bw.intervals("c1"))
    bw.close()
    assert entries == (n if noisy else runs)
    assert noisy or runs < n / 8


def test_signal_precision_must_be_a_number_at_least_zero(tmp_path):
    from semiseg.errors import SemisegError

    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(SemisegError, match="signal precision"):
            OutputWriter(tmp_path / "b", SCHEME, SIZES, signal_precision=bad)
    assert not list(tmp_path.iterdir())


def test_yeast_annotation_round_trip_through_every_format(tmp_path):
    scheme = load_scheme("gene_structure")
    with Fasta([os.path.join(YEAST, "chrI.fa"), os.path.join(YEAST, "chrII.fa")]) as fa:
        ann = read_annotation(os.path.join(YEAST, "yeast_chrI_chrII.gff3"), scheme,
                              fa.chrom_sizes)
        segs = {c: labels_to_segments(ann.labels(c)) for c in fa.chrom_sizes}
        write_outputs(tmp_path / "y", scheme, fa.chrom_sizes, segs, formats=("bed", "gff3"),
                      fasta=fa)
        for ext in ("bed", "gff3"):
            back = read_annotation(tmp_path / f"y.{ext}", scheme, fa.chrom_sizes)
            for c in fa.chrom_sizes:
                np.testing.assert_array_equal(back.labels(c), ann.labels(c))


def test_chromosome_without_posteriors_has_no_signal(tmp_path):
    with OutputWriter(tmp_path / "z", SCHEME, {"x": 100, "y": 0},
                      formats=("bigwig", "bedgraph")) as w:
        w.add("x", np.array([[0, 100, 0]]))
    assert np.isnan(read_bigwig(tmp_path / "z.boundary.bw", "x", 0, 5)).all()
    assert (tmp_path / "z.boundary.bedGraph").read_text() == ""


def test_range_of_a_chromosome(tmp_path):
    bnd = np.linspace(0, 1, 11).astype(np.float32)
    with OutputWriter(tmp_path / "r", SCHEME, {"x": 100}, resolution=3,
                      formats=("bigwig", "bed")) as w:
        w.add("x", np.array([[30, 61, 1]]), np.full((11, 3), 0.5, np.float32), bnd)
    rows = [r for r in (tmp_path / "r.bed").read_text().splitlines() if not r.startswith("#")]
    assert rows == ["x\t30\t61\thigh\t500\t+\t30\t61\t200,0,0"]
    got = read_bigwig(tmp_path / "r.boundary.bw", "x", 25, 65)
    want = np.full(40, np.nan, np.float32)
    want[5:36] = np.repeat(bnd, 3)[:31]
    np.testing.assert_array_equal(got, want)


def test_no_partial_output_on_error(tmp_path):
    with pytest.raises(ValueError, match="contiguous"):
        with OutputWriter(tmp_path / "e", SCHEME, SIZES, formats=("bed", "gff3", "bigwig",
                                                                   "bedgraph")) as w:
            w.add("c1", np.array([[0, 100, 0]]), np.full((100, 3), 1 / 3, np.float32))
            w.add("c2", np.array([[0, 10, 0], [12, 30, 1]]))
    assert _files(tmp_path) == []
    with pytest.raises(RuntimeError), OutputWriter(tmp_path / "e", SCHEME, SIZES) as w:
        w.add("c1", np.array([[0, 100, 0]]))
        raise RuntimeError("interrupted")
    assert _files(tmp_path) == []


@pytest.mark.parametrize("call,msg", [
    (lambda w: w.add("c2", np.array([[0, 30, 0]])) or w.add("c1", np.array([[0, 100, 0]])),
     "order"),
    (lambda w: w.add("c1", np.array([[0, 101, 0]])), "outside"),
    (lambda w: w.add("c1", np.array([[0, 100, 3]])), "labels must be in"),
    (lambda w: w.add("c1", np.array([[0, 100, 0]]), np.zeros((99, 3))), "posteriors must be"),
    (lambda w: w.add("cX", np.array([[0, 100, 0]])), "not in chrom_sizes"),
])
def test_writer_argument_checks(tmp_path, call, msg):
    with pytest.raises(ValueError, match=msg):
        with OutputWriter(tmp_path / "a", SCHEME, SIZES, formats=("bed",)) as w:
            call(w)
    assert _files(tmp_path) == []


def test_silenced_stderr_hides_only_the_block(capfd):
    """What C code writes to file descriptor 2 inside the block (libBigWig's close of an
    aborted set) is gone; what is written before and after reaches stderr, and fd 2 is
    the same file after."""
    import os

    from semiseg.genome._util import silenced_stderr

    before = os.fstat(2)
    os.write(2, b"before\n")
    with silenced_stderr():
        os.write(2, b"[bwClose] There was an error\n")
    os.write(2, b"after\n")
    after = os.fstat(2)
    assert capfd.readouterr().err == "before\nafter\n"
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)
