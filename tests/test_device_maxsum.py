"""The certified max-sum's windows on a device (annotate/device_maxsum.py) and its two
kernels (periodic.viterbi_tables, frontier.coalesce), against the float64 host
reference (seams._forward, seams._coalesce) and the whole-sequence Viterbi.

Without CUDA the kernels run in Triton's interpreter (conftest.py), so the shapes are
tiny; without triton the module is skipped (CI's CPU machine); on a GPU they run
compiled (benchmarks/gpu_maxsum_check.sh runs this file there).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton")

from test_seams import adversarial, naive, random_crf, whole  # noqa: E402

from semiseg.annotate.device_maxsum import device_certified_viterbi  # noqa: E402
from semiseg.annotate.seams import SeamStats, WindowInputs, _coalesce, _trace  # noqa: E402
from semiseg.crf.inputs import check_inputs  # noqa: E402
from semiseg.crf.triton import DEFAULT, periodic  # noqa: E402
from semiseg.crf.triton.frontier import coalesce, trace  # noqa: E402
from semiseg.crf.triton.schedule import _pow2  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _case(seed: int, lo=(60, 160)):
    rng = np.random.default_rng(seed)
    C, K = int(rng.integers(2, 5)), int(rng.integers(4, 7))
    T = int(rng.integers(*lo))
    kw = random_crf(T, C, K, 3, seed, allowed_p=0.1 if seed % 2 else 0.0,
                    proj=seed % 3 != 0)
    for k in ("start", "end", "proj_end"):  # the posterior decode has none of them
        kw.pop(k, None)
    return T, kw


def _f32(kw):
    return {k: (v.float().to(DEV) if v.dtype == torch.float64 else v.to(DEV))
            for k, v in kw.items()}


def _tables(kw, a: int, entry: int, tuning=DEFAULT):
    """viterbi_tables of positions [a, T) from the entry (-1: free) on the device."""
    k = _f32(kw)
    T, C = k["scores"].shape

    def rows(v):
        return None if v is None else v[a:][None]

    x = check_inputs(rows(k["scores"]), k["transition"], k["duration_bias"],
                     torch.tensor([T - a], device=DEV), allowed=rows(k.get("allowed")),
                     proj_start=rows(k.get("proj_start")))
    init = torch.full((1, 4, _pow2(C)), float("-inf"), device=DEV)
    init[0, :3, :C] = 0.0 if entry < 0 else k["transition"][:, entry, :]
    d, c, a_end = periodic.viterbi_tables(tuning, x, 0, init)
    return d[0].cpu().numpy(), c[0].cpu().numpy(), a_end[0, :C].cpu().numpy()


def _tied(kw):
    """The case with small whole numbers for scores and parameters: exact ties
    everywhere (a chain of equal segments, as the gene decode's grammar has)."""
    g = torch.Generator().manual_seed(0)
    return {k: (torch.randint(-2, 3, v.shape, generator=g).to(v.dtype)
                if torch.is_floating_point(v) else v) for k, v in kw.items()}


@pytest.mark.parametrize("ring", [None, 2], ids=["registers", "tiled"])
@pytest.mark.parametrize("entry", [-1, 1], ids=["free", "after-label-1"])
@pytest.mark.parametrize("ties", [False, True], ids=["random", "tied"])
def test_tables_equal_float64_forward(entry, ties, ring):
    """Backpointers of every state with an allowed path equal the float64 host forward's
    (bp_d 0 exactly where that forward has alpha -inf; ties broken as it breaks them:
    the shorter segment, the smaller label); the last boundary's best label equals the
    host's argmax; the traceback from there (frontier.trace) gives seams._trace's labels
    and passes its boundaries; and the frontier's meeting point equals seams._coalesce
    at two frontier depths, most of them past the entry (so the walk was tested)."""
    met = 0
    for seed in range(8):
        T, kw = _case(seed, (30, 70))
        if ties:
            kw = _tied(kw)
        a = 0 if entry < 0 and seed % 2 else 5
        x = WindowInputs(kw["scores"], kw["transition"], kw["duration_bias"],
                         kw.get("allowed"), kw.get("proj_start"))
        alpha, bd, bc = x.forward(a, T, entry, np.zeros(x.C))
        d, c, a_end = _tables(kw, a, entry, dataclasses.replace(DEFAULT, ring_tile=ring))
        n = T - a
        fin = alpha[1:] > -np.inf
        np.testing.assert_array_equal(d[fin], bd[1:][fin])
        assert (d[~fin] == 0).all()
        later = fin & (bd[1:] < np.arange(1, n + 1)[:, None])  # not from the first boundary
        np.testing.assert_array_equal(c[later], bc[1:][later])
        if np.isfinite(alpha[n]).any():
            assert int(np.argmax(a_end)) == int(np.argmax(alpha[n]))
        dev_d = torch.as_tensor(d, device=DEV)[None]
        dev_c = torch.as_tensor(c, device=DEV)[None]
        if np.isfinite(alpha[n]).any():  # the traceback from the best last state
            top = int(np.argmax(alpha[n]))
            want_lab = np.full(n, -1, np.int64)
            _trace(bd, bc, n, top, 0, want_lab)
            got_lab, got_st = trace(dev_d, dev_c, torch.tensor([[n, top]], device=DEV))
            np.testing.assert_array_equal(got_lab[0].cpu().numpy(), want_lab)
            bounds = [0]  # the host path's segment starts, walked again
            t, cc = n, top
            while t > 0:
                t, cc = t - int(bd[t, cc]), int(bc[t, cc])
                bounds.append(t)
            np.testing.assert_array_equal(np.flatnonzero(got_st[0].cpu().numpy()),
                                          sorted(set(bounds) - {n}))
        for lo in (max(1, n - x.K), max(1, n - 3 * x.K)):
            want = _coalesce(alpha, bd, bc, lo)
            got = coalesce(dev_d, dev_c, torch.tensor([n], device=DEV),
                           torch.tensor([lo], device=DEV))[0].tolist()
            assert tuple(got) == tuple(want), (seed, lo)
            met += want[0] > 0
    assert met >= 8


def test_certified_windows_equal_whole_sequence_decode():
    """Random periodic semi-CRFs, several window sizes and call sizes: the labels are
    the whole-sequence Viterbi's, seams certified side by side, from their entry and
    after widening all occurred."""
    total = SeamStats()
    for seed in range(4):
        T, kw = _case(seed)
        want, _ = whole(kw)
        k = _f32(kw)
        for W, ov, per_call in ((10, 3, 3), (12, 6, 1), (25, 8, 8), (T - 1, 10, 2)):
            st = SeamStats()
            got = device_certified_viterbi(
                k["scores"], k["transition"], k["duration_bias"], allowed=k.get("allowed"),
                proj_start=k.get("proj_start"), window=W, overlap=ov,
                call_steps=per_call * (W + 2 * ov), device=DEV, stats=st)
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed} W {W} ov {ov}")
            total.add(st)
    assert total.side > 0 and total.first + total.widened > 0 and total.widened > 0


def test_adversarial_trap_refused():
    """seams' trap (a run decided by 5 bases at the start), as periodic transitions:
    the naive stitch is wrong, no seam is certified inside the trap (past the 5 deciding
    bases: a window there cannot see them), and the labels are the whole decode's. (A
    seam at the evidence's end, boundary 5, is a true one: every best path passes it,
    the label-1 paths switching there; whether the first window finds it depends on how
    float32 rounding breaks the run's ties: compiled, it does; in the interpreter, not.)"""
    kw = adversarial(T=240, K=4)
    kw["transition"] = kw["transition"][None].expand(3, 2, 2).contiguous()
    want, _ = whole(kw)
    assert (naive(kw, 60, 20) != want).any()
    k = _f32(kw)
    st = SeamStats()
    got = device_certified_viterbi(k["scores"], k["transition"], k["duration_bias"],
                                   window=60, overlap=20, call_steps=400, device=DEV, stats=st)
    np.testing.assert_array_equal(got, want)
    assert all(p <= 5 for p, _ in st.points) and st.whole == 1


def test_nothing_allowed_gives_minus_one():
    T, kw = _case(3)
    kw["allowed"] = torch.zeros(T, kw["scores"].shape[1], dtype=torch.bool)
    k = _f32(kw)
    got = device_certified_viterbi(k["scores"], k["transition"], k["duration_bias"],
                                   allowed=k["allowed"], window=20, overlap=5,
                                   call_steps=100, device=DEV)
    assert (got == -1).all()
