"""Segmentation.segments from `viterbi`: per-sequence SegmentLists that behave as the
lists of (start, duration, label) tuples (the contract), checked against segments rebuilt
in plain Python from the per-position labels and segment starts."""

import json

import numpy as np
import pytest
import torch

from semiseg.crf import viterbi
from semiseg.crf.dispatch import SegmentList


def _walk(labels, starts, n):
    """The segments of one sequence from its labels and start flags, by hand."""
    out = []
    for t in range(n):
        if starts[t]:
            out.append([t, 0, int(labels[t])])
        out[-1][1] += 1
    return [tuple(s) for s in out]


@pytest.fixture(params=["host", "device"])
def rows_on(request, monkeypatch):
    """Both ways of forming the rows (dispatch._segment_lists), each on CPU tensors."""
    from semiseg.crf import dispatch

    monkeypatch.setattr(dispatch, "SEGMENTS_ON_DEVICE", request.param == "device")
    return request.param


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_segments_are_the_walked_segments(backend, rows_on):
    if backend == "numba":
        pytest.importorskip("numba")
    g = torch.Generator().manual_seed(3)
    B, T, K, C = 4, 40, 6, 3
    scores = torch.randn(B, T, C, generator=g, dtype=torch.float64) * 2
    tr = torch.randn(C, C, generator=g, dtype=torch.float64)
    db = torch.randn(K, C, generator=g, dtype=torch.float64)
    lengths = torch.tensor([40, 17, 1, 33])
    allowed = torch.ones(B, T, C, dtype=torch.bool)
    allowed[3] = False  # no segmentation at all for the last sequence
    seg = viterbi(scores, tr, db, lengths, allowed=allowed, backend=backend)
    for b in range(B):
        want = [] if b == 3 else _walk(seg.labels[b].tolist(), seg._starts[b].tolist(),
                                       int(lengths[b]))
        got = seg.segments[b]
        assert isinstance(got, SegmentList)
        assert got == want and want == got and list(got) == want and len(got) == len(want)
        if want:
            assert got[0] == want[0] and got[-1] == want[-1] and got[1:] == want[1:]
            s, d, c = got.arrays()
            assert s.tolist() == [w[0] for w in want] and d.sum() == lengths[b]
            assert c.tolist() == [w[2] for w in want]
            assert all(type(v) is int for v in got[0])
    assert sum(d for _, d, _ in seg.segments[0]) == 40


def test_segment_list_is_read_only_and_compares_by_value():
    rows = np.array([[0, 3], [3, 2], [1, 0]], dtype=np.int64)
    rows.flags.writeable = False
    a = SegmentList(rows)
    assert a == [(0, 3, 1), (3, 2, 0)] and a != [(0, 3, 1)] and a != [(0, 3, 1), (3, 2, 1)]
    assert a == SegmentList(rows.copy()) and SegmentList(rows[:, :0]) == []
    assert json.loads(json.dumps(a.tolist())) == [[0, 3, 1], [3, 2, 0]]
    with pytest.raises(ValueError):
        a.arrays()[0][0] = 5
    with pytest.raises(TypeError):
        hash(a)


@pytest.mark.parametrize("B, T, K, lengths", [
    (3, 30, 1, None),  # every position starts a segment: as many segments as positions
    (2, 40_000, 4, [40_000, 25_000]),  # past the one-copy size: counts first, then rows
    (1, 50, 3, [37]),  # one sequence: its last segment ends at its length, not at 0
])
def test_segments_at_the_edges_of_the_packing(B, T, K, lengths, rows_on):
    g = torch.Generator().manual_seed(5)
    C = 3
    seg = viterbi(torch.randn(B, T, C, generator=g, dtype=torch.float64),
                  torch.randn(C, C, generator=g, dtype=torch.float64),
                  torch.randn(K, C, generator=g, dtype=torch.float64),
                  None if lengths is None else torch.tensor(lengths), backend="torch")
    ns = lengths or [T] * B
    for b in range(B):
        want = _walk(seg.labels[b].tolist(), seg._starts[b].tolist(), ns[b])
        assert seg.segments[b] == want and sum(d for _, d, _ in want) == ns[b]
    if K == 1:
        assert sum(len(s) for s in seg.segments) == B * T
