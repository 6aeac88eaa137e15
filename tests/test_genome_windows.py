import itertools

import pytest

from semiseg.errors import SemisegError
from semiseg.genome import Fasta, Window, make_windows, parse_region, split_windows
from semiseg.genome.synth import write_fasta

SIZES = {"a": 25, "b": 10, "c": 0}


def test_tiling_with_overlap_and_partial_last():
    w = make_windows(SIZES, size=10, overlap=3)
    assert [(x.chrom, x.start, x.end, x.length) for x in w] == [
        ("a", 0, 10, 10), ("a", 7, 17, 10), ("a", 14, 24, 10), ("a", 21, 25, 4),
        ("b", 0, 10, 10),
    ]
    # windows cover every position; consecutive windows overlap by exactly `overlap`
    for x, y in zip(w[:3], w[1:4]):
        assert x.end - y.start == 3
    assert make_windows(SIZES, 30, chroms=["a"]) == [Window("a", 0, 25, 25)]


def test_regions_and_errors():
    w = make_windows(SIZES, 4, regions=[("a", 3, 12), ("b", 8, 10)])
    assert [(x.chrom, x.start, x.end) for x in w] == [
        ("a", 3, 7), ("a", 7, 11), ("a", 11, 12), ("b", 8, 10)]
    with pytest.raises(SemisegError, match="outside a"):
        make_windows(SIZES, 4, regions=[("a", 3, 40)])
    with pytest.raises(SemisegError, match="chromosome x is not in the FASTA"):
        make_windows(SIZES, 4, regions=[("x", 0, 4)])
    with pytest.raises(SemisegError, match="not in the FASTA"):
        make_windows(SIZES, 4, chroms=["chrA"])
    with pytest.raises(ValueError):
        make_windows(SIZES, 4, overlap=4)
    assert parse_region("chr1:1,000-2,000") == ("chr1", 1000, 2000)
    with pytest.raises(SemisegError):
        parse_region("chr1:x-y")


def test_all_n_windows_skipped(tmp_path):
    seq = "ACGT" * 3 + "N" * 20 + "nnAC" + "N" * 6
    path = write_fasta(tmp_path / "g.fa", {"x": seq})
    with Fasta(path) as fa:
        w = make_windows(fa.chrom_sizes, 8, fasta=fa)
    # windows: 0-8 ok, 8-16 mixed, 16-24 all N (skipped), 24-32 (N+nn) skipped,
    # 32-40 has AC at 34-36, 40-42 all N skipped
    assert [(x.start, x.end) for x in w] == [(0, 8), (8, 16), (32, 40)]


def test_split_by_chrom_and_region():
    w = make_windows({"a": 40, "b": 20, "c": 20}, 10)
    s = split_windows(w, valid=["b"], test=["c"])
    assert {x.chrom for x in s["train"]} == {"a"} and len(s["valid"]) == 2 and len(s["test"]) == 2
    with pytest.raises(SemisegError, match="both valid and test"):
        split_windows(w, valid=["b"], test=["b"])
    with pytest.raises(SemisegError, match="have no windows"):
        split_windows(w, valid=["z"])
    r = split_windows(w, valid=[("a", 10, 20)], test=[("a", 25, 40)], by="region")
    assert [(x.start, x.end) for x in r["valid"]] == [(10, 20)]
    assert [(x.start, x.end) for x in r["test"]] == [(30, 40)]
    # window 20-30 straddles the test region: dropped, not leaked into train
    assert [(x.chrom, x.start) for x in r["train"]] == [("a", 0), ("b", 0), ("b", 10),
                                                         ("c", 0), ("c", 10)]


def test_validation_block_at_the_end_or_at_an_offset():
    """windows.valid_fraction holds out the last part of each chromosome; with
    windows.valid_offset the block starts there instead (cross-validation folds), the
    training regions are what is left on either side, and every base is in exactly one."""
    from semiseg.config.load import load_config
    from semiseg.train.data import split_regions

    sizes = {"a": 1000, "b": 400}

    def split(*sets):
        return split_regions(load_config(None, list(sets)), sizes)

    train, valid = split("windows.valid_fraction=0.25")
    assert valid == [("a", 750, 1000), ("b", 300, 400)]
    assert train == [("a", 0, 750), ("b", 0, 300)]
    train, valid = split("windows.valid_fraction=0.25", "windows.valid_offset=0.5")
    assert valid == [("a", 500, 750), ("b", 200, 300)]
    assert train == [("a", 0, 500), ("a", 750, 1000), ("b", 0, 200), ("b", 300, 400)]
    train, valid = split("windows.valid_fraction=0.25", "windows.valid_offset=0")
    assert valid == [("a", 0, 250), ("b", 0, 100)] and train[0] == ("a", 250, 1000)
    for off in (0.0, 0.1, 0.5, 0.75):  # a partition of every chromosome
        train, valid = split("windows.valid_fraction=0.25", f"windows.valid_offset={off}")
        for c, n in sizes.items():
            cover = sorted((s, e) for cc, s, e in train + valid if cc == c)
            assert cover[0][0] == 0 and cover[-1][1] == n
            assert all(x[1] == y[0] for x, y in itertools.pairwise(cover))
    assert split("windows.valid_fraction=0")[1] == []
    with pytest.raises(SemisegError, match="windows.valid_offset"):
        split("windows.valid_fraction=0.25", "windows.valid_offset=0.8")
