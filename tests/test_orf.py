"""ORF features (semiseg/genemodel/orf.py) against a direct scan of the sequence, base by base."""

from __future__ import annotations

import math
import random

import torch

from semiseg.genemodel.orf import N_ORF, orf_features

STOP = {"TAA", "TAG", "TGA"}
COMP = str.maketrans("ACGTN", "TGCAN")


def rc(s):
    return s.translate(COMP)[::-1]


def direct(seq: str, L: int, T: int) -> list[list[float]]:
    """The module's definitions, written out with string scans."""
    def trip(v):
        return seq[v:v + 3] if 0 <= v and v + 3 <= L else ""

    def stop_p(v):
        return trip(v) in STOP

    def stop_m(v):
        return len(trip(v)) == 3 and rc(trip(v)) in STOP

    def back(u, hit, strict):
        v = u - 3 if strict else u
        while v >= 0:
            if hit(v):
                return u - v
            v -= 3
        return u + 3

    def ahead(u, hit, strict):
        v = u + 3 if strict else u
        while v < T:
            if hit(v):
                return v - u
            v += 3
        return L - u

    out = []
    for t in range(T):
        row = []
        for strand in "+-":
            for j in range(3):
                u = t - j if strand == "+" else t - (2 - j)
                if u < 0 or t >= L:
                    row += [0.0] * 3
                    continue
                if strand == "+":
                    d = [back(u, stop_p, True), ahead(u, stop_p, False),
                         back(u, lambda v: trip(v) == "ATG", True)]
                else:
                    d = [ahead(u, stop_m, True), back(u, stop_m, False),
                         ahead(u, lambda v: trip(v) == "CAT", True)]
                row += [math.log1p(max(x, 0)) / math.log1p(4096) for x in d]
        out.append(row)
    return out


def onehot(seq: str, T: int) -> torch.Tensor:
    x = torch.zeros(T, 4)
    for i, b in enumerate(seq[:T]):
        if b in "ACGT":
            x[i, "ACGT".index(b)] = 1
    return x


def test_orf_features_against_a_direct_scan():
    rng = random.Random(0)
    T = 97
    seqs = ["".join(rng.choice("ACGTTAAGN" if i == 2 else "ACGT") for _ in range(T))
            for i in range(3)]
    lengths = [T, 80, 91]
    x = torch.stack([onehot(s, T) for s in seqs])
    got = orf_features(x, torch.tensor(lengths))
    assert got.shape == (3, T, N_ORF)
    for b, (s, L) in enumerate(zip(seqs, lengths)):
        want = torch.tensor(direct(s, L, T))
        assert torch.allclose(got[b], want, atol=1e-6), (b, (got[b] - want).abs().argmax())


def test_orf_features_swap_strands_under_reverse_complement():
    rng = random.Random(1)
    seq = "".join(rng.choice("ACGT") for _ in range(120))
    f = orf_features(onehot(seq, 120)[None], torch.tensor([120]))[0]
    g = orf_features(onehot(rc(seq), 120)[None], torch.tensor([120]))[0].flip(0)
    # plus-strand codon position j at t is the minus strand's j at the mirrored base,
    # except where the edge rules differ (the codon runs off either end)
    inner = slice(3, 117)
    assert torch.allclose(f[inner, :9], g[inner, 9:], atol=1e-6)
