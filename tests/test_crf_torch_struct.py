"""Agreement with pytorch-struct's SemiMarkov, an independent implementation.

pytorch-struct scores an edge[b, s, d, c, c'] for a segment [s, s+d) of label c after a
segment of label c' (d = 1..K; index 0 unused) and, for the first segment, sums the edge
over every phantom predecessor c'. That model is ours with start[c] =
logsumexp_c' transition[c', c] (docs/contract.md). Equal lengths only: it needs one of length T.
"""

from __future__ import annotations

import pytest
import torch

torch_struct = pytest.importorskip("torch_struct")
pytestmark = pytest.mark.filterwarnings("ignore:.*arg_constraints")

from semiseg.crf import log_partition, marginals, viterbi  # noqa: E402

F64 = torch.float64


def edges(scores, transition, duration_bias):
    """(B, T, K+1, C, C) pytorch-struct potentials from our terms (static transitions)."""
    B, T, C = scores.shape
    K = duration_bias.shape[0]
    S = torch.cat([torch.zeros_like(scores[:, :1]), scores.cumsum(1)], 1)
    edge = torch.full((B, T, K + 1, C, C), -1e9, dtype=scores.dtype)
    for s in range(T):
        for d in range(1, K + 1):
            if s + d > T:
                break
            seg = S[:, s + d] - S[:, s] + duration_bias[d - 1]  # (B, C)
            edge[:, s, d] = seg[:, :, None] + transition.T[None]  # [c, c'] = tr[c', c]
    return edge


@pytest.mark.parametrize("B, T, C, K", [(2, 6, 3, 3), (3, 9, 2, 4), (2, 5, 4, 2), (1, 7, 2, 7),
                                        (2, 240, 3, 8)])  # the last: several chunks
def test_log_partition_and_marginals_match_torch_struct(B, T, C, K):
    g = torch.Generator().manual_seed(B * 100 + T)
    scores = torch.randn(B, T, C, generator=g, dtype=F64)
    tr = torch.randn(C, C, generator=g, dtype=F64)
    db = torch.randn(K, C, generator=g, dtype=F64)
    start = torch.logsumexp(tr, dim=0)  # the phantom predecessor
    edge = edges(scores, tr, db)
    dist = torch_struct.SemiMarkovCRF(edge)
    z_ts = dist.partition
    z = log_partition(scores, tr, db, start=start, backend="torch")
    torch.testing.assert_close(z, z_ts, atol=1e-9, rtol=1e-9)

    # label marginals: P(t has label c) = sum of edge marginals of segments covering t
    m = dist.marginals  # (B, T, K+1, C, C)
    want = torch.zeros(B, T, C, dtype=F64)
    for s in range(T):
        for d in range(1, K + 1):
            if s + d <= T:
                want[:, s:s + d] += m[:, s, d].sum(-1)[:, None, :]
    lab, _ = marginals(scores, tr, db, start=start, backend="torch")
    torch.testing.assert_close(lab, want, atol=1e-8, rtol=1e-8)

    # Viterbi score: the max-semiring partition, whose phantom predecessor is a max
    best = torch_struct.SemiMarkovCRF(edge).max
    seg = viterbi(scores, tr, db, start=tr.amax(dim=0), backend="torch")
    torch.testing.assert_close(seg.score, best, atol=1e-9, rtol=1e-9)
