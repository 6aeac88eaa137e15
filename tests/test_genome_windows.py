import itertools

import pytest

from semiseg.errors import SemisegError
from semiseg.genome import parse_region

SIZES = {"a": 25, "b": 10, "c": 0}


def test_tiling_with_overlap_and_partial_last():
    """train.data.tile (the one tiler; genome's unused make_windows is gone): windows of
    `size` bp with stride size - overlap, the last of a region shorter, windows under
    min_length dropped (oracle: the windows written out by hand)."""
    from semiseg.train.data import tile

    w = tile([("a", 0, 25), ("b", 0, 10)], 10, 3, 1)
    assert [(x.chrom, x.start, x.end) for x in w] == [
        ("a", 0, 10), ("a", 7, 17), ("a", 14, 24), ("a", 21, 25), ("b", 0, 10)]
    w = tile([("a", 3, 12), ("b", 8, 10)], 4, 0, 1)
    assert [(x.chrom, x.start, x.end) for x in w] == [
        ("a", 3, 7), ("a", 7, 11), ("a", 11, 12), ("b", 8, 10)]
    w = tile([("a", 0, 25)], 10, 0, 6)  # the last piece, 5 bp, is under min_length
    assert [(x.start, x.end) for x in w] == [(0, 10), (10, 20)]


def test_parse_region():
    assert parse_region("chr1:1,000-2,000") == ("chr1", 1000, 2000)
    assert parse_region("chr1") == ("chr1", 0, -1)
    with pytest.raises(SemisegError):
        parse_region("chr1:x-y")


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
