"""benchmarks/orf_finder.py against a brute force on tiny random sequences (both strands)."""

from __future__ import annotations

import itertools
import os
import random
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

import orf_finder

STOPS = {"TAA", "TAG", "TGA"}
PAIR = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N"}


def rc(seq: str) -> str:
    return "".join(PAIR[b] for b in reversed(seq.upper()))


def brute_orfs(seq: str, min_codons: int, longest_per_stop: bool = False):
    """Every [i, e) read as codons: ATG first, a stop last, no stop between, long enough."""
    n = len(seq)
    found = set()
    for strand, s in (("+", seq.upper()), ("-", rc(seq))):
        for i in range(n):
            for e in range(i + 3, n + 1, 3):
                codons = [s[k:k + 3] for k in range(i, e, 3)]
                if (codons[0] == "ATG" and codons[-1] in STOPS
                        and not STOPS & set(codons[:-1]) and len(codons) >= min_codons):
                    found.add((i, e, "+") if strand == "+" else (n - e, n - i, "-"))
    if longest_per_stop:  # drop an ORF when a longer one ends at the same stop codon
        def stop_key(o):
            return (o[2], o[1] if o[2] == "+" else o[0])

        best = {}
        for o in found:
            k = stop_key(o)
            if k not in best or o[1] - o[0] > best[k][1] - best[k][0]:
                best[k] = o
        found = set(best.values())
    return sorted(found)


def brute_select(orfs, n):
    """Longest first (ties: leftmost, then +), kept when no base is taken yet."""
    taken = [False] * n
    kept = []
    for s, e, strand in sorted(orfs, key=lambda o: (-(o[1] - o[0]), o[0], o[2])):
        if not any(taken[s:e]):
            taken[s:e] = [True] * (e - s)
            kept.append((s, e, strand))
    return sorted(kept)


def random_seq(rng: random.Random, n: int) -> str:
    # AT-rich with extra ATG and stops so that short ORFs abound on both strands
    parts = []
    while sum(map(len, parts)) < n:
        parts.append(rng.choice(["A", "T", "A", "T", "C", "G", "ATG", "CAT", "TAA", "TTA"]))
    s = "".join(parts)[:n]
    if rng.random() < 0.3:  # lower case and an N run must not change anything / break codons
        k = rng.randrange(n - 5)
        s = s[:k] + s[k:k + 5].lower() + s[k + 5:]
    if rng.random() < 0.3:
        k = rng.randrange(n - 2)
        s = s[:k] + "NN" + s[k + 2:]
    return s


@pytest.mark.parametrize("seed", range(12))
def test_orfs_and_selection_match_brute_force(seed):
    rng = random.Random(seed)
    n = rng.randrange(60, 150)
    seq = random_seq(rng, n)
    min_codons = rng.choice([2, 3, 5, 8])
    for longest in (False, True):
        want = brute_orfs(seq, min_codons, longest)
        got = orf_finder.find_orfs(seq, min_codons, longest_per_stop=longest)
        assert got == want, (seq, min_codons, longest)
        kept = orf_finder.select_orfs(got)
        assert kept == brute_select(want, n)
        # greedy longest-first: no overlaps, and each dropped ORF overlaps a kept one at
        # least as long
        for a, b in itertools.pairwise(kept):
            assert a[1] <= b[0]
        for s, e, _strand in set(want) - set(kept):
            assert any(ks < e and s < ke and ke - ks >= e - s for ks, ke, _ in kept)


def test_both_strands_and_minimum_length():
    # + strand ORF of 4 codons at 2..14; - strand ORF (ATG AAA TAG reversed) at 16..25
    seq = "CC" + "ATGAAACCCTAA" + "GG" + rc("ATGAAATAG") + "C"
    assert orf_finder.find_orfs(seq, 3) == [(2, 14, "+"), (16, 25, "-")]
    assert orf_finder.find_orfs(seq, 4) == [(2, 14, "+")]
    assert orf_finder.find_orfs(seq, 5) == []
    # an ORF without a stop before the end of the sequence is not an ORF
    assert orf_finder.find_orfs("ATGAAAAAAAAA", 2) == []
