"""Segment and run posteriors, entropies and samples (semiseg/crf/posteriors.py) against
brute-force enumeration of every segmentation (tests/bruteforce.py), in float64."""

from __future__ import annotations

import math
from collections import Counter

import bruteforce as bf
import pytest
import torch
from test_crf_reference import FORMS, make, split

from semiseg.crf import (
    entropy,
    marginals,
    position_entropy,
    reference_model,
    run_posteriors,
    sample,
    segment_posteriors,
    viterbi,
)

TOL = {"atol": 1e-10, "rtol": 1e-10}
TERMS = [(), ("start", "end", "proj", "allowed")]


def _probs(kw):
    """Per sequence: [(segmentation, probability)] by enumeration."""
    args, rest = split(kw)
    out = []
    for paths in bf.enumerate_paths(*args, **rest):
        if not paths:
            out.append([])
            continue
        p = torch.softmax(torch.stack([sc for _, sc in paths]).detach(), 0)
        out.append([(seg, float(q)) for (seg, _), q in zip(paths, p)])
    return out


def _labels(seg, L):
    lab = [-1] * L
    for s, d, c in seg:
        lab[s:s + d] = [c] * d
    return lab


def _all_segments(kw):
    """Every (b, s, d, c) with d <= K inside [0, L_b), plus a few impossible ones."""
    B, _, C = kw["scores"].shape
    K = kw["duration_bias"].shape[0]
    rows = []
    for b in range(B):
        L = int(kw["lengths"][b])
        for s in range(L):
            for d in range(1, min(K, L - s) + 1):
                for c in range(C):
                    rows.append((b, s, d, c))
        rows.append((b, L - 1, 2, 0))  # runs past L_b: probability 0
    return rows


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("terms", TERMS, ids=["plain", "all-terms"])
@pytest.mark.parametrize("chunk", [None, 2], ids=["chunk-auto", "chunk-2"])
def test_segment_posteriors_match_bruteforce(form, terms, chunk, monkeypatch):
    monkeypatch.setattr(reference_model, "CHUNK", chunk)
    kw = make(2, 5, 2, 3, dd=form, terms=terms, seed=11)
    args, rest = split(kw)
    rows = _all_segments(kw)
    got = segment_posteriors(*args, segments=rows, backend="torch", **rest)
    probs = _probs(kw)
    want = torch.tensor([sum(p for seg, p in probs[b] if (s, d, c) in seg)
                         for b, s, d, c in rows], dtype=torch.float64)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("terms", TERMS, ids=["plain", "all-terms"])
def test_run_posteriors_match_bruteforce(form, terms):
    kw = make(2, 6, 3, 3, dd=form, terms=terms, seed=5)
    args, rest = split(kw)
    B = kw["scores"].shape[0]
    probs = _probs(kw)
    # the runs of the Viterbi path, and each path's whole sequence as one chain, and a
    # chain of two runs
    best = viterbi(*args, backend="torch", **rest)
    labels = best.labels
    for chains in ("runs", "whole", "pairs"):
        spans = []
        for b in range(B):
            L = int(kw["lengths"][b])
            lab = labels[b, :L].tolist()
            starts = [0] + [t for t in range(1, L) if lab[t] != lab[t - 1]]
            ends = starts[1:] + [L]
            if chains == "runs":
                spans += [(b, s, e) for s, e in zip(starts, ends)]
            elif chains == "whole":
                spans.append((b, 0, L))
            else:
                spans += [(b, starts[i], ends[min(i + 1, len(ends) - 1)])
                          for i in range(0, len(starts), 2)]
        got = run_posteriors(*args, labels=labels, spans=spans, backend="torch", **rest)
        want = []
        for b, s, e in spans:
            L = int(kw["lengths"][b])
            target = labels[b, s:e].tolist()
            tot = 0.0
            for seg, p in probs[b]:
                y = _labels(seg, L)
                if (y[s:e] == target and (s == 0 or y[s - 1] != target[0])
                        and (e == L or y[e] != target[-1])):
                    tot += p
            want.append(tot)
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), **TOL)


def test_run_posterior_of_arbitrary_labels_and_checks():
    kw = make(1, 6, 2, 4, dd="periodic", terms=("allowed",), seed=3, lengths=[6])
    args, rest = split(kw)
    labels = torch.tensor([[0, 0, 1, 1, 1, 0]])
    spans = [(0, 0, 2), (0, 2, 5), (0, 5, 6)]
    got = run_posteriors(*args, labels=labels, spans=spans, **rest)
    probs = _probs(kw)[0]
    for (_b, s, e), g in zip(spans, got.tolist()):
        t = labels[0, s:e].tolist()
        want = sum(p for seg, p in probs if _labels(seg, 6)[s:e] == t
                   and (s == 0 or _labels(seg, 6)[s - 1] != t[0])
                   and (e == 6 or _labels(seg, 6)[e] != t[-1]))
        assert abs(g - want) < 1e-10
    with pytest.raises(ValueError, match="overlaps"):
        run_posteriors(*args, labels=labels, spans=[(0, 0, 3), (0, 2, 4)], **rest)
    with pytest.raises(ValueError, match="span"):
        run_posteriors(*args, labels=labels, spans=[(0, 3, 3)], **rest)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("terms", TERMS, ids=["plain", "all-terms"])
def test_entropy_matches_bruteforce(form, terms):
    kw = make(3, 5, 2, 3, dd=form, terms=terms, seed=7, allowed_p=0.1)
    if "start" in terms:
        kw["transition"][..., 0, 1] = float("-inf")  # -inf inputs contribute nothing
        kw["duration_bias"][1, 0] = float("-inf")
    args, rest = split(kw)
    got = entropy(*args, backend="torch", **rest)
    want = torch.tensor([-sum(p * math.log(p) for _, p in pr if p > 0) if pr else math.nan
                         for pr in _probs(kw)], dtype=torch.float64)
    assert torch.isfinite(want).any()
    torch.testing.assert_close(got, want, equal_nan=True, **TOL)


def test_entropy_nothing_allowed_is_nan():
    kw = make(2, 4, 2, 2, seed=1, lengths=[4, 4])
    args, rest = split(kw)
    allowed = torch.ones(2, 4, 2, dtype=torch.bool)
    allowed[1, 2] = False
    h = entropy(*args, allowed=allowed, **rest)
    assert torch.isfinite(h[0]) and torch.isnan(h[1])


def test_position_entropy():
    kw = make(2, 5, 3, 3, terms=("proj",), seed=2)
    args, rest = split(kw)
    lab, bnd = marginals(*args, backend="torch", **rest)
    h_lab, h_bnd = position_entropy(lab, bnd)
    want_lab = -(lab * lab.clamp(min=1e-300).log()).sum(-1)
    p = bnd.clamp(1e-300, 1 - 1e-16)
    want_bnd = torch.where((bnd > 0) & (bnd < 1), -(p * p.log() + (1 - p) * (1 - p).log()),
                           torch.zeros_like(bnd))
    torch.testing.assert_close(h_lab, want_lab, atol=1e-12, rtol=0)
    torch.testing.assert_close(h_bnd, want_bnd, atol=1e-12, rtol=0)
    assert float(h_bnd[:, 0].abs().max()) < 1e-12  # a segment always starts at 0


def _chi_square_p(counts: Counter, probs: list[tuple[tuple, float]], n: int) -> float:
    """p-value of Pearson's chi-square test, categories with expected count < 5 pooled."""
    from scipy.stats import chi2

    obs, exp = [], []
    pool_o = pool_e = 0.0
    for key, p in probs:
        if n * p < 5:
            pool_o += counts.get(key, 0)
            pool_e += n * p
        else:
            obs.append(counts.get(key, 0))
            exp.append(n * p)
    if pool_e > 0:
        obs.append(pool_o)
        exp.append(pool_e)
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    return float(chi2.sf(stat, len(obs) - 1))


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("terms", TERMS, ids=["plain", "all-terms"])
def test_sample_frequencies_chi_square(form, terms):
    kw = make(2, 4, 2, 3, dd=form, terms=terms, seed=13, allowed_p=0.15)
    args, rest = split(kw)
    n = 4000
    samples = sample(*args, num_samples=n, seed=1, **rest)
    for b, pr in enumerate(_probs(kw)):
        L = int(kw["lengths"][b])
        counts = Counter(tuple(s) for s in samples[b])
        keys = {tuple(seg) for seg, _ in pr}
        assert set(counts) <= keys  # every sample is an allowed segmentation of [0, L)
        assert all(sum(d for _, d, _ in s) == L for s in samples[b])
        p = _chi_square_p(counts, [(tuple(seg), q) for seg, q in pr], n)
        assert p > 1e-4, (b, p)


def test_sample_deterministic_and_checks():
    kw = make(2, 7, 3, 4, dd="periodic", terms=("proj", "start"), seed=4)
    args, rest = split(kw)
    a = sample(*args, num_samples=5, seed=3, **rest)
    b = sample(*args, num_samples=5, seed=3, **rest)
    c = sample(*args, num_samples=5, seed=4, **rest)
    assert a == b and a != c
    assert len(a) == 2 and all(len(r) == 5 for r in a)
    with pytest.raises(ValueError, match="num_samples"):
        sample(*args, num_samples=0, **rest)
    allowed = torch.ones(2, 7, 3, dtype=torch.bool)
    allowed[1, 0] = False
    s = sample(*args, num_samples=2, allowed=allowed, **{k: v for k, v in rest.items()})
    assert s[1] == [[], []] and all(s[0])
