"""benchmarks/fly_unannotated.py's interval arithmetic against sets of bases (the
oracle: every base of a random layout tested one by one)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

import fly_unannotated as fu


def _random_spans(rng, n=6, size=300):
    out = []
    for _ in range(n):
        a = int(rng.integers(0, size - 5))
        out.append((a, a + int(rng.integers(1, 60))))
    return out


def _bases(iv):
    return {x for a, b in iv for x in range(a, b)}


@pytest.mark.parametrize("seed", range(20))
def test_interval_operations_match_sets_of_bases(seed):
    rng = np.random.default_rng(seed)
    x, y = _random_spans(rng), _random_spans(rng)
    mx, my = fu.merge(x), fu.merge(y)
    assert _bases(mx) == _bases(x)
    assert all(b < c for (_, b), (c, _) in zip(mx, mx[1:]))  # disjoint, not touching
    assert _bases(fu.intersect(mx, my)) == _bases(x) & _bases(y)
    assert _bases(fu.subtract(mx, my)) == _bases(x) - _bases(y)


@pytest.mark.parametrize("seed", range(10))
def test_agreed_unannotated_is_both_genes_minus_truth(seed):
    rng = np.random.default_rng(100 + seed)
    pred, aug, truth = ({s: fu.merge(_random_spans(rng)) for s in "+-"} for _ in range(3))
    got = fu.agreed_unannotated(pred, aug, truth)
    want = set()
    for s in "+-":
        want |= _bases(pred[s]) & _bases(aug[s])
    want -= _bases(truth["+"]) | _bases(truth["-"])
    # pieces under MIN_PIECE are left out: every piece kept is long, every base of a
    # kept piece is wanted, and every wanted base lies in a kept piece or a short one
    assert all(b - a >= fu.MIN_PIECE for a, b in got)
    assert _bases(got) <= want
    short = [p for p in fu.subtract(fu.merge([(x, x + 1) for x in want]), got)]
    assert all(b - a < fu.MIN_PIECE for a, b in short)
