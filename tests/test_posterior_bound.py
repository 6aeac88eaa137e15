"""The posterior seam's certificate (annotate/posterior_bound.py; docs/decoding.md, "The
posterior bound"), against the exact float64 reference: for random semi-CRFs and every
cut of two overlapping windows, the stitched posteriors lie within the bound of the
whole sequence's (the two windows decoded as one), and the identity it rests on holds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from semiseg.annotate.posterior_bound import (
    WindowPass,
    cut_bound,
    posteriors_and_ends,
    seam_cut,
    side_bound,
)

NEG = float("-inf")


def random_terms(seed: int, T: int, C: int, K: int, periodic: bool) -> dict:
    """A random semi-CRF in float64 with long memory: sticky transitions, and label 1 of
    duration exactly 3 (the phase of its segment boundaries is a hidden state its
    posteriors do not show, as the gene model's codon frame is), masks and projections."""
    g = torch.Generator().manual_seed(seed)
    f64 = dict(dtype=torch.float64)

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, **f64) * scale

    tr = rnd(C, C) - 6.0 * (1 - torch.eye(C, **f64))
    if periodic:
        tr = tr[None] + rnd(3, C, C, scale=0.5)
    db = rnd(K, C)
    db[:, 1] = NEG
    db[2, 1] = 0.5
    allowed = torch.rand(1, T, C, generator=g) > 0.15
    allowed[..., 0] = True  # label 0 everywhere: every window has a segmentation
    return {"scores": rnd(1, T, C, scale=1.5), "transition": tr, "duration_bias": db,
            "lengths": torch.tensor([T]), "start": rnd(C), "end": rnd(C),
            "proj_start": rnd(1, T, C), "allowed": allowed}


def window(t: dict, a: int, b: int) -> WindowPass:
    """The posterior pass of steps [a, b) of the terms t (the reference, float64), all
    rows kept."""
    w = dict(t, lengths=torch.tensor([b - a]))
    for key in ("scores", "proj_start", "allowed"):
        w[key] = None if t[key] is None else t[key][:, a:b]
    g, e = posteriors_and_ends(w, "torch")
    return WindowPass(a, b, g[0], {(a, b): e[0]})


def cases(n: int = 24):
    """(seed, terms, K, windows A, B and their intersection C, the whole's posteriors)"""
    for seed in range(n):
        rng = np.random.default_rng(seed)
        C, K = int(rng.integers(3, 5)), int(rng.integers(3, 7))
        T = int(rng.integers(90, 160))
        t = random_terms(seed, T, C, K, periodic=seed % 2 == 1)
        b0 = int(rng.integers(T // 5, T // 3))
        a1 = int(rng.integers(b0 + 2 * K + 10, min(T, b0 + 2 * K + 80)))
        whole = window(t, 0, T).post
        yield seed, t, K, window(t, 0, a1), window(t, b0, T), window(t, b0, a1), whole


def stitched_error(c: int, A: WindowPass, B: WindowPass, whole) -> float:
    """The largest difference from the whole's posteriors of A's left of c and B's from c."""
    return max(float((A.post[:c - A.start] - whole[A.start:c]).abs().max()),
               float((B.post[c - B.start:] - whole[c:B.end]).abs().max()))


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_end_marginals_against_enumeration(backend):
    """crf.marginals(ends=True)'s third output, P(a segment of label c ends at t), on
    small periodic semi-CRFs with masks: the sum over every allowed segmentation."""
    from bruteforce import enumerate_paths

    from semiseg.crf.dispatch import marginals

    for seed in range(3):
        t = random_terms(seed, 7, 3, 4, periodic=True)
        kw = dict(start=t["start"], end=t["end"], proj_start=t["proj_start"],
                  allowed=t["allowed"])
        args = (t["scores"], t["transition"], t["duration_bias"], t["lengths"])
        want = torch.zeros(1, 7, 3, dtype=torch.float64)
        paths = enumerate_paths(*args, **kw)[0]
        probs = torch.softmax(torch.stack([sc for _, sc in paths]).detach(), 0)
        for (seg, _), p in zip(paths, probs):
            for s0, d, c in seg:
                want[0, s0 + d - 1, c] += p
        x = args if backend == "torch" else tuple(
            a.float() if a.is_floating_point() else a for a in args)
        kx = kw if backend == "torch" else {k: (v.float() if v.is_floating_point() else v)
                                            for k, v in kw.items()}
        _, _, got = marginals(*x, backend=backend, ends=True, **kx)
        tol = 1e-9 if backend == "torch" else 1e-5
        assert float((got.double() - want).abs().max()) < tol, (seed, backend)


def test_boundary_marginals_of_the_union_are_the_product_over_the_intersection():
    """E_U = E_A E_B / E_C up to one constant over the whole overlap (alpha_C = alpha_B,
    beta_C = beta_A): the identity the certificate rests on."""
    for seed, t, _k, A, B, C, _ in cases(8):
        U = window(t, A.start, B.end)
        lo, hi = B.start, A.end
        ea, eb, ec, eu = (w.marginals(lo, hi) for w in (A, B, C, U))
        ok = ec > 1e-200
        r = np.log(ea[ok]) + np.log(eb[ok]) - np.log(ec[ok]) - np.log(eu[ok])
        assert ok.sum() > 20 and np.ptp(r) < 1e-9, seed
        # where C's is 0 and U's is not (a state B cannot reach from its start, or A's
        # end forbids), A's or B's is not 0: the bound counts that mass whole
        hidden = ~ok & (eu > 1e-200)
        assert not (hidden & (ea + eb <= 1e-200)).any(), seed


def test_bound_holds_at_every_cut():
    """For every cut of every random case, the stitched posteriors are within the bound
    of the whole sequence's; and the cases are not trivial: at some cuts the windows
    are far off (the bound then is too), at others the bound is float64 noise."""
    far, tight = 0, 0
    for seed, _, K, A, B, C, whole in cases():
        for c in range(B.start + K, A.end - K + 2):
            bound = cut_bound(c, K, A, B, C)
            err = stitched_error(c, A, B, whole)
            assert err <= bound + 1e-9, (seed, c, err, bound)
            far += err > 0.05
            tight += bound < 1e-9
    assert far > 20 and tight > 50


def phase_trap() -> dict:
    """A sequence of 92 steps built to fool a test of posteriors: label 1 (P) covers it in
    segments of exactly 3 steps, label 2 (S, 1 step) may stand only at steps 21 and 76
    (and 76 must be S), label 0 (F, a filler of 1-4 steps scoring -10 a step) may stand
    only before step 45. The whole sequence needs P's boundaries on the phase that S at
    76 asks, which S at 21 gives (P(S at 21) ~ 1); a window ending at 60 needs the other
    phase, which S at 21 breaks (P(S at 21) ~ 0). Over [45, 60) every window's
    posteriors are P = 1 exactly, whatever its phase."""
    T, K = 92, 4
    scores = torch.zeros(1, T, 3, dtype=torch.float64)
    scores[..., 0] = -10.0
    db = torch.full((K, 3), NEG, dtype=torch.float64)
    db[:, 0] = 0.0
    db[2, 1] = 0.0
    db[0, 2] = 0.0
    allowed = torch.zeros(1, T, 3, dtype=torch.bool)
    allowed[0, :45, 0] = True
    allowed[0, :, 1] = True
    allowed[0, [21, 76], 2] = True
    allowed[0, 76, 1] = False
    return {"scores": scores, "transition": torch.zeros(3, 3, dtype=torch.float64),
            "duration_bias": db, "lengths": torch.tensor([T]), "start": None, "end": None,
            "proj_start": None, "allowed": allowed}


def test_agreeing_posteriors_do_not_fool_the_bound():
    """The phase trap in windows [0, 60) and [30, 92): at every cut in [48, 57] the two
    windows' posteriors agree exactly over [45, 60) (the test the seams used before
    would accept), while the left window's posterior of S at step 21 is ~1 off the whole
    sequence's; the bound there is at least that error, and no cut certifies."""
    t = phase_trap()
    whole = window(t, 0, 92).post
    A, B, C = window(t, 0, 60), window(t, 30, 92), window(t, 30, 60)
    assert float(whole[21, 2]) > 0.99 and float(A.post[21, 2]) < 0.01
    assert float((A.post[45 - 0:60] - B.post[45 - 30:60 - 30]).abs().max()) < 1e-12
    for c in range(48, 58):
        err = stitched_error(c, A, B, whole)
        assert err > 0.98 and cut_bound(c, 4, A, B, C) >= err
    cut, bound = seam_cut(30, 60, 4, A, B, C, 1e-5, candidates=30)
    assert cut is None and bound > 0.98


def test_seam_cut_takes_the_smallest_bound_within_its_range():
    """seam_cut against boundary marginals laid out by hand: A, B and C from messages
    alpha, beta over 40 steps, A's beta and B's alpha equal to C's (and so proportional
    to each other) only on rows [18, 40) and [0, 24): the blocks of a cut c (K = 3) lie in
    both from c = 21 to 22 alone; the cut is in [lo, hi), and None past tol."""
    rng = np.random.default_rng(0)
    L, Cn, K = 40, 3, 3
    alpha_b = rng.uniform(0.5, 2.0, (L, Cn))
    beta_a = rng.uniform(0.5, 2.0, (L, Cn))
    alpha_a = alpha_b * 7.0  # proportional: the left side's law agrees ...
    alpha_a[:18] *= rng.uniform(0.2, 5.0, (18, Cn))  # ... from row 18 on
    beta_b = beta_a * 0.3
    beta_b[24:] *= rng.uniform(0.2, 5.0, (L - 24, Cn))  # B's future agrees before 24
    mk = lambda m: {(0, L): torch.from_numpy(m)}  # noqa: E731
    A = WindowPass(0, L, None, mk(alpha_a * beta_a))
    B = WindowPass(0, L, None, mk(alpha_b * beta_b))
    C = WindowPass(0, L, None, mk(alpha_b * beta_a))
    bounds = {c: cut_bound(c, K, A, B, C) for c in range(K, L - K + 1)}
    good = [c for c, b in bounds.items() if b < 1e-12]
    assert good == [21, 22]
    assert all(b > 1e-3 for c, b in bounds.items() if c not in good)
    cut, bound = seam_cut(0, L, K, A, B, C, 1e-9, candidates=L)
    assert cut in good and bound < 1e-12
    cut, bound = seam_cut(0, 22, K, A, B, C, 1e-9, candidates=L)  # 21 the last cut tried
    assert cut == 21
    cut, bound = seam_cut(0, 21, K, A, B, C, 1e-9, candidates=L)
    assert cut is None and bound > 1e-3


def test_side_bound_against_direct_sums():
    """side_bound: the minimum over k of sum w |k n / d - 1| by a fine scan over k, the
    entries with w = 0 ignored, those with d = 0 counted whole (w + n)."""
    rng = np.random.default_rng(3)
    w, n, d = rng.uniform(0, 1, 50), rng.uniform(0.5, 2, 50), rng.uniform(0.5, 2, 50)
    w *= 4.0 / w.sum()  # a block's marginals sum to 1 or more
    w[:5] = 0.0
    n[5:8] = 0.0  # ratio 0: weight counts whole
    scan = min(float((w * np.abs(k * n / d - 1)).sum()) for k in np.linspace(0.1, 5, 20001))
    assert side_bound(w, n, d) == pytest.approx(scan, rel=1e-4)
    d[10] = 0.0
    assert side_bound(w, n, d) >= w[10] + n[10]
    # a block's boundary marginals sum to 1 or more; zeros (a window the grammar
    # forbids) certify nothing
    assert side_bound(np.zeros(50), n, d) == float("inf")


def test_seam_cut_takes_the_first_certified_cut_from_the_middle_out(monkeypatch):
    """seam_cut's search, with each cut's bound laid out by hand (cut_bound itself is
    checked against float64 above): a middle cut within tol is taken at once, its bound
    the only one computed, even where another cut's is smaller; past tol, every fourth
    cut from the middle outward, then the others, until one is within tol; none within
    tol: every cut's bound computed once, no cut, the smallest bound."""
    from semiseg.annotate import posterior_bound as pb

    calls = []

    def run(table, tol):
        calls.clear()

        def fake(c, K, A, B, C):
            calls.append(c)
            return table[c]

        monkeypatch.setattr(pb, "cut_bound", fake)
        A, B, C = (WindowPass(0, 100, None) for _ in range(3))
        return pb.seam_cut(0, 100, 4, A, B, C, tol, candidates=9)

    cuts = [4, 16, 27, 39, 50, 62, 74, 85, 97]  # 9 evenly over [4, 97]; the middle is 50
    assert np.array_equal(np.unique(np.linspace(4, 97, 9).round().astype(int)), cuts)
    table = dict.fromkeys(cuts, 1e-9) | {50: 1e-6}
    assert run(table, 1e-5) == (50, 1e-6) and calls == [50]
    table = dict.fromkeys(cuts, 1e-2) | {50: 1e-3, 85: 1e-7, 16: 1e-8, 97: 1e-6}
    assert run(table, 1e-5) == (97, 1e-6) and calls == [50, 4, 97]
    table = dict.fromkeys(cuts, 1e-2) | {50: 1e-3, 85: 1e-7, 16: 1e-8}
    assert run(table, 1e-5) == (16, 1e-8) and calls == [50, 4, 97, 39, 62, 27, 74, 16]
    assert run(dict.fromkeys(cuts, 1e-2) | {74: 1e-4}, 1e-5) == (None, 1e-4)
    assert sorted(calls) == cuts
