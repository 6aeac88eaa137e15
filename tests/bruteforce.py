"""Independent oracle: enumerate every segmentation of a tiny sequence (docs/contract.md).

Nothing here shares code with semiseg.crf. Scores are summed term by term exactly as
docs/contract.md writes them, in the dtype of the inputs (use float64), with autograd kept, so
gradients of the enumerated log Z are an oracle for every backend's backward pass.
"""

from __future__ import annotations

import itertools

import torch


def compositions(L: int, K: int):
    """All tuples of durations in [1, K] that sum to L."""
    if L == 0:
        yield ()
        return
    for d in range(1, min(K, L) + 1):
        for rest in compositions(L - d, K):
            yield (d,) + rest


def segmentations(L: int, K: int, C: int):
    """All segmentations of [0, L): lists of (start, duration, label)."""
    for durs in compositions(L, K):
        starts = [sum(durs[:i]) for i in range(len(durs))]
        for labs in itertools.product(range(C), repeat=len(durs)):
            yield [(s, d, c) for s, d, c in zip(starts, durs, labs)]


def path_score(b, seg, scores, transition, duration_bias, start=None, end=None,
               proj_start=None, proj_end=None):
    """score(y) of docs/contract.md for sequence b, as a 0-d tensor (keeps autograd)."""
    total = scores.new_zeros(())
    prev = None
    for s, d, c in seg:
        total = total + scores[b, s:s + d, c].sum() + duration_bias[d - 1, c]
        if proj_start is not None:
            total = total + proj_start[b, s, c]
        if proj_end is not None:
            total = total + proj_end[b, s + d - 1, c]
        if prev is not None:
            # (P, C, C): the slice of the destination's duration, (d - 1) mod P
            tr = transition[(d - 1) % transition.shape[0]] if transition.dim() == 3 else transition
            total = total + tr[prev, c]
        prev = c
    if start is not None:
        total = total + start[seg[0][2]]
    if end is not None:
        total = total + end[seg[-1][2]]
    return total


def is_allowed(b, seg, allowed):
    if allowed is None:
        return True
    return all(bool(allowed[b, s:s + d, c].all()) for s, d, c in seg)


def enumerate_paths(scores, transition, duration_bias, lengths=None, *, start=None,
                    end=None, proj_start=None, proj_end=None, allowed=None):
    """Per sequence: a list of (segmentation, score tensor) over allowed segmentations."""
    B, T, C = scores.shape
    K = duration_bias.shape[0]
    out = []
    for b in range(B):
        L = T if lengths is None else int(lengths[b])
        paths = []
        for seg in segmentations(L, K, C):
            if not is_allowed(b, seg, allowed):
                continue
            sc = path_score(b, seg, scores, transition, duration_bias, start, end,
                            proj_start, proj_end)
            paths.append((seg, sc))
        out.append(paths)
    return out


def log_partition(*args, **kw):
    """Brute-force log Z (B,), differentiable; -inf where nothing is allowed."""
    scores = args[0]
    rows = []
    for paths in enumerate_paths(*args, **kw):
        if not paths:
            rows.append(scores.new_tensor(float("-inf")))
        else:
            rows.append(torch.logsumexp(torch.stack([sc for _, sc in paths]), 0))
    return torch.stack(rows)


def viterbi(*args, **kw):
    """Per sequence: (best score as float, list of best segmentations: ties all listed)."""
    out = []
    for paths in enumerate_paths(*args, **kw):
        if not paths:
            out.append((float("-inf"), []))
            continue
        vals = torch.stack([sc for _, sc in paths]).detach()
        best = float(vals.max())
        tol = 1e-9 * max(1.0, abs(best))
        out.append((best, [seg for seg, sc in paths if float(sc) >= best - tol]))
    return out


def marginals(*args, **kw):
    """Label marginals (B, T, C) and boundary marginals (B, T), by enumeration."""
    scores = args[0]
    B, T, C = scores.shape
    label = torch.zeros(B, T, C, dtype=torch.float64)
    boundary = torch.zeros(B, T, dtype=torch.float64)
    for b, paths in enumerate(enumerate_paths(*args, **kw)):
        if not paths:
            continue
        vals = torch.stack([sc for _, sc in paths]).detach().double()
        probs = torch.softmax(vals, 0)
        for (seg, _), p in zip(paths, probs):
            for s, d, c in seg:
                label[b, s:s + d, c] += p
                boundary[b, s] += p
    return label, boundary
