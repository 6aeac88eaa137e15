"""Triton kernels against brute-force enumeration and the torch backend, at tiny shapes.

Without CUDA the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set here before
triton is first imported); with CUDA they run compiled on the GPU.
"""
# ruff: noqa: E402  (TRITON_INTERPRET must be set, and triton found via importorskip, before
# triton and the kernel modules are imported: the import order below is required)

import math
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

triton = pytest.importorskip("triton")

import bruteforce as bf
import triton.language as tl

from semiseg.crf import triton as kn
from semiseg.crf.inputs import FLOAT_FIELDS, check_inputs
from semiseg.crf.triton.jit import common
from semiseg.crf.triton.jit.split_end import _end_slots, _plane_ends

DEV = "cuda" if torch.cuda.is_available() else "cpu"
if DEV == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    # tests/conftest.py sets it before any test module imports triton: never skip silently
    raise RuntimeError("TRITON_INTERPRET=1 must be set before triton is imported (conftest.py)")


def tuned(monkeypatch, **fields):
    """This test's kernel calls under the default Tuning with these fields replaced (the
    Triton backend's settings object, semiseg/crf/triton/schedule.py); cumulative within a
    test, undone after it."""
    import dataclasses

    from semiseg.crf import triton as kn

    monkeypatch.setattr(kn, "DEFAULT", dataclasses.replace(kn.DEFAULT, **fields))

NEG = float("-inf")


def make(B, T, K, C, *, seed, lengths=None, optional=True, allowed=False, neg_inf=False,
         dd=False, period=None):
    """Random float64 problem (dict of leaves) with scores ~ N(0, 3^2); dd: (K, C, C)
    duration-dependent transitions; period: (period, C, C) periodic ones."""
    g = torch.Generator().manual_seed(seed)

    def r(*s):
        return torch.randn(*s, generator=g, dtype=torch.float64)

    tr = r(K, C, C) if dd else (r(period, C, C) if period else r(C, C))
    p = {"scores": 3 * r(B, T, C), "transition": tr, "duration_bias": r(K, C)}
    if optional:
        p.update(start=r(C), end=r(C), proj_start=r(B, T, C), proj_end=r(B, T, C))
    if neg_inf and period:
        p["transition"][0, 0, C - 1] = NEG
        p["transition"][period - 1, C - 1, 0] = NEG
        p["transition"][:, :, 1 % C] = NEG  # label 1 % C only first
        p["transition"][period // 2, 1 % C, :] = NEG
        p["duration_bias"][K - 1, 0] = NEG
        if optional:
            p["start"][C - 1] = NEG
    elif neg_inf and dd:
        p["transition"][0, 0, C - 1] = NEG
        p["transition"][K - 1, C - 1, 0] = NEG
        # no segment of label 1 % C and duration min(2, K) may follow another segment
        p["transition"][min(1, K - 1), :, 1 % C] = NEG
    elif neg_inf:
        p["transition"][0, C - 1] = NEG
        p["duration_bias"][K - 1, 0] = NEG
        if optional:
            p["start"][C - 1] = NEG
            p["end"][0] = NEG
    extra = {}
    if allowed:
        extra["allowed"] = torch.rand(B, T, C, generator=g) < 0.75
    if lengths is not None:
        extra["lengths"] = torch.tensor(lengths)
    return p, extra


def as_inputs(p, extra, dtype=torch.float32):
    kw = {k: (v.to(DEV, dtype) if v is not None else None) for k, v in p.items()}
    ex = {k: v.to(DEV) for k, v in extra.items()}
    return check_inputs(kw.pop("scores"), kw.pop("transition"), kw.pop("duration_bias"),
                        ex.pop("lengths", None), **kw, **ex)


_BRUTE = {}


def brute(p, extra):
    """The brute-force oracle of a problem (log Z, every gradient, Viterbi): enumerated
    once per problem and kept, since several tests and parametrizations (kernel variants)
    check against the same problem (the enumeration, not the kernels, is most of their
    time in the interpreter). The key is every input's bits, so a changed problem is
    enumerated anew; callers only read what it returns."""
    key = tuple((k, v.dtype, tuple(v.shape), v.numpy().tobytes())
                for k, v in sorted({**p, **extra}.items()) if v is not None)
    if key not in _BRUTE:
        _BRUTE[key] = _brute(p, extra)
    return _BRUTE[key]


def _brute(p, extra):
    leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    args = (leaves["scores"], leaves["transition"], leaves["duration_bias"], extra.get("lengths"))
    kw = {k: leaves.get(k) for k in ("start", "end", "proj_start", "proj_end")}
    kw["allowed"] = extra.get("allowed")

    def one(t, b):
        return t[b:b + 1] if t is not None and t.dim() == 3 else t

    # sequences one at a time (one enumeration each gives its log Z and, summed over the
    # finite ones, the gradients), so that one with log Z = -inf (NaN gradient) stays out
    rows, total = [], 0
    for b in range(p["scores"].shape[0]):
        L = None if args[3] is None else args[3][b:b + 1]
        lz_b = bf.log_partition(one(args[0], b), args[1], args[2], L,
                                **{k: one(v, b) for k, v in kw.items()})
        rows.append(lz_b)
        if torch.isfinite(lz_b).all():
            total = total + lz_b.sum()
    lz = torch.cat(rows)
    grads = {}
    if torch.is_tensor(total):
        gs = torch.autograd.grad(total, list(leaves.values()), allow_unused=True)
        grads = {k: (torch.zeros_like(v) if gr is None else gr)
                 for (k, v), gr in zip(leaves.items(), gs)}
    vit = bf.viterbi(*(a.detach() if isinstance(a, torch.Tensor) else a for a in args),
                     **{k: (v.detach() if isinstance(v, torch.Tensor) else v)
                        for k, v in kw.items()})
    return lz.detach(), grads, vit


CASES = {
    "all_terms": {"B": 3, "T": 6, "K": 3, "C": 2, "lengths": [6, 4, 1]},
    "no_optional": {"B": 2, "T": 5, "K": 2, "C": 3, "optional": False},
    "K1": {"B": 2, "T": 4, "K": 1, "C": 3, "lengths": [4, 2]},
    "K_gt_T": {"B": 2, "T": 4, "K": 7, "C": 2, "lengths": [4, 3]},
    "allowed_neginf": {"B": 3, "T": 6, "K": 3, "C": 3, "lengths": [6, 5, 3], "allowed": True,
                       "neg_inf": True},
    "C1": {"B": 2, "T": 5, "K": 3, "C": 1, "lengths": [5, 2]},
    "T1": {"B": 2, "T": 1, "K": 3, "C": 2},
    "all_length_1": {"B": 3, "T": 3, "K": 2, "C": 2, "lengths": [1, 1, 1]},
}


# (case, checkpoint segment length): None = the default ~sqrt(T K); 1 and 2 put a segment
# boundary at every position or every other one
PARAMS = [(c, None) for c in CASES] + [(c, n) for c in ("all_terms", "allowed_neginf")
                                       for n in (1, 2)]
# One problem per case (this seed) in every static test against brute force, so that the
# oracle of each is enumerated once (brute) for all the kernel variants.
SEED = 7


# Both forward gamma variants (kernels picks one by shape; tiny shapes get one): every
# case, and the spacing 1 (a wave per segment: the recompute, MODE 1, in that variant);
# the spacing 2 (rows written by the chains, as at the default spacing) in gamma_cols only.
GAMMA_PARAMS = [pytest.param(c, n, rows, id=f"gamma_{'rows' if rows else 'cols'}-{c}-{n}")
                for rows in (False, True) for c, n in PARAMS if not (rows and n == 2)]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case,seg_len,gamma_variant", GAMMA_PARAMS)
def test_against_bruteforce(case, seg_len, gamma_variant, monkeypatch):
    tuned(monkeypatch, gamma_rows=gamma_variant)
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
    if seg_len == 1:  # rows for one checkpoint segment at a time: a wave per segment
        tuned(monkeypatch, rows_budget=1)
    spec = dict(CASES[case])
    p, extra = make(spec.pop("B"), spec.pop("T"), spec.pop("K"), spec.pop("C"), seed=SEED, **spec)
    # gamma_rows changes the chains only: the posterior backward is gamma_cols' launch
    check_against_brute(p, extra, keep_too=not gamma_variant, posteriors=not gamma_variant)


def check_against_brute(p, extra, keep_too=False, posteriors=True):
    """log Z, every gradient, Viterbi score and the path's own score against brute force.
    keep_too: also the forward told that a backward follows (keep=True: the static chains'
    second halves then run in the forward, static._second_halves), whose log Z and
    gradients (twice from one forward, as retain_graph does) must be the same bits.
    posteriors: also the backward without the parameter sums (_bwd_kernel PARAM_GRADS
    off); a parametrization whose _bwd_kernel launch is another's (the same problem and
    settings but for a chain-only setting: the gamma variant, the end-indexed chain's
    ring tiles) leaves it to that one. Returns kn.viterbi's (score, labels, seg_start)."""
    lz_ref, g_ref, vit_ref = brute(p, extra)
    x = as_inputs(p, extra)
    lz, saved = kn.forward(x)
    assert lz.dtype == torch.float32
    torch.testing.assert_close(lz.cpu().double(), lz_ref, rtol=1e-5, atol=1e-5)

    grads = kn.backward(x, saved, torch.ones_like(lz))
    if keep_too:
        lz_k, saved_k = kn.forward(x, keep=True)
        assert torch.equal(lz_k, lz)
        if isinstance(saved_k, dict):  # (a replayed CUDA graph's is graphs.Saved)
            assert x.periodic or x.duration_dependent or "second" in saved_k
        for _ in range(2):
            g_k = kn.backward(x, saved_k, torch.ones_like(lz))
            for name in FLOAT_FIELDS:
                assert torch.equal(g_k[name], grads[name]), name
    ok = torch.isfinite(lz_ref)
    for name in FLOAT_FIELDS:
        got = grads[name].cpu().double()
        want = {"start": (x.C,), "end": (x.C,), "proj_start": x.scores.shape,
                "proj_end": x.scores.shape}.get(name, p.get(name, torch.empty(0)).shape)
        assert got.shape == want, name
        assert torch.isfinite(got).all(), name
        if name in g_ref:
            torch.testing.assert_close(got, g_ref[name], rtol=1e-4, atol=2e-5, msg=name)
    if not ok.all():  # a sequence with no allowed segmentation contributes nothing
        assert grads["scores"][~ok.to(DEV)].abs().max() == 0
    # what posteriors ask for: the per-position gradients alone, the same bits; the
    # duration-bias and transition sums are skipped (the dd kernels form them anyway)
    if posteriors:
        part = kn.backward(x, saved, torch.ones_like(lz), wanted=("scores", "proj_start"))
        for name in ("scores", "proj_start", "proj_end", "start", "end"):
            assert torch.equal(part[name], grads[name]), name
        assert x.duration_dependent or not {"duration_bias", "transition"} & set(part)

    score, labels, seg_start = kn.viterbi(x)
    lengths = x.lengths.cpu()
    for b, (best, _paths) in enumerate(vit_ref):
        if best == NEG:
            assert score[b].item() == NEG
            continue
        assert abs(score[b].item() - best) <= 1e-5 * max(1.0, abs(best))
        L = int(lengths[b])
        assert (labels[b, L:] == -1).all() and not seg_start[b, L:].any()
        starts = torch.nonzero(seg_start[b, :L].cpu()).flatten().tolist()
        segs = [(s, e - s, int(labels[b, s])) for s, e in zip(starts, starts[1:] + [L])]
        assert all((labels[b, s:s + d].cpu() == c).all() for s, d, c in segs)
        own = bf.path_score(b, segs, p["scores"], p["transition"], p["duration_bias"],
                            p.get("start"), p.get("end"), p.get("proj_start"), p.get("proj_end"))
        assert bf.is_allowed(b, segs, extra.get("allowed"))
        assert abs(own.item() - best) <= 1e-5 * max(1.0, abs(best))
    return score, labels, seg_start


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("across", [True, False], ids=["segment_across", "boundary_at"])
def test_viterbi_where_the_halves_meet(across):
    """The static Viterbi runs both halves and joins them at M = ceil(L / 2): a best path
    with one segment across M, and one with a boundary exactly at M (T = 6, M = 3)."""
    T, K, C = 6, 4, 2
    p, extra = make(1, T, K, C, seed=2)
    p["scores"] = 0.1 * p["scores"]
    if across:  # label 1 over [1, 5): one segment from before M to after it
        p["scores"][0, 1:5, 1] += 5.0
    else:  # label 1 over [0, 3), label 0 over [3, 6)
        p["scores"][0, :3, 1] += 5.0
        p["scores"][0, 3:, 0] += 5.0
    _, labels, seg_start = check_against_brute(p, extra)  # (its kn.viterbi)
    starts = torch.nonzero(seg_start[0].cpu()).flatten().tolist()
    if across:  # the branch under test: no segment starts at M, one covers it
        assert 3 not in starts and labels[0, 3].item() == 1
    else:
        assert 3 in starts and labels[0, 2].item() == 1 and labels[0, 3].item() == 0


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("dd", [False, True], ids=["static", "dd"])
def test_no_allowed_segmentation(dd):
    p, extra = make(2, 4, 2, 2, seed=3, lengths=[4, 3], dd=dd)
    extra["allowed"] = torch.ones(2, 4, 2, dtype=torch.bool)
    extra["allowed"][1, 1, :] = False  # position 1 of sequence 1: no label allowed
    x = as_inputs(p, extra)
    assert x.duration_dependent == dd
    lz, saved = kn.forward(x)
    assert lz[1].item() == NEG and torch.isfinite(lz[0])
    grads = kn.backward(x, saved, torch.ones_like(lz))
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert grads["scores"][1].abs().max() == 0
    score, labels, seg_start = kn.viterbi(x)
    assert score[1].item() == NEG and (labels[1] == -1).all() and not seg_start[1].any()


def test_against_torch_backend_and_determinism(monkeypatch):
    from semiseg.crf import reference

    tuned(monkeypatch, segment=5)
    p, extra = make(3, 20, 6, 3, seed=11, lengths=[20, 13, 9], allowed=True)
    extra["allowed"][:, ::5] = True
    x64, x32 = as_inputs(p, extra, torch.float64), as_inputs(p, extra)
    lz_ref, saved_ref = reference.forward(x64)
    g_ref = reference.backward(x64, saved_ref, torch.ones_like(lz_ref))
    lz, saved = kn.forward(x32)
    torch.testing.assert_close(lz.double(), lz_ref, rtol=1e-6, atol=1e-5)
    g1 = kn.backward(x32, saved, torch.ones_like(lz))
    for name in FLOAT_FIELDS:
        torch.testing.assert_close(g1[name].double(), g_ref[name], rtol=1e-4, atol=1e-5, msg=name)
    g2 = kn.backward(x32, kn.forward(x32)[1], torch.ones_like(lz))
    for name in FLOAT_FIELDS:
        assert torch.equal(g1[name], g2[name]), name  # bitwise
    s_ref, _, _ = reference.viterbi(x64)
    score, _, _ = kn.viterbi(x32)
    torch.testing.assert_close(score.double(), s_ref, rtol=1e-6, atol=1e-5)


def test_dispatch_marginals_and_autograd():
    from semiseg.crf import dispatch

    p, extra = make(2, 5, 3, 2, seed=5, lengths=[5, 3])
    lab_ref, bnd_ref = bf.marginals(p["scores"], p["transition"], p["duration_bias"],
                                    extra["lengths"], start=p["start"], end=p["end"],
                                    proj_start=p["proj_start"], proj_end=p["proj_end"])
    q = {k: v.to(DEV, torch.float32) for k, v in p.items()}
    lab, bnd = dispatch.marginals(q["scores"], q["transition"], q["duration_bias"],
                                  extra["lengths"], start=q["start"], end=q["end"],
                                  proj_start=q["proj_start"], proj_end=q["proj_end"],
                                  backend="triton")
    torch.testing.assert_close(lab.cpu().double(), lab_ref, rtol=0, atol=2e-5)
    torch.testing.assert_close(bnd.cpu().double(), bnd_ref, rtol=0, atol=2e-5)

    tr = q["transition"].clone().requires_grad_(True)
    lz = dispatch.log_partition(q["scores"], tr, q["duration_bias"], extra["lengths"],
                                start=q["start"], end=q["end"], backend="triton")
    w = torch.tensor([0.5, -2.0], device=DEV)
    (lz * w).sum().backward()
    trr = p["transition"].clone().requires_grad_(True)
    ref = bf.log_partition(p["scores"], trr, p["duration_bias"], extra["lengths"],
                           start=p["start"], end=p["end"])
    (ref * w.cpu().double()).sum().backward()
    torch.testing.assert_close(tr.grad.cpu().double(), trr.grad, rtol=1e-4, atol=2e-5)


def test_unsupported_inputs_are_refused(monkeypatch):
    from semiseg.crf import dispatch

    p, extra = make(1, 4, 2, 2, seed=1, optional=False)
    x = as_inputs(p, extra)
    monkeypatch.setattr(kn, "MAX_RING", 2)  # a ring of 2 x 2 elements: too large now
    monkeypatch.setattr(kn, "MAX_RING_TILED", 2)
    assert kn.supports(x) is not None
    with pytest.raises(ValueError, match="torch"):
        kn.forward(x)
    assert dispatch._backend(x, "auto") is not kn


# ----- duration-dependent (K, C, C) transitions -----

DD_CASES = {
    "all_terms": {"B": 3, "T": 6, "K": 3, "C": 2, "lengths": [6, 4, 1]},
    "K1": {"B": 2, "T": 4, "K": 1, "C": 3, "lengths": [4, 2]},
    "K2_no_optional": {"B": 2, "T": 5, "K": 2, "C": 3, "optional": False, "lengths": [5, 3]},
    "K_gt_T": {"B": 2, "T": 4, "K": 7, "C": 2, "lengths": [4, 3], "neg_inf": True},
    "allowed_neginf": {"B": 3, "T": 5, "K": 3, "C": 3, "lengths": [5, 4, 2], "allowed": True,
                       "neg_inf": True},
    "C1": {"B": 2, "T": 5, "K": 3, "C": 1, "lengths": [5, 2]},
}
DD_PARAMS = [(c, None) for c in DD_CASES] + [(c, n) for c in ("all_terms", "allowed_neginf")
                                             for n in (1, 2)] + [("K2_no_optional", 2), ("K1", 1)]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case,seg_len", DD_PARAMS)
def test_dd_against_bruteforce(case, seg_len, monkeypatch):
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
    spec = dict(DD_CASES[case])
    p, extra = make(spec.pop("B"), spec.pop("T"), spec.pop("K"), spec.pop("C"), seed=13,
                    dd=True, **spec)
    assert as_inputs(p, extra).duration_dependent
    check_against_brute(p, extra)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_dd_against_torch_backend_and_determinism(monkeypatch):
    from semiseg.crf import reference

    tuned(monkeypatch, segment=4)
    p, extra = make(2, 14, 5, 3, seed=17, lengths=[14, 9], allowed=True, neg_inf=True,
                    dd=True)
    extra["allowed"][:, ::4] = True
    x64, x32 = as_inputs(p, extra, torch.float64), as_inputs(p, extra)
    lz_ref, saved_ref = reference.forward(x64)
    lz, saved = kn.forward(x32)
    torch.testing.assert_close(lz.double(), lz_ref, rtol=1e-6, atol=1e-5)
    w = torch.tensor([0.7, -1.5], device=DEV)
    g1 = kn.backward(x32, saved, w)
    for name in FLOAT_FIELDS:
        want = reference.backward(x64, saved_ref, w.double())[name]
        torch.testing.assert_close(g1[name].double(), want, rtol=1e-4, atol=1e-5, msg=name)
    g2 = kn.backward(x32, kn.forward(x32)[1], w)
    for name in FLOAT_FIELDS:
        assert torch.equal(g1[name], g2[name]), name  # bitwise
    s_ref, _, _ = reference.viterbi(x64)
    score, _, _ = kn.viterbi(x32)
    torch.testing.assert_close(score.double(), s_ref, rtol=1e-6, atol=1e-5)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_dd_dispatch_marginals_and_auto():
    from semiseg.crf import dispatch

    p, extra = make(2, 5, 3, 2, seed=5, lengths=[5, 3], dd=True, allowed=True)
    kw = {k: p[k] for k in ("start", "end", "proj_start", "proj_end")}
    lab_ref, bnd_ref = bf.marginals(p["scores"], p["transition"], p["duration_bias"],
                                    extra["lengths"], allowed=extra["allowed"], **kw)
    q = {k: v.to(DEV, torch.float32) for k, v in p.items()}
    qk = {k: q[k] for k in kw}
    lab, bnd = dispatch.marginals(q["scores"], q["transition"], q["duration_bias"],
                                  extra["lengths"], allowed=extra["allowed"].to(DEV), **qk,
                                  backend="triton")
    torch.testing.assert_close(lab.cpu().double(), lab_ref, rtol=0, atol=2e-5)
    torch.testing.assert_close(bnd.cpu().double(), bnd_ref, rtol=0, atol=2e-5)
    # validated and timed on a GPU (benchmarks/RESULTS-log.md): "auto" runs them on CUDA
    x = as_inputs(p, extra)
    assert kn.supports(x) is None
    assert dispatch._backend(x, "triton") is kn


# ----- periodic (P, C, C) transitions, P < K -----

PER_CASES = {
    "all_terms_P2": {"B": 3, "T": 7, "K": 4, "C": 2, "period": 2, "lengths": [7, 5, 1]},
    "all_terms_P3": {"B": 2, "T": 7, "K": 5, "C": 2, "period": 3, "lengths": [7, 6]},
    "P1": {"B": 2, "T": 5, "K": 3, "C": 3, "period": 1, "lengths": [5, 3]},
    "no_optional": {"B": 2, "T": 6, "K": 4, "C": 3, "period": 3, "optional": False},
    "K_gt_T": {"B": 2, "T": 4, "K": 9, "C": 2, "period": 3, "lengths": [4, 3]},
    "allowed_neginf": {"B": 3, "T": 7, "K": 5, "C": 3, "period": 3, "lengths": [7, 6, 3],
                       "allowed": True, "neg_inf": True},
    "C1": {"B": 2, "T": 6, "K": 4, "C": 1, "period": 2, "lengths": [6, 2]},
    "T1": {"B": 2, "T": 1, "K": 4, "C": 2, "period": 3},
}
PER_PARAMS = [(c, None) for c in PER_CASES] + [(c, n) for c in ("all_terms_P3", "allowed_neginf")
                                               for n in (1, 2, 3)]
# The periodic problems are one per case (seed PER_SEED) in every test below, so that the
# brute-force oracle of each is enumerated once (brute) for all the kernel variants.
PER_SEED = 19
# The end-indexed chain's ring in tiles of 2 slots: every case's shape (ring lengths 2 to
# 8 slots: one tile to four), and the checkpoint spacings at every position (one segment
# per wave: the recompute, MODE 1, from a tiled ring each wave) and off the period; the
# spacing on the period (3) and the other case at the other spacings run registers only
# (test_tiled_ring_gives_the_register_ring_bits: tiles give the register ring's bits).
PER_RING_PARAMS = ([pytest.param(c, n, None, id=f"{c}-{n}-ring_by_shape") for c, n in PER_PARAMS]
                   + [pytest.param(c, n, 2, id=f"{c}-{n}-ring_tiled_2") for c, n in PER_PARAMS
                      if n is None or (c, n) in (("all_terms_P3", 1), ("allowed_neginf", 2))])


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case,seg_len,ring", PER_RING_PARAMS)
def test_periodic_against_bruteforce(case, seg_len, ring, monkeypatch):
    """ring: kernels.DEFAULT.ring_tile (None: by shape, registers at these sizes; 2: the
    end-indexed chain's ring in global memory in tiles of 2 slots, end._fwd_end_kernel
    TILE). The cases with a checkpoint spacing (seg_len) force the wave backward
    (kernels.DEFAULT.full_rows False); the others pick it by the rows budget. (The
    forward here is told no backward follows, so no rows are written: the rows the
    chains write are checked bitwise by test_forward_rows_give_the_recomputed_rows_bits,
    test_tiled_ring_gives_the_register_ring_bits and the duration-sum test.) The ring
    tiles change the end-indexed chain only: the posterior backward (_bwd_kernel without
    the parameter sums) is left to ring_by_shape."""
    tuned(monkeypatch, ring_tile=ring)
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
        tuned(monkeypatch, full_rows=False)
    if seg_len == 1:  # one checkpoint segment per wave
        tuned(monkeypatch, rows_budget=1)
    spec = dict(PER_CASES[case])
    p, extra = make(spec.pop("B"), spec.pop("T"), spec.pop("K"), spec.pop("C"), seed=PER_SEED,
                    **spec)
    x = as_inputs(p, extra)
    assert x.periodic and kn.supports(x) is None
    check_against_brute(p, extra, posteriors=ring is None)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("gap", [95.0, 130.0])
@pytest.mark.parametrize("tiles", [False, True], ids=["registers", "tiles_of_one_slot"])
def test_periodic_residues_far_apart_against_bruteforce(gap, tiles, monkeypatch):
    """A label whose segments of two duration residues are `gap` nats below those of the
    third in the duration bias, and as far above it in the transition into them, so all
    three residues carry probability: the backward's residue sums must each be taken
    against their own maximum. Against the maximum over every residue (the kernel before
    this test) the far residues underflowed: at 130 nats to 0 (their segments dropped:
    wrong posteriors and gradients), at 95 to a subnormal whose P_start / sum overflowed
    (NaN duration-bias gradients; found in fly training at batch 32). tiles: every ring
    in memory in tiles of one slot (own maxima already), else the register ring (the
    bug's path)."""
    if tiles:
        _tiles_of_one_slot(monkeypatch)
    p, extra = make(2, 9, 6, 2, seed=23, lengths=[9, 7], period=3)
    p["scores"] /= 3
    for r in (1, 2):  # durations 2, 5 and 3, 6 of label 1
        p["duration_bias"][r::3, 1] -= gap
        p["transition"][r, :, 1] += gap
    check_against_brute(p, extra)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case,seg_len", [("all_terms_P3", 2), ("allowed_neginf", None),
                                          ("all_terms_P2", 1)])
def test_periodic_reversed_ring_with_and_without_residue_planes(case, seg_len, monkeypatch):
    """The periodic reversed chain's register ring as residue planes (the rule at these
    sizes: chain._fwd_kernel KQ > 0) and as one ring split by residue at every read
    (RES_PLANES_MAX_CP = 0: what CP > 32 and the Viterbi run), each against brute force.
    The planes' run of a (case, spacing) that test_periodic_against_bruteforce has
    (ring_by_shape: the same problem and settings) is left to it."""
    spec = dict(PER_CASES[case])
    B, T, K, C = (spec.pop(k) for k in ("B", "T", "K", "C"))
    p, extra = make(B, T, K, C, seed=PER_SEED, **spec)
    x = as_inputs(p, extra)
    KP, CP = kn._shape(x)
    dummy = torch.empty(1)
    assert kn.DEFAULT.rev_opts(KP, CP, 4, B, dummy, x.period)["KQ"] >= -(-KP // x.period)
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
        tuned(monkeypatch, full_rows=False)
    if (case, seg_len) not in PER_PARAMS or seg_len == 1:  # (there seg 1 has rows_budget 1)
        check_against_brute(p, extra)
    tuned(monkeypatch, res_planes_max_cp=0)
    assert kn.DEFAULT.rev_opts(KP, CP, 4, B, dummy, x.period)["KQ"] == 0
    check_against_brute(p, extra)


def _tiles_of_one_slot(monkeypatch):
    """Every ring the kernels can keep in memory kept there, in tiles of one slot."""
    tuned(monkeypatch, chain_tile_from=0, bwd_tile_from=0, chain_tile_elems=1,
          bwd_tile_elems=1)


# every case's shape, and the checkpoint spacings at every position (both cases), off
# the period (2) and on it (3), each once; the posterior backward (the tiled _bwd_kernel
# without the parameter sums) at every case's default spacing
PER_TILE_PARAMS = [(c, None) for c in PER_CASES] + [
    ("all_terms_P3", 1), ("allowed_neginf", 1), ("allowed_neginf", 2), ("all_terms_P3", 3)]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case,seg_len", PER_TILE_PARAMS)
def test_periodic_rings_in_tiles_against_bruteforce(case, seg_len, monkeypatch):
    """The periodic family with every ring in memory, in tiles of one slot: the reversed
    chain (its residue split as an online logsumexp / max per residue over the tiles),
    the backward (and its duration-bias walk per residue), both joins' crossing sums and
    the end-indexed chain (_ring_tile's rule for big rings: one tile here): log Z, every
    gradient and the Viterbi path against brute-force enumeration."""
    _tiles_of_one_slot(monkeypatch)
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
        tuned(monkeypatch, full_rows=False)
    spec = dict(PER_CASES[case])
    p, extra = make(spec.pop("B"), spec.pop("T"), spec.pop("K"), spec.pop("C"), seed=PER_SEED,
                    **spec)
    x = as_inputs(p, extra)
    assert x.periodic and kn.DEFAULT.chain_opts(*kn._shape(x), 4)["TILE"] == 1
    assert kn.DEFAULT.bwd_tile(*kn._shape(x)) == 1
    check_against_brute(p, extra, posteriors=seg_len is None)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("tiles", [False, True], ids=["registers", "tiles_of_one_slot"])
@pytest.mark.parametrize("across", [True, False], ids=["segment_across", "boundary_at"])
def test_periodic_viterbi_where_the_halves_meet(across, tiles, monkeypatch):
    """As test_viterbi_where_the_halves_meet, through the periodic family's join (its
    best across M taken from the whole ring, or tile by tile)."""
    if tiles:
        _tiles_of_one_slot(monkeypatch)
    T, K, C = 6, 4, 2
    p, extra = make(1, T, K, C, seed=2, period=3)
    p["scores"] = 0.1 * p["scores"]
    if across:
        p["scores"][0, 1:5, 1] += 5.0
    else:
        p["scores"][0, :3, 1] += 5.0
        p["scores"][0, 3:, 0] += 5.0
    _, labels, seg_start = check_against_brute(p, extra)  # (its kn.viterbi)
    starts = torch.nonzero(seg_start[0].cpu()).flatten().tolist()
    if across:
        assert 3 not in starts and labels[0, 3].item() == 1
    else:
        assert 3 in starts and labels[0, 2].item() == 1 and labels[0, 3].item() == 0


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_periodic_against_torch_backend_determinism_and_static(monkeypatch):
    """Longer sequences against the torch backend (every gradient, Viterbi), bitwise
    determinism, and P = 1 through the periodic family equal to the static kernels."""
    from semiseg.crf import reference

    tuned(monkeypatch, segment=5)
    p, extra = make(3, 20, 7, 3, seed=23, lengths=[20, 15, 11], allowed=True, neg_inf=True,
                    period=3)
    extra["allowed"][:, ::5] = True
    x64, x32 = as_inputs(p, extra, torch.float64), as_inputs(p, extra)
    lz_ref, saved_ref = reference.forward(x64)
    lz, saved = kn.forward(x32)
    torch.testing.assert_close(lz.double(), lz_ref, rtol=1e-6, atol=1e-5)
    w = torch.tensor([0.7, -1.5, 1.1], device=DEV)
    g1 = kn.backward(x32, saved, w)
    for name in FLOAT_FIELDS:
        want = reference.backward(x64, saved_ref, w.double())[name]
        torch.testing.assert_close(g1[name].double(), want, rtol=1e-4, atol=1e-5, msg=name)
    g2 = kn.backward(x32, kn.forward(x32)[1], w)
    for name in FLOAT_FIELDS:
        assert torch.equal(g1[name], g2[name]), name  # bitwise
    s_ref, _, _ = reference.viterbi(x64)
    score, _, _ = kn.viterbi(x32)
    torch.testing.assert_close(score.double(), s_ref, rtol=1e-6, atol=1e-5)

    # (1, C, C) runs the periodic family; (C, C) the static kernels: the same numbers
    p1, extra1 = make(2, 15, 6, 3, seed=29, lengths=[15, 10], period=1)
    x_per = as_inputs(p1, extra1)
    p1s = dict(p1, transition=p1["transition"][0])
    x_sta = as_inputs(p1s, extra1)
    assert x_per.periodic and not x_sta.periodic
    lz_p, sv_p = kn.forward(x_per)
    lz_s, sv_s = kn.forward(x_sta)
    torch.testing.assert_close(lz_p, lz_s, rtol=1e-6, atol=1e-5)
    gp = kn.backward(x_per, sv_p, torch.ones_like(lz_p))
    gs = kn.backward(x_sta, sv_s, torch.ones_like(lz_s))
    for name in FLOAT_FIELDS:
        torch.testing.assert_close(gp[name].reshape(gs[name].shape), gs[name], rtol=1e-4,
                                   atol=1e-5, msg=name)


def sparse_problem(B, T, K, C, seed, **kw):
    """A periodic (3, C, C) problem whose transition allows at most 2 successors and 3
    predecessors of a label per residue (one label none at residue 1: a row of -inf), as
    a gene model's structure does; scores scaled down so that many paths compete."""
    p, extra = make(B, T, K, C, seed=seed, period=3, **kw)
    g = torch.Generator().manual_seed(seed + 1)
    keep = torch.zeros(3, C, C, dtype=torch.bool)
    for r in range(3):
        for src in range(C):
            dst = torch.randperm(C, generator=g)[:2]
            keep[r, src, dst] = True
    keep[keep.sum(1, keepdim=True).expand_as(keep) > 3] = False  # cap in-degree
    keep[1, C - 1] = False
    keep[0, 0, 1] = keep[2, 1, 0] = True
    p["transition"] = p["transition"].masked_fill(~keep, NEG)
    p["scores"] = 0.3 * p["scores"]
    return p, extra


# (spacing, rings in tiles of one slot): the default spacing (P = 5: the 6-long sequence
# splits at M = 5) with the register rings; spacing 2 (M = 4, 3 segments) with both
SPARSE_PARAMS = [pytest.param(None, False, id="rows_full-registers"),
                 pytest.param(2, False, id="waves_of_2-registers"),
                 pytest.param(2, True, id="waves_of_2-tiles_of_one_slot")]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("seg_len,tiles", SPARSE_PARAMS)
def test_periodic_sparse_transitions_against_bruteforce(seg_len, tiles, monkeypatch):
    """The sparse transition tables (chain.py, "Sparse periodic transitions"), forced at
    a tiny shape: every chain reads a (3, CP, SP) table with SP = 4 < CP = 8 and gathers
    its vector at the columns; log Z, every gradient (the transition's scattered back
    from the sparse slots) and the Viterbi path against brute-force enumeration, with the
    rings in registers or in tiles of one slot, at the default checkpoint spacing and at 2
    (either way the backward recomputes the rows in waves: this forward, told no backward
    follows, writes none)."""
    tuned(monkeypatch, sparse_from_cp=2)
    tuned(monkeypatch, sparse_below=0.5)
    tuned(monkeypatch, sparse_viterbi=True)
    tuned(monkeypatch, ring_tile=1 if tiles else None)
    if tiles:
        _tiles_of_one_slot(monkeypatch)
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
        tuned(monkeypatch, full_rows=False)
    p, extra = sparse_problem(3, 6, 4, 5, seed=41, lengths=[6, 5, 2], allowed=True)
    x = as_inputs(p, extra)
    assert kn.DEFAULT.sparse_width(x) == 4 and kn._shape(x)[1] == 8
    check_against_brute(p, extra)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_periodic_sparse_viterbi_is_the_dense_one(monkeypatch):
    """The sparse tables give the dense tables' Viterbi path label for label (maxima are
    exact and the columns ascend, so ties break alike) and log Z and every gradient
    within float32 of them, on longer sequences than brute force can enumerate."""
    tuned(monkeypatch, segment=5)
    p, extra = sparse_problem(3, 20, 7, 6, seed=43, lengths=[20, 15, 11], allowed=True)
    extra["allowed"][:, ::5] = True
    x = as_inputs(p, extra)
    tuned(monkeypatch, sparse_viterbi=True)
    out = {}
    for below in (0.0, 1.0):  # dense, then sparse
        tuned(monkeypatch, sparse_from_cp=2)
        tuned(monkeypatch, sparse_below=below)
        lz, saved = kn.forward(x)
        out[below] = (lz, kn.backward(x, saved, torch.ones_like(lz)), kn.viterbi(x),
                      kn.DEFAULT.sparse_width(x))
    assert out[0.0][3] == 0 and out[1.0][3] == 4
    torch.testing.assert_close(out[1.0][0], out[0.0][0], rtol=1e-6, atol=1e-5)
    for name in FLOAT_FIELDS:
        torch.testing.assert_close(out[1.0][1][name], out[0.0][1][name], rtol=1e-4,
                                   atol=1e-5, msg=name)
    (sd, ld, st_d), (ss, ls, st_s) = out[0.0][2], out[1.0][2]
    assert torch.equal(sd, ss) and torch.equal(ld, ls) and torch.equal(st_d, st_s)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_tiled_ring_gives_the_register_ring_bits(monkeypatch):
    """The end-indexed chain with its ring in global memory (end._fwd_end_kernel TILE, any
    tile size)
    gives bitwise the register ring's log Z, every gradient and Viterbi path: it does the
    same float32 operations on every ring element, only in tiles. A ring of 8 slots (K = 7,
    one slot past K) that every sequence wraps, 3 or 4 checkpoint segments; tiles of 1 and
    4 slots with the rows recomputed in waves (MODE 1), tiles of 4 with the rows written
    by the chains (keep; their Viterbi is keep=False's: not run twice). The register ring
    with rows written against recomputed: test_forward_rows_give_the_recomputed_rows_bits."""
    tuned(monkeypatch, segment=4)
    p, extra = make(3, 16, 7, 3, seed=39, lengths=[16, 12, 9], allowed=True, period=3)
    x = as_inputs(p, extra)
    w = torch.tensor([0.7, -1.5, 1.1], device=DEV)

    def run(tile, keep=False):
        tuned(monkeypatch, ring_tile=tile)
        lz, saved = kn.forward(x, keep=keep)
        assert (saved["rows"] is not None) == keep
        g = kn.backward(x, saved, w)
        return [lz, *(g[k] for k in sorted(g)), *(() if keep else kn.viterbi(x))]

    reg = run(0)
    assert torch.isfinite(reg[0]).all()  # every sequence has paths: the gradients are not 0
    for tile, keep in ((1, False), (4, False), (4, True)):
        got = run(tile, keep)
        assert len(got) == len(reg) - 3 * keep
        for a, b in zip(reg, got):
            assert torch.equal(a, b), (tile, keep)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_forward_rows_give_the_recomputed_rows_bits(monkeypatch):
    """forward(keep=True): the chains write the periodic family's rows of every position
    and the backward reads them in one launch; the same gradients, bitwise, as the waves
    that recompute them from checkpoints (one segment per wave, and all in one), and
    within float32 of the torch backend."""
    from semiseg.crf import reference

    tuned(monkeypatch, segment=4)  # 4 checkpoint segments (rows_budget 1: 4 waves)
    p, extra = make(3, 16, 5, 3, seed=45, lengths=[16, 12, 9], allowed=True, period=3)
    x = as_inputs(p, extra)
    w = torch.tensor([1.3, 0.4, -0.8], device=DEV)
    lz, saved = kn.forward(x, keep=True)
    assert saved["rows"] is not None and torch.isfinite(lz).all()
    full = kn.backward(x, saved, w)
    for budget in (1, 1 << 30):
        tuned(monkeypatch, rows_budget=budget)
        g = kn.backward(x, kn.forward(x)[1], w)
        for k in full:
            assert torch.equal(full[k], g[k]), (budget, k)
    x64 = as_inputs(p, extra, torch.float64)
    want = reference.backward(x64, reference.forward(x64)[1], w.double())
    for k in FLOAT_FIELDS:
        torch.testing.assert_close(full[k].double(), want[k], rtol=1e-4, atol=1e-5, msg=k)
    tuned(monkeypatch, rows_budget=1)  # rows over the budget: not written
    assert kn.forward(x, keep=True)[1]["rows"] is None


@pytest.mark.parametrize("meet", [12, 36, 52])
def test_periodic_chains_meeting_off_the_middle(meet, monkeypatch):
    """Tuning.meet: the forward and reversed chains meet at ceil(nb meet / 64) of the nb
    checkpoint segments (M = 4, 10, 14 of 16 here; the sequences of 12 and 9 elsewhere)
    instead of the middle: log Z and every gradient within float32 of the float64
    reference, with the rows kept (the wave right of the meeting point launched after
    the forward chain's second half, before the reversed chain's: on a CPU the two run
    one after the other, so a segment there that read the reversed chain's second half
    would read it unwritten) and with the rows recomputed in waves; the two, and the
    early wave on or off, give the same bits."""
    from semiseg.crf import reference

    tuned(monkeypatch, segment=2, meet=meet, early_wave=True)
    p, extra = make(3, 16, 5, 3, seed=46, lengths=[16, 12, 9], allowed=True, period=3)
    x = as_inputs(p, extra)
    w = torch.tensor([0.7, -1.1, 0.5], device=DEV)
    lz, saved = kn.forward(x, keep=True)
    assert saved["rows"] is not None and saved["tuning"].meet == meet
    early = kn.backward(x, saved, w)
    x64 = as_inputs(p, extra, torch.float64)
    lz64, saved64 = reference.forward(x64)
    torch.testing.assert_close(lz.double(), lz64, rtol=1e-5, atol=1e-5)
    want = reference.backward(x64, saved64, w.double())
    for k in FLOAT_FIELDS:
        torch.testing.assert_close(early[k].double(), want[k], rtol=1e-4, atol=1e-5, msg=k)
    tuned(monkeypatch, early_wave=False)
    late = kn.backward(x, kn.forward(x, keep=True)[1], w)
    tuned(monkeypatch, rows_budget=1)  # rows not kept: recomputed, one segment a wave
    waves = kn.backward(x, kn.forward(x)[1], w)
    for k in early:
        assert torch.equal(early[k], late[k]) and torch.equal(early[k], waves[k]), k


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("period", [None, 3])
def test_viterbi_mask_folded_into_scores_is_the_same(period, monkeypatch):
    """kernels.viterbi folds `allowed` into the scores (FOLD_MASK, for speed): the same
    score, labels and starts as the kernels reading the mask themselves."""
    p, extra = make(3, 9, 4, 3, seed=31, lengths=[9, 7, 4], allowed=True, neg_inf=True,
                    period=period)
    x = as_inputs(p, extra)
    assert x.allowed is not None and not bool(x.allowed.all())
    folded = kn.viterbi(x)
    tuned(monkeypatch, fold_mask=False)
    own = kn.viterbi(x)
    for a, b in zip(folded, own):
        assert torch.equal(a, b)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("period", [None, 3])
def test_duration_sum_in_global_memory_gives_the_register_bits(period, monkeypatch):
    """_bwd_kernel's DB_GLOBAL (the duration-bias gradient summed in g_db, for long
    rings) adds the same terms in the same order as the register sum: in the interpreter
    every gradient bitwise equal (compiled, within float32: the compiler's instruction
    choices differ), with the rows written by the chains (static: both launches and the
    segments across M) and with recomputed rows in waves; and within float32 of the
    float64 torch backend."""
    from semiseg.crf import reference

    tuned(monkeypatch, segment=3)  # 4, 4 and 2 checkpoint segments
    p, extra = make(3, 12, 6, 3, seed=43, lengths=[12, 10, 6], allowed=True, period=period)
    x = as_inputs(p, extra)
    w = torch.tensor([0.9, -1.2, 0.5], device=DEV)
    for budget in (1 << 30, 1):
        tuned(monkeypatch, rows_budget=budget)
        got = {}
        for frm in (1 << 62, 0):
            tuned(monkeypatch, db_global_from=frm)
            assert kn.DEFAULT.db_global(8, 4, True) == (frm == 0)
            got[frm] = kn.backward(x, kn.forward(x, keep=True)[1], w)
        for k in got[0]:
            if DEV == "cpu":
                assert torch.equal(got[0][k], got[1 << 62][k]), (budget, k)
            else:
                torch.testing.assert_close(got[0][k], got[1 << 62][k], rtol=1e-5, atol=1e-6)
    x64 = as_inputs(p, extra, torch.float64)
    want = reference.backward(x64, reference.forward(x64)[1], w.double())
    torch.testing.assert_close(got[0]["duration_bias"].double(), want["duration_bias"],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("elems", [8, 32])
def test_static_backward_with_its_ring_in_tiles_matches_float64(elems, monkeypatch):
    """_bwd_kernel TILE (the static backward's ring in memory, walked in tiles of
    elems / CP slots with an online logsumexp over them; for rings beyond the register
    file): every gradient within float32 of the float64 torch backend, with the rows the
    chains write (both launches, the segments across M) and with recomputed rows in
    waves, with and without the parameter sums (posteriors); several tiles (elems 8: 4
    tiles of 2 slots) and one (elems 32)."""
    from semiseg.crf import reference

    tuned(monkeypatch, segment=3)  # 4, 4 and 2 checkpoint segments
    tuned(monkeypatch, bwd_tile_from=0)
    tuned(monkeypatch, bwd_tile_elems=elems)
    p, extra = make(3, 12, 6, 3, seed=44, lengths=[12, 10, 6], allowed=True)
    x = as_inputs(p, extra)
    assert kn.DEFAULT.bwd_tile(*kn._shape(x)) == elems // 4
    w = torch.tensor([0.9, -1.2, 0.5], device=DEV)
    x64 = as_inputs(p, extra, torch.float64)
    want = reference.backward(x64, reference.forward(x64)[1], w.double())
    for budget in (1 << 30, 1):
        tuned(monkeypatch, rows_budget=budget)
        saved = kn.forward(x, keep=True)[1]  # (a backward may read one forward twice)
        got = kn.backward(x, saved, w)
        post = kn.backward(x, saved, w, wanted=("scores", "proj_start"))
        for k, v in want.items():
            if v is None:
                continue
            torch.testing.assert_close(got[k].double(), v, rtol=1e-4, atol=1e-5,
                                       msg=lambda m, k=k, b=budget: f"{b} {k}: {m}")
            if k in post and post[k] is not None:
                torch.testing.assert_close(post[k].double(), v, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case,seg_len", [(c, None) for c in CASES]
                         + [("all_terms", 1), ("allowed_neginf", 2)])
def test_static_rings_in_tiles_against_bruteforce(case, seg_len, monkeypatch):
    """Every static chain (forward, reversed, recompute waves, Viterbi halves) and the
    backward with the ring in memory, walked in tiles of one slot (several tiles per
    ring, an online logsumexp / max over them): log Z, every gradient and the Viterbi
    path against brute-force enumeration, as the register rings are."""
    _tiles_of_one_slot(monkeypatch)
    if seg_len is not None:
        tuned(monkeypatch, segment=seg_len)
    if seg_len == 1:
        tuned(monkeypatch, rows_budget=1)
    spec = dict(CASES[case])
    p, extra = make(spec.pop("B"), spec.pop("T"), spec.pop("K"), spec.pop("C"), seed=SEED, **spec)
    x = as_inputs(p, extra)
    assert kn.DEFAULT.chain_opts(*kn._shape(x), 4)["TILE"] == 1
    # the posterior backward (tiled, without the parameter sums) at the default spacing
    check_against_brute(p, extra, posteriors=seg_len is None)


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("case", ["all_terms", "allowed_neginf", "K_gt_T", "C1", "T1"])
@pytest.mark.parametrize("elems", [1, 1 << 20])
def test_static_join_in_parts_against_bruteforce(case, elems, monkeypatch):
    """The static join's crossing sum split over programs (chain._cross_part_kernel, one
    per tile of elems / CP slots: one slot each, or the whole ring in one), joined in
    tile order by _join_kernel: log Z and every gradient against brute-force
    enumeration."""
    tuned(monkeypatch, join_parts_from=0)
    tuned(monkeypatch, join_tile_elems=elems)
    spec = dict(CASES[case])
    p, extra = make(spec.pop("B"), spec.pop("T"), spec.pop("K"), spec.pop("C"), seed=SEED, **spec)
    x = as_inputs(p, extra)
    KP, CP = kn._shape(x)
    assert kn.DEFAULT.join_parts(x.batch, KP, CP, x.scores)[0] == (KP if elems == 1 else 1)
    check_against_brute(p, extra)


def test_every_function_of_the_kernel_modules_is_a_triton_function():
    """A helper that lost its @triton.jit still runs in the interpreter (a plain Python
    function), but a GPU compile refuses it: every function these modules define must be
    a Triton function."""
    import inspect

    from semiseg.crf.triton.jit import chain, common, dd, end, split_end

    for mod in (chain, common, dd, end, split_end):
        plain = [n for n, f in vars(mod).items()
                 if inspect.isfunction(f) and f.__module__ == mod.__name__]
        assert not plain, (mod.__name__, plain)


@triton.jit
def _plane_ends_probe(out, slots, oks, NP: tl.constexpr, KP: tl.constexpr,
                      KQ: tl.constexpr):
    i = tl.program_id(0)
    q = tl.program_id(1)
    us = tl.arange(0, KQ)[:, None]
    at = (i * NP + q) * KQ + us
    tl.store(out + at, _plane_ends(i, q, us, NP, KQ))
    slot, ok = _end_slots(i, q, us, NP, KP, KQ)
    tl.store(slots + at, slot)
    tl.store(oks + at, ok.to(tl.int32))


@pytest.mark.parametrize("NP,KP", [(3, 128), (3, 1024), (2, 64), (5, 16), (3, 4)])
def test_split_end_plane_ends(NP, KP):
    """split_end._plane_ends and _end_slots, the index maps of the split end-indexed
    chain (GPU-only: its programs wait for each other, which the interpreter cannot run):
    before every step i the NP planes of KQ rows hold each end of [i, i + NP KQ) exactly
    once, end e in plane e mod NP, row (e div NP) mod KQ (NP KQ >= KP); the rows kept by
    _end_slots are exactly the ends [i, i + KP), each at slot e mod KP, so the ring's
    every slot is written once."""
    KQ = kn.schedule._pow2(-(-KP // NP))
    assert NP * KQ >= KP
    steps = 40
    out, slots, oks = (torch.empty(steps, NP, KQ, dtype=torch.int32, device=DEV)
                       for _ in range(3))
    _plane_ends_probe[(steps, NP)](out, slots, oks, NP=NP, KP=KP, KQ=KQ)
    e, slots, oks = out.cpu().long(), slots.cpu().long(), oks.cpu().bool()
    for i in range(steps):
        assert sorted(e[i].flatten().tolist()) == list(range(i, i + NP * KQ))
        kept = e[i][oks[i]]
        assert sorted(kept.tolist()) == list(range(i, i + KP))
        assert sorted(slots[i][oks[i]].tolist()) == list(range(KP))
        assert torch.equal(slots[i][oks[i]], kept % KP)
    q = torch.arange(NP)[None, :, None]
    u = torch.arange(KQ)[None, None, :]
    assert torch.equal(e % NP, q.expand_as(e)) and torch.equal((e // NP) % KQ, u.expand_as(e))


@triton.jit
def _pack_probe(vals, tags, words, back, back_tags, N: tl.constexpr):
    i = tl.arange(0, N)
    w = common._pack(tl.load(vals + i), tl.load(tags + i))
    tl.store(words + i, w)
    tl.store(back + i, common._unpack(w))
    tl.store(back_tags + i, (w >> 32).to(tl.int32))


def test_exchange_words_round_trip():
    """chain._pack / _unpack, the tagged exchange's words (GPU-only otherwise: the split
    chains' programs wait for each other): float32 values of every kind a part can hold
    (signed zeros, -inf, +inf, denormals, the extremes, NaN) and step tags up to 2^31 - 1
    come back bit for bit, the tag in the word's high half and the value's bits,
    zero-extended, in its low half (a negative value must not spill its sign into the tag)."""
    f = torch.tensor([0.0, -0.0, NEG, float("inf"), 1e-45, -1e-45, 3.4e38, -3.4e38, 1.0,
                      -2.5, float("nan"), 1.17e-38, -7.0, 123.456, -1e-30, 5.0],
                     dtype=torch.float32, device=DEV)
    tags = torch.tensor([1, 2, 3, 2**31 - 1, 7, 8, 9, 10, 2**20, 12, 13, 14, 15, 16, 17, 2**30],
                        dtype=torch.int32, device=DEV)
    words = torch.empty(16, dtype=torch.int64, device=DEV)
    back = torch.empty(16, dtype=torch.float32, device=DEV)
    back_tags = torch.empty(16, dtype=torch.int32, device=DEV)
    _pack_probe[(1,)](f, tags, words, back, back_tags, N=16)
    bits = f.cpu().view(torch.int32).long() & 0xFFFFFFFF
    assert torch.equal(back.cpu().view(torch.int32), f.cpu().view(torch.int32))
    assert torch.equal(back_tags.cpu(), tags.cpu())
    assert torch.equal(words.cpu(), bits | (tags.cpu().long() << 32))


@pytest.mark.parametrize("sms", [132, 114, 78])
def test_checkpoint_segments_fit_one_wave(sms, monkeypatch):
    """The GPU checkpoint spacing never asks for more backward programs (B x segments per
    sequence) than the SMs hold by the rule's target, wherever that target and not the
    sqrt(T K) or MIN_SEGMENT bound set P (segments per sequence rounded up gave
    (32, 300, 30, 39) 288 programs for 264 places: a second wave), and uses the room it has
    (one more segment per sequence would not fit, unless P is bound). Counted directly."""
    monkeypatch.setattr(kn.schedule, "_sm_count", lambda device: sms)
    cuda = torch.device("cuda")
    g = torch.Generator().manual_seed(sms)
    cases = [(32, 300, 30, 39), (16, 20000, 1000, 13), (16, 20000, 4000, 13), (1, 10**6, 1000, 24),
             (8, 20000, 100, 24), (64, 20000, 256, 37)]
    cases += [tuple(int(v) for v in (torch.randint(1, 300, (1,), generator=g).item(),
                                     torch.randint(1, 50000, (1,), generator=g).item(),
                                     torch.randint(1, 3000, (1,), generator=g).item(),
                                     torch.randint(1, 70, (1,), generator=g).item()))
              for _ in range(300)]
    for B, T, K, C in cases:
        P = kn.DEFAULT.segment_length(T, K, B, cuda, C)
        target = kn.DEFAULT.segment_programs(*kn.schedule._padded(T, K, C)) * sms
        bound = P == min(T, math.ceil(math.sqrt(T * min(K, T)))) or P == kn.DEFAULT.min_segment
        programs = B * math.ceil(T / P)
        assert 1 <= P <= T
        if not bound:
            assert programs <= max(target, B), (B, T, K, C, P, programs, target)
            # the room is used: the next shorter spacing that adds a segment would overflow
            fewer = math.ceil(T / (math.ceil(T / P) + 1))
            if fewer >= kn.DEFAULT.min_segment and fewer < P:
                assert B * math.ceil(T / fewer) > target, (B, T, K, C, P, target)
