import numpy as np
import pytest
from synth import (
    bedgraph_rows,
    write_bam,
    write_bedgraph,
    write_bigwig,
    write_fasta,
)

from semiseg.errors import SemisegError
from semiseg.genome import (
    Annotation,
    GenomeData,
    LabelScheme,
    Track,
    TrackSpec,
    TrackStats,
    fit_track_stats,
)

SIZES = {"c1": 300, "c2": 120}


def _signal(rng, n):
    v = rng.integers(0, 5, n).astype(np.float64)
    v[rng.random(n) < 0.1] = np.nan
    return v


@pytest.fixture
def signals():
    rng = np.random.default_rng(0)
    return {c: _signal(rng, n) for c, n in SIZES.items()}


def test_bigwig_values_with_gaps(tmp_path, signals):
    path = write_bigwig(tmp_path / "s.bw", SIZES, signals)
    tr = Track(TrackSpec("s", path), SIZES)
    assert tr.spec.kind == "bigwig"
    for c in SIZES:
        np.testing.assert_array_equal(tr.values(c), signals[c].astype(np.float32))
    np.testing.assert_array_equal(tr.values("c1", 17, 45), signals["c1"][17:45])


def test_bedgraph_values_and_absent_chromosome(tmp_path, signals):
    path = write_bedgraph(tmp_path / "s.bedgraph", bedgraph_rows("c1", signals["c1"]))
    tr = Track(TrackSpec("s", path), SIZES)
    np.testing.assert_array_equal(tr.values("c1"), signals["c1"])
    np.testing.assert_array_equal(tr.values("c1", 33, 34), signals["c1"][33:34])
    assert np.isnan(tr.values("c2")).all()  # chromosome absent from the file -> missing


@pytest.mark.parametrize("rows,msg", [
    ([("c1", 10, 20, 1), ("c1", 5, 8, 1)], r"s.bedgraph:2: unsorted or overlapping"),
    ([("c1", 10, 20, 1), ("c2", 0, 5, 1), ("c1", 30, 40, 1)], r"s.bedgraph:3: unsorted"),
    ([("c1", 10, 400, 1)], r"past the end of c1"),
    ([("chr1", 10, 20, 1)], r"has no chromosome of the FASTA: file has chr1; FASTA has c1, c2"),
    ([], r"is empty"),
])
def test_bedgraph_errors(tmp_path, rows, msg):
    path = write_bedgraph(tmp_path / "s.bedgraph", rows)
    with pytest.raises(SemisegError, match=msg):
        Track(TrackSpec("s", path), SIZES)


def test_files_of_the_wrong_kind(tmp_path):
    (tmp_path / "x.bw").write_text("chr1\t0\t10\t1\n")
    with pytest.raises(SemisegError, match="is not a bigWig"):
        Track(TrackSpec("x", tmp_path / "x.bw"), SIZES)
    (tmp_path / "x.bam").write_text("not a bam\n")
    with pytest.raises(SemisegError, match="cannot read BAM"):
        Track(TrackSpec("x", tmp_path / "x.bam"), SIZES)
    with pytest.raises(SemisegError, match="file not found"):
        Track(TrackSpec("x", tmp_path / "nothere.bw"), SIZES)


def test_track_spec_checks(tmp_path):
    with pytest.raises(SemisegError, match="cannot tell the type"):
        TrackSpec("x", "a.txt")
    with pytest.raises(SemisegError, match="transform"):
        TrackSpec("x", "a.bw", transform="log2")
    with pytest.raises(SemisegError, match="BAM tracks only"):
        TrackSpec("x", "a.bw", mapq=10)
    spec = TrackSpec("x", "a.bam", mapq=5, strand="-", transform="log1p")
    assert TrackSpec.from_dict(spec.to_dict()) == spec


def test_bam_coverage_hand_computed(tmp_path):
    reads = [
        ("c1", 10, "20M", False, 30, False),       # 10-30
        ("c1", 15, "5M10N5M", True, 30, False),    # 15-20, 30-35 (spliced)
        ("c1", 12, "10M", False, 2, False),        # low mapq
        ("c1", 40, "10M", True, 60, True),         # duplicate
        ("c2", 0, "4M2D4M", True, 60, False),      # 0-4, 6-10 (deletion not covered)
    ]
    path = write_bam(tmp_path / "r.bam", SIZES, reads)
    tr = Track(TrackSpec("all", path, mapq=10), SIZES)
    want = np.zeros(300)
    want[10:30] += 1
    want[15:20] += 1
    want[30:35] += 1
    np.testing.assert_array_equal(tr.values("c1"), want)
    np.testing.assert_array_equal(tr.values("c1", 14, 31), want[14:31])
    want2 = np.zeros(120)
    want2[0:4] = want2[6:10] = 1
    np.testing.assert_array_equal(tr.values("c2"), want2)
    minus = Track(TrackSpec("m", path, mapq=10, strand="-"), SIZES).values("c1")
    want_m = np.zeros(300)
    want_m[15:20] = want_m[30:35] = 1
    np.testing.assert_array_equal(minus, want_m)
    lowq = Track(TrackSpec("q", path, mapq=0), SIZES).values("c1")
    assert lowq[12:22].tolist() == (want[12:22] + 1).tolist()


def test_bam_index_is_built_and_chrom_mismatch(tmp_path):
    path = write_bam(tmp_path / "r.bam", SIZES, [("c1", 0, "5M", False, 60, False)], index=False)
    assert Track(TrackSpec("r", path), SIZES).values("c1")[:6].tolist() == [1] * 5 + [0]
    other = write_bam(tmp_path / "o.bam", {"1": 300}, [("1", 0, "5M", False, 60, False)])
    with pytest.raises(SemisegError, match="file has 1; FASTA has c1, c2"):
        Track(TrackSpec("o", other), SIZES)
    tr = Track(TrackSpec("o", other), SIZES, alias={"1": "c1"})
    assert tr.values("c1")[:5].tolist() == [1] * 5 and np.isnan(tr.values("c2")).all()
    wrong = write_bam(tmp_path / "w.bam", {"c1": 301}, [("c1", 0, "5M", False, 60, False)])
    with pytest.raises(SemisegError, match="another assembly"):
        Track(TrackSpec("w", wrong), SIZES)


def test_stats_and_transforms(tmp_path, signals):
    path = write_bigwig(tmp_path / "s.bw", SIZES, signals)
    for kind, f in [("none", lambda x: x), ("log1p", np.log1p), ("arcsinh", np.arcsinh)]:
        tr = Track(TrackSpec("s", path, transform=kind), SIZES)
        stats = fit_track_stats([tr], ["c1"], chunk=64)
        v = f(signals["c1"][~np.isnan(signals["c1"])])
        assert stats.mean[0] == pytest.approx(v.mean())
        assert stats.std[0] == pytest.approx(v.std())
        assert TrackStats.from_dict(stats.to_dict()) == stats
    empty = write_bigwig(tmp_path / "e.bw", SIZES, {"c2": np.ones(120)})
    with pytest.raises(SemisegError, match="no values on the training chromosomes"):
        fit_track_stats([Track(TrackSpec("e", empty), SIZES)], ["c1"])


@pytest.fixture
def genome(tmp_path, signals):
    rng = np.random.default_rng(5)
    seqs = {c: "".join(rng.choice(list("ACGTNacgt"), n)) for c, n in SIZES.items()}
    fasta = write_fasta(tmp_path / "g.fa", seqs)
    bw = write_bigwig(tmp_path / "s.bw", SIZES, signals)
    bg = write_bedgraph(tmp_path / "t.bedGraph", bedgraph_rows("c1", signals["c1"] * 2))
    return seqs, fasta, bw, bg


@pytest.mark.parametrize("resolution", [1, 7])
def test_genome_data_load(genome, signals, resolution):
    seqs, fasta, bw, bg = genome
    scheme = LabelScheme.from_dict({"labels": ["a", "b"], "background": "a"})
    ann = Annotation({"c1": ([20], [90], [1])}, scheme, SIZES)
    tracks = [TrackSpec("s", bw, transform="log1p"), {"name": "t", "path": bg}]
    with GenomeData(fasta, tracks, ann, resolution=resolution, softmask=True) as data:
        assert data.feature_names == ["A", "C", "G", "T", "softmask", "s", "t",
                                      "s.missing", "t.missing"]
        stats = data.fit_stats(["c1"])
        x, y = data.load("c1", 10, 110)
        t = -(-100 // resolution)
        assert x.shape == (t, 9) and x.dtype == np.float32 and y.dtype == np.int64
        # independent per-bp computation, then bin means
        seq = seqs["c1"][10:110]
        raw_s = np.log1p(signals["c1"][10:110])
        raw_t = signals["c1"][10:110] * 2
        cols = [[float(c.upper() == b) for c in seq] for b in "ACGT"]
        cols.append([float(c.islower()) for c in seq])
        for raw, m, sd in [(raw_s, stats.mean[0], stats.std[0]),
                           (raw_t, stats.mean[1], stats.std[1])]:
            cols.append(np.where(np.isnan(raw), 0, (raw - m) / sd))
        cols += [np.isnan(raw_s).astype(float), np.isnan(raw_t).astype(float)]
        per_bp = np.array(cols).T
        want = np.array([per_bp[i:i + resolution].mean(0) for i in range(0, 100, resolution)])
        np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-5)
        bp = np.zeros(100, int)
        bp[10:80] = 1
        want_y = [np.bincount(bp[i:i + resolution], minlength=2).argmax()
                  for i in range(0, 100, resolution)]
        assert y.tolist() == want_y
        # the checkpoint config rebuilds the same features
        again = GenomeData.from_config(data.config())
        np.testing.assert_array_equal(again.load("c1", 10, 110)[0], x)
        again.close()


def test_genome_data_errors(genome):
    _, fasta, bw, bg = genome
    with pytest.raises(SemisegError, match="unique"):
        GenomeData(fasta, [TrackSpec("s", bw), TrackSpec("s", bg)])
    with GenomeData(fasta, [TrackSpec("s", bw)]) as data:
        with pytest.raises(SemisegError, match="statistics are for tracks"):
            data.set_stats(TrackStats(["x"], [0.0], [1.0]))
        x, y = data.load("c2", 0, 120)
        assert x.shape == (120, 6) and (y == -1).all()
        with pytest.raises(ValueError):
            data.load("c2", 0, 121)
