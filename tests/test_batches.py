"""How annotate cuts a long sequence into decoding windows and batches them
(semiseg/annotate/batches.py), and the --decode-overlap setting end to end."""

from __future__ import annotations

import os
import random
import types

import numpy as np
import pytest
import torch
from seqs import SHIPPED_MODEL, bed_labels, chrI_piece

from semiseg.annotate import batches
from semiseg.errors import SemisegError


def _check_tiling(got, S, W, ov):
    """The kept centres tile [0, S) once, in order; each window holds its centre, is at
    most W long, and gives the centre at least min(W - 1, ov) // 2 steps of context on
    each side except at the sequence's ends (checked position by position)."""
    owner = np.full(S, -1)
    need = min(W - 1, ov) // 2 if W < S else 0
    for i, (cs, ce, ws, we) in enumerate(got):
        assert 0 <= ws <= cs < ce <= we <= S and we - ws <= W
        assert (owner[cs:ce] == -1).all()
        owner[cs:ce] = i
        assert cs - ws >= min(need, cs) and we - ce >= min(need, S - ce)
    assert (owner >= 0).all() and (np.diff(owner) >= 0).all()


@pytest.mark.parametrize("seed", range(40))
def test_windows_cover_once_with_context(seed):
    rng = random.Random(seed)
    S = rng.randint(1, 3000)
    W = rng.randint(2, 800)
    ov = rng.randint(1, W + 5)
    got = batches.windows(S, W, ov)
    _check_tiling(got, S, W, ov)
    if W >= S:
        assert got == [(0, S, 0, S)]


def _modelled(windows, per_call, sms):
    """Step-times of calls of per_call windows, in order: each call ~ its longest window x
    ceil(2 b / sms) (one program per window and direction, one per SM)."""
    t = 0
    for i in range(0, len(windows), per_call):
        chunk = windows[i:i + per_call]
        t += max(we - ws for _, _, ws, we in chunk) * -(-2 * len(chunk) // sms)
    return t


@pytest.mark.parametrize("seed", range(30))
def test_gpu_windows_tile_and_cost_no_more(seed):
    """A valid tiling, never modelled slower than the fewest windows, and (for sequences
    longer than a window, which annotate decodes whole) no window count
    up to the next multiple of per_call (each with windows as short as it allows) is
    modelled faster: checked by enumerating them."""
    rng = random.Random(seed)
    S = rng.randint(2, 60000)
    W = rng.randint(2, 5000)
    ov = rng.randint(1, W)
    sms = rng.choice([4, 16, 132])
    per_call = rng.choice([1, sms // 2 or 1, sms, 2 * sms])
    got = batches.gpu_windows(S, W, ov, per_call, sms)
    _check_tiling(got, S, W, ov)
    fewest = batches.windows(S, W, ov)
    cost = _modelled(got, per_call, sms)
    assert cost <= _modelled(fewest, per_call, sms)
    if W >= S:  # one window: the whole sequence, exact, as annotate decodes it
        assert got == fewest == [(0, S, 0, S)]
        return
    ovv = 2 * (min(W - 1, ov) // 2)
    for n in range(len(fewest), -(-len(fewest) // per_call) * per_call + 1):
        alt = batches.windows(S, min(W, -(-S // n) + ovv), ov)
        assert cost <= _modelled(alt, per_call, sms)


def test_gpu_windows_fill_the_sms():
    got = batches.gpu_windows(2_500_000, 20000, 2048, 132, 132)
    assert len(got) == 198 and max(we - ws for _, _, ws, we in got) <= 14675
    assert batches.gpu_windows(2_500_000, 20000, 2048, 1, 132) == batches.windows(
        2_500_000, 20000, 2048)


def test_default_overlap():
    assert batches.default_overlap(20000, 256) == 2048  # 8 K
    assert batches.default_overlap(20000, 5000) == 5000  # at most a quarter of a window
    assert batches.default_overlap(3, 1) == 1


def test_windows_per_call_fills_the_sms(monkeypatch):
    assert batches.windows_per_call(100, None) == 100
    assert batches.windows_per_call(0, None) == 1
    assert [batches.windows_per_call(k, 132) for k in (0, 100, 131, 132, 263, 300)] == [
        1, 100, 131, 132, 132, 264]
    # plan: the fewest windows on a CPU; on a GPU (faked: 132 SMs) gpu_windows' choice
    assert batches.plan(2_500_000, 20000, 2048, 300, torch.device("cpu")) == (
        batches.windows(2_500_000, 20000, 2048), 300)
    props = types.SimpleNamespace(multi_processor_count=132)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda dev: props)
    got, k = batches.plan(2_500_000, 20000, 2048, 150, torch.device("cuda"))
    assert k == 132 and got == batches.gpu_windows(2_500_000, 20000, 2048, 132, 132)


def test_groups_keep_order_and_budget():
    items = [types.SimpleNamespace(start=0, end=n) for n in (50, 70, 5000, 30, 30, 30, 90)]
    got = list(batches.groups(items, res=1, window=1000, max_steps=10_000, batch_steps=150))
    assert [it for g in got for it in g] == items
    for g in got:
        if len(g) > 1:
            assert len(g) * max(it.end - it.start for it in g) <= 150


@pytest.fixture(scope="module")
def piece(tmp_path_factory):
    return chrI_piece(tmp_path_factory.mktemp("ov"), 30000, 54000)


def test_windowed_decode_with_overlap_matches_whole(piece, tmp_path):
    """The shipped gene model on 24 kb of chrI: windows of 9,000 steps overlapping by the
    default (2,048 = 8 K; four windows) give the whole-sequence decode's label at every
    base (as measured on all of chrI and chrII: RESULTS-log.md, "Annotation on one H100:
    decoding windows ..."), where an overlap of 200 steps does not (a stitch falls inside
    a gene there)."""
    from semiseg.annotate.run import annotate

    seq, fa = piece
    kw = {"device": "cpu", "reverse_complement": "off"}
    annotate(SHIPPED_MODEL, fa, str(tmp_path / "whole"), **kw)
    whole = bed_labels(tmp_path / "whole.bed", len(seq))
    assert len(set(whole.tolist())) >= 3  # genes on both strands: not a trivial piece
    for ov, same in ((None, True), (200, False)):
        annotate(SHIPPED_MODEL, fa, str(tmp_path / "win"), max_decode_steps=9000,
                 decode_overlap=ov, certified_seams=False, **kw)
        win = bed_labels(tmp_path / "win.bed", len(seq))
        assert bool((whole == win).all()) is same, ov
    # certified windows (the default; annotate/seams.py): the whole decode's labels at 200 too
    annotate(SHIPPED_MODEL, fa, str(tmp_path / "cert"), max_decode_steps=9000,
             decode_overlap=200, **kw)
    assert (bed_labels(tmp_path / "cert.bed", len(seq)) == whole).all()


def test_decode_overlap_must_fit_the_window(piece, tmp_path):
    from semiseg.annotate.run import annotate

    _, fa = piece
    with pytest.raises(SemisegError, match="--decode-overlap"):
        annotate(SHIPPED_MODEL, fa, str(tmp_path / "x"), device="cpu",
                 max_decode_steps=6000, decode_overlap=6000)
    assert not os.listdir(tmp_path)
