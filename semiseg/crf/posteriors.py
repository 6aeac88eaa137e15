"""Exact segment and run posteriors, entropies and posterior samples (docs/contract.md's model).

All functions take the arguments of `log_partition` (docs/contract.md) plus their own, and are
exact (no sampling, no enumeration). Notation as in reference.py: boundaries t = 0..L,
a segment (s, d, c) covers positions [s, s + d), seg(s, d, c) is its score
sum_{u in [s, s+d)} f[u, c] + duration_bias[d-1, c] + proj_start[s, c] + proj_end[s+d-1, c],
tr_d = the transition slice a segment of duration d reads as destination ((C, C) static,
transition[(d-1) mod P] periodic or duration-dependent), alpha_t(c) = log of the sum over
segmentations of [0, t) whose last segment has label c, and

    E_t(c) = P(a segment of label c ends at boundary t) = d log Z / d proj_end[t-1, c],

which every backend's backward pass gives (the dispatch's gradient of `proj_end`).

Segment posterior. By the Markov property at boundary e = s + d (given that a segment of
label c ends at e, the prefix [0, e) is independent of the suffix),

    P(segment (s, d, c)) = E_e(c) * exp(open(s, d, c) + seg(s, d, c) - alpha_e(c)),
    open(s, d, c) = start[c] if s = 0, else logsumexp_c' alpha_s(c') + tr_d[c', c];

the second factor is a forward-only conditional probability (the last segment ending at
e is exactly (s, d, c)). Run posterior of a labelled span [s, e) (a merged run of one
label, or a chain of runs such as a whole gene): the probability that the segmentation's
labels on [s, e) equal the given ones, the label at s - 1 differs from the label at s
(or s = 0) and the label at e differs from the label at e - 1 (or e = L). Segment
boundaries inside a run are summed over; between runs of different labels they are
forced. With u_e = log of the sum over prefixes of [0, e) that satisfy the left side
and the labels on [s, e) (a small recursion over the span, one scalar per boundary:
entry from alpha_s over labels != the first label), and c = the label at e - 1,

    P(run) = E_L(c) * exp(u_L - alpha_L(c))                                  if e = L
    P(run) = sum_{d'', c'' != c} E_{e+d''}(c'') * exp(u_e + tr_{d''}[c, c''] + seg(e, d'', c'')
                                                     - alpha_{e+d''}(c''))     if e < L

(the segment that follows the run, (e, d'', c''), and the conditional at its end).

The forward quantities alpha come from the exact torch recursion (reference._Forward,
float64) on the device of the inputs, storing alpha only at the boundaries asked for;
E comes from the selected backend's backward pass. Entropy of the whole segmentation
distribution: H = log Z - E[score], and because score(y) is linear in every floating
input, E[score] = sum over inputs of input * d log Z / d input (terms whose input is -inf
have zero gradient and contribute 0), from each backend's gradients; shared parameters
(transition, duration_bias, start, end) need per-sequence gradients, so each sequence is
its own call. Samples: forward filtering (alpha at every boundary, O(T C) float64), then
backward sampling of (label, duration) pairs, exactly from the posterior.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import reference_model as reference
from .dispatch import _backend
from .inputs import FLOAT_FIELDS, CRFInputs, check_inputs

WORK = torch.float64
NEG = float("-inf")

__all__ = ["entropy", "position_entropy", "run_posteriors", "sample", "segment_posteriors"]


# ---------------------------------------------------------------------------- helpers


def _detach(x: CRFInputs) -> CRFInputs:
    return x.replace(**{n: (getattr(x, n).detach() if getattr(x, n) is not None else None)
                        for n in FLOAT_FIELDS})


def _trd(x: CRFInputs, K: int) -> Tensor:
    """(K, C, C) float64: the transition slice read by a destination of duration d = k + 1."""
    tr = x.transition.to(WORK)
    if tr.dim() == 2:
        return tr.expand(K, *tr.shape)
    return tr[torch.arange(K, device=tr.device) % tr.shape[0]]


def _start_end(x: CRFInputs) -> tuple[Tensor, Tensor]:
    z = torch.zeros(x.C, dtype=WORK, device=x.scores.device)
    return (x.start.to(WORK) if x.start is not None else z,
            x.end.to(WORK) if x.end is not None else z)


def _proj(x: CRFInputs, name: str) -> Tensor:
    v = getattr(x, name)
    return v.to(WORK) if v is not None else torch.zeros(x.scores.shape, dtype=WORK,
                                                         device=x.scores.device)


def _prefix(x: CRFInputs) -> Tensor:
    """S (B, T+1, C) float64: S[:, t] = sum_{u < t} f[:, u]."""
    B, T, C = x.scores.shape
    S = torch.zeros(B, T + 1, C, dtype=WORK, device=x.scores.device)
    torch.cumsum(x.scores.to(WORK), 1, out=S[:, 1:])
    return S


def _bad_prefix(x: CRFInputs) -> Tensor | None:
    """cnt (B, T+1, C) int32: disallowed positions before t; [s, e) allowed iff equal."""
    if x.allowed is None:
        return None
    B, T, C = x.scores.shape
    cnt = torch.zeros(B, T + 1, C, dtype=torch.int32, device=x.scores.device)
    torch.cumsum((~x.allowed).to(torch.int32), 1, out=cnt[:, 1:])
    return cnt


def _alphas(x: CRFInputs, need: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Run the exact forward recursion; return (slot (T+1,) int64, -1 where not stored,
    alpha (n, B, C) float64 at the stored boundaries, log Z (B,) float64). `need` is a
    (T+1,) bool mask of the boundaries to store (None: all)."""
    dev = x.scores.device
    with torch.no_grad(), reference._one_thread(dev):
        m = reference._model(x)
        T = m.T
        if need is None:
            need = torch.ones(T + 1, dtype=torch.bool)
        need = need.cpu()
        slot = torch.full((T + 1,), -1, dtype=torch.int64)
        slot[need] = torch.arange(int(need.sum()))
        alphas = torch.full((int(need.sum()), m.B, m.C), NEG, dtype=WORK, device=dev)
        keep = slot.tolist()
        fw = reference._Forward(m, m.B)
        log_z = torch.full((m.B,), NEG, dtype=WORK, device=dev)
        for t0, t1 in m.chunks():
            A, P, D = reference._chunk_terms(x, t0, t1)
            for i in range(t1 - t0):
                t = t0 + i
                alpha, _ = fw.step(t % m.K, A[i], P[i], **reference._step_args(m, t))
                if keep[t] >= 0:
                    alphas[keep[t]] = alpha
                idx = m.at_len.get(t)
                if idx is not None:
                    log_z[idx] = torch.logsumexp(alpha[idx] + m.end, dim=1)
            if D is not None:
                fw.rebase(D)
    return slot.to(dev), alphas, log_z


def _end_marginals(x: CRFInputs, backend: str) -> tuple[Tensor, Tensor, Tensor]:
    """One forward + backward pass of the chosen backend: E (B, T+1, C) float64 with
    E[:, t] = P(a segment of label c ends at boundary t) (E[:, 0] = 0), the label marginals
    (B, T, C) and the boundary marginals (B, T), in the dtype of scores."""
    module = _backend(x, backend)
    with torch.no_grad():
        log_z, saved = module.forward(x, keep=True)
        g = module.backward(x, saved, torch.ones_like(log_z),
                            wanted=("scores", "proj_start", "proj_end"))
    B, T, C = x.scores.shape
    E = torch.zeros(B, T + 1, C, dtype=WORK, device=x.scores.device)
    E[:, 1:] = g["proj_end"].to(WORK)
    return E, g["scores"], g["proj_start"].sum(-1)


# ---------------------------------------------------------------- segment posteriors


def segment_posteriors(scores, transition, duration_bias, lengths=None, *, segments,
                       start=None, end=None, proj_start=None, proj_end=None, allowed=None,
                       backend="auto") -> Tensor:
    """P(the segmentation contains exactly the segment), for each given segment.

    Args (besides those of `log_partition`):
        segments: (N, 4) integer tensor or list of (b, start, duration, label): sequence
            index, first position, duration >= 1 and label of each segment (for instance
            every segment of a Viterbi path).
    Returns:
        (N,) tensor in the dtype of scores (float64 inputs give float64). A segment that
        cannot occur (outside [0, L_b), longer than K, disallowed) has probability 0.
    """
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    x = _detach(x)
    dev = x.scores.device
    q = torch.as_tensor(segments, dtype=torch.int64).reshape(-1, 4).to(dev)
    if q.shape[0] == 0:
        return torch.zeros(0, dtype=x.scores.dtype, device=dev)
    b, s, d, c = q.unbind(1)
    B, T, C, K = x.batch, x.T, x.C, x.K
    if bool(((b < 0) | (b >= B) | (c < 0) | (c >= C) | (d < 1) | (s < 0)).any()):
        raise ValueError("segments: expected rows (b, start, duration, label) with "
                         f"0 <= b < {B}, start >= 0, duration >= 1, 0 <= label < {C}")
    e = s + d
    ok = (e <= x.lengths[b]) & (d <= min(K, T))
    s, e, d = torch.where(ok, s, 0), torch.where(ok, e, 1), torch.where(ok, d, 1)
    need = torch.zeros(T + 1, dtype=torch.bool, device=dev)
    need[s] = True
    need[e] = True
    slot, alpha, _ = _alphas(x, need)
    E, _, _ = _end_marginals(x, backend)
    S = _prefix(x)
    st, _ = _start_end(x)
    trd = _trd(x, min(K, T))
    a_s = alpha[slot[s], b]  # (N, C)
    opened = torch.logsumexp(a_s + trd[d - 1, :, c], dim=1)  # tr_d[c', c] over c'
    opened = torch.where(s == 0, st[c], opened)
    seg = (S[b, e, c] - S[b, s, c] + x.duration_bias.to(WORK)[d - 1, c]
           + _proj(x, "proj_start")[b, s, c] + _proj(x, "proj_end")[b, e - 1, c])
    cond = torch.exp(opened + seg - alpha[slot[e], b, c]).clamp(max=1.0)
    p = E[b, e, c] * torch.nan_to_num(cond, nan=0.0)
    cnt = _bad_prefix(x)
    if cnt is not None:
        ok &= cnt[b, e, c] == cnt[b, s, c]
    return torch.where(ok, p, torch.zeros_like(p)).to(x.scores.dtype)


# ---------------------------------------------------------------- run posteriors


def run_posteriors(scores, transition, duration_bias, lengths=None, *, labels, spans,
                   start=None, end=None, proj_start=None, proj_end=None, allowed=None,
                   backend="auto") -> Tensor:
    """P(the labels on a span are exactly right and the span is a whole run or chain).

    For a span (b, s, e) with given labels y*[b, s:e], the probability that the
    segmentation labels every position of [s, e) as y* does, that the label at s - 1
    differs from y*[s] (or s = 0) and that the label at e differs from y*[e - 1] (or
    e = L_b). Boundaries inside runs of one label are latent (summed over). For a merged
    run of one label (e.g. a BED row) this is P(that run is exactly right); for a chain
    of runs (e.g. exons and introns of a gene) P(the whole chain is exactly right).

    Args (besides those of `log_partition`):
        labels: (B, T) integer labels (e.g. `viterbi(...).labels`), read on the spans.
        spans: (N, 3) integer tensor or list of (b, start, end), 0 <= start < end <= L_b;
            the spans of one sequence must not overlap.
    Returns:
        (N,) tensor in the dtype of scores.
    """
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    x = _detach(x)
    dev = x.scores.device
    B, T, C = x.batch, x.T, x.C
    K = min(x.K, T)
    q = torch.as_tensor(spans, dtype=torch.int64).reshape(-1, 3)
    labels = torch.as_tensor(labels).to(torch.int64).cpu()
    if tuple(labels.shape) != (B, T):
        raise ValueError(f"labels: expected shape ({B}, {T}), got {tuple(labels.shape)}")
    N = q.shape[0]
    if N == 0:
        return torch.zeros(0, dtype=x.scores.dtype, device=dev)
    _check_spans(q, labels, x.lengths.cpu(), B, C)

    span_of, run_start, is_first, need = _span_tables(q, labels, B, T, K)
    slot, alpha, _ = _alphas(x, need)
    E, _, _ = _end_marginals(x, backend)

    lab = labels.clamp(0, C - 1).to(dev)  # (B, T)
    span_of, run_start, is_first = span_of.to(dev), run_start.to(dev), is_first.to(dev)
    in_span = span_of[:, :T] >= 0  # (B, T)
    G, ps, pe, cnt = _label_sums(x, lab)
    db = x.duration_bias.to(WORK)[:K]  # (K, C)
    trd = _trd(x, K)  # (K, C, C)
    st, _ = _start_end(x)
    not_same = ~torch.eye(C, dtype=torch.bool, device=dev)  # entry: c' != c

    # u sweep: u_t (B,) for boundaries t inside or at the end of a span. The ring holds,
    # by target boundary, R(t', d) = open(t', d) + duration_bias[d-1] + proj_start[t']
    # - G[t'] for the segment of the span's label at t' that would close at t' + d.
    ring = torch.full((B, K, K), NEG, dtype=WORK, device=dev)
    ks = torch.arange(K, device=dev)
    rows = torch.arange(B, device=dev)
    u_end = torch.full((N,), NEG, dtype=WORK, device=dev)
    ends_at: dict[int, list[int]] = {}
    for i in range(N):
        ends_at.setdefault(int(q[i, 2]), []).append(i)
    with torch.no_grad(), reference._one_thread(dev):
        for t in range(T + 1):
            j = t % K
            u = None
            if t > 0:
                c = lab[:, t - 1]
                win = ring[:, j].clone()  # (B, K): d = k + 1
                ring[:, j] = NEG
                ok = (t - 1 - ks[None, :]) >= run_start[:, t - 1, None]  # t - d >= run start
                if cnt is not None:
                    tm = (t - 1 - ks).clamp(min=0)
                    ok &= cnt[:, t, None] == cnt[:, tm]
                ok &= in_span[:, t - 1, None]
                u = G[:, t] + pe[:, t - 1] + torch.logsumexp(
                    torch.where(ok, win, torch.full_like(win, NEG)), dim=1)
                for i in ends_at.get(t, ()):
                    u_end[i] = u[int(q[i, 0])]
            if t == T:
                break
            c = lab[:, t]
            entry = None
            if bool(is_first[:, t].any()):
                if t == 0:
                    entry = st[c][:, None].expand(B, K)
                else:
                    a = alpha[slot[t]]  # (B, C)
                    # lse_{c' != c} alpha_t(c') + tr_d[c', c]
                    w = a[:, None, :] + trd[:, :, c].permute(2, 0, 1)  # (B, K, C')
                    w = torch.where(not_same[c][:, None, :], w, torch.full_like(w, NEG))
                    entry = torch.logsumexp(w, dim=2)
            if t > 0 and u is not None:
                inner = u[:, None] + trd[:, lab[:, t - 1], c].T  # (B, K)
            else:
                inner = torch.full((B, K), NEG, dtype=WORK, device=dev)
            opened = inner
            if entry is not None:
                opened = torch.where(is_first[:, t, None], entry, inner)
            opened = torch.where(in_span[:, t, None], opened, torch.full_like(opened, NEG))
            R = opened + db[:, c].T + (ps[:, t] - G[:, t])[:, None]  # (B, K)
            ring[rows[:, None], (t + 1 + ks[None, :]) % K, ks[None, :]] = R

    p = _exits(x, q, lab, alpha, slot, E, u_end, trd, db, not_same, K)
    return p.to(x.scores.dtype)


def _check_spans(q: Tensor, labels: Tensor, Ls: Tensor, B: int, C: int) -> None:
    """run_posteriors' spans: each inside its sequence, none overlapping another of the
    same sequence, labels in [0, C) (ValueError naming the span otherwise)."""
    N = q.shape[0]
    order = sorted(range(N), key=lambda i: (int(q[i, 0]), int(q[i, 1])))
    prev = (-1, 0)
    for i in order:
        b, s, e = (int(v) for v in q[i])
        if not (0 <= b < B and 0 <= s < e <= int(Ls[b])):
            raise ValueError(f"spans: ({b}, {s}, {e}) is not a span 0 <= start < end <= L_b "
                             "of a sequence b")
        if b == prev[0] and s < prev[1]:
            raise ValueError(f"spans: ({b}, {s}, {e}) overlaps another span of sequence {b}")
        seg_lab = labels[b, s:e]
        if bool(((seg_lab < 0) | (seg_lab >= C)).any()):
            raise ValueError(f"labels: span ({b}, {s}, {e}) has labels outside [0, {C})")
        prev = (b, e)


def _span_tables(q: Tensor, labels: Tensor, B: int, T: int, K: int):
    """Per position: the span holding it (-1: none), the first position of its run of one
    label inside the span, whether a span starts there; and the boundaries whose
    forward values run_posteriors needs (span starts, K past each span's end)."""
    N = q.shape[0]
    span_of = torch.full((B, T + 1), -1, dtype=torch.int64)  # span id of position t
    run_start = torch.zeros(B, T, dtype=torch.int64)  # first position of t's run in its span
    is_first = torch.zeros(B, T + 1, dtype=torch.bool)  # t is a span start
    for i in range(N):
        b, s, e = (int(v) for v in q[i])
        span_of[b, s:e] = i
        is_first[b, s] = True
        lab = labels[b, s:e]
        new = torch.ones(e - s, dtype=torch.bool)
        new[1:] = lab[1:] != lab[:-1]
        first = torch.nonzero(new).flatten()
        rs = torch.zeros(e - s, dtype=torch.int64)
        rs[first] = first
        run_start[b, s:e] = torch.cummax(rs, 0).values + s
    need = torch.zeros(T + 1, dtype=torch.bool)
    for i in range(N):
        b, s, e = (int(v) for v in q[i])
        need[s] = True
        need[e:min(e + K, T) + 1] = True
    return span_of, run_start, is_first, need


def _label_sums(x: CRFInputs, lab: Tensor):
    """Along the given labels: prefix sums G of the scores, the projections at each
    position (ps, pe), and prefix counts of disallowed positions (None without a mask)."""
    B, T = lab.shape
    dev = lab.device
    f = x.scores.to(WORK)
    G = torch.zeros(B, T + 1, dtype=WORK, device=dev)  # prefix sums along the given labels
    torch.cumsum(f.gather(2, lab[:, :, None])[:, :, 0], 1, out=G[:, 1:])
    ps = _proj(x, "proj_start").gather(2, lab[:, :, None])[:, :, 0]  # (B, T)
    pe = _proj(x, "proj_end").gather(2, lab[:, :, None])[:, :, 0]
    cnt = None
    if x.allowed is not None:
        bad = ~x.allowed.gather(2, lab[:, :, None])[:, :, 0]
        cnt = torch.zeros(B, T + 1, dtype=torch.int32, device=dev)
        torch.cumsum(bad.to(torch.int32), 1, out=cnt[:, 1:])
    return G, ps, pe, cnt


def _exits(x: CRFInputs, q: Tensor, lab: Tensor, alpha, slot, E, u_end, trd, db, not_same,
           K: int) -> Tensor:
    """P(the span's labels are right and its run ends at the span's end), from u at each
    span's end: at a sequence's end the end marginal, elsewhere summed over the segment
    of another label that opens there."""
    T = x.T
    dev = lab.device
    span_e = q[:, 2].to(dev)
    span_b = q[:, 0].to(dev)
    ks = torch.arange(K, device=dev)
    L = x.lengths
    c_last = lab[span_b, span_e - 1]
    at_end = span_e == L[span_b]
    a_e = alpha[slot[span_e], span_b, c_last]
    p_end = E[span_b, span_e, c_last] * torch.nan_to_num(
        torch.exp(u_end - a_e).clamp(max=1.0), nan=0.0)
    # the segment (e, d'', c'') after the run, d'' = k + 1
    tgt = span_e[:, None] + 1 + ks[None, :]  # (N, K)
    valid = tgt <= L[span_b, None]
    tgt_c = tgt.clamp(max=T)
    e_c = span_e.clamp(max=T - 1)
    S = _prefix(x)
    seg = (S[span_b[:, None], tgt_c] - S[span_b, span_e][:, None]  # (N, K, C'')
           + db[None] + _proj(x, "proj_start")[span_b, e_c][:, None]
           + _proj(x, "proj_end")[span_b[:, None], tgt_c - 1])
    if x.allowed is not None:
        cnt_all = _bad_prefix(x)
        seg = torch.where(cnt_all[span_b[:, None], tgt_c] == cnt_all[span_b, span_e][:, None],
                          seg, torch.full_like(seg, NEG))
    link = trd[:, c_last, :].transpose(0, 1)  # (N, K, C''): tr_d[c, c'']
    a_t = alpha[slot[tgt_c], span_b[:, None]]  # (N, K, C'')
    cond = torch.exp(u_end[:, None, None] + link + seg - a_t).clamp(max=1.0)
    cond = torch.nan_to_num(cond, nan=0.0)
    w = E[span_b[:, None], tgt_c] * cond
    w = torch.where(valid[:, :, None] & not_same[c_last][:, None, :], w, torch.zeros_like(w))
    p = torch.where(at_end, p_end, w.sum((1, 2)))
    return p


# ---------------------------------------------------------------- entropies


def entropy(scores, transition, duration_bias, lengths=None, *, start=None, end=None,
            proj_start=None, proj_end=None, allowed=None, backend="auto") -> Tensor:
    """Exact entropy (nats) of the posterior over whole segmentations, per sequence (B,).

    H_b = log Z_b - E_b[score], E_b[score] = sum over floating inputs of
    input * d log Z_b / d input, from the backend's gradients (one forward and backward
    pass per sequence, on its valid length, because the shared parameters' gradients sum
    over the batch). NaN-free: -inf inputs have zero gradient and add nothing; a
    sequence with no allowed segmentation gets NaN.
    """
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    x = _detach(x)
    out = torch.empty(x.batch, dtype=WORK, device=x.scores.device)
    for b, L in enumerate(x.lengths.tolist()):
        xb = x.replace(
            scores=x.scores[b:b + 1, :L], lengths=x.lengths[b:b + 1],
            proj_start=None if x.proj_start is None else x.proj_start[b:b + 1, :L],
            proj_end=None if x.proj_end is None else x.proj_end[b:b + 1, :L],
            allowed=None if x.allowed is None else x.allowed[b:b + 1, :L])
        module = _backend(xb, backend)
        with torch.no_grad():
            log_z, saved = module.forward(xb, keep=True)
            if not bool(torch.isfinite(log_z).all()):
                out[b] = float("nan")
                continue
            g = module.backward(xb, saved, torch.ones_like(log_z))
        expected = torch.zeros((), dtype=WORK, device=x.scores.device)
        for name in FLOAT_FIELDS:
            v = getattr(xb, name)
            if v is None:
                continue
            gv = g[name].to(WORK)
            v = v.to(WORK)
            expected = expected + torch.where(gv != 0, v * gv, torch.zeros_like(gv)).sum()
        out[b] = log_z.to(WORK)[0] - expected
    return out.to(x.scores.dtype)


def position_entropy(label: Tensor, boundary: Tensor) -> tuple[Tensor, Tensor]:
    """Per-position entropies (nats) from `marginals(...)`: the label entropy
    -sum_c p log p (B, T) and the boundary entropy, the binary entropy of P(a segment
    starts at t) (B, T). 0 log 0 = 0; both are 0 where the marginals are 0 (t >= L_b)."""

    def xlogx(p):
        p = p.clamp(0.0, 1.0)
        return torch.where(p > 0, p * torch.log(p.clamp(min=torch.finfo(p.dtype).tiny)),
                           torch.zeros_like(p))

    h_label = -xlogx(label).sum(-1)
    h_bnd = -(xlogx(boundary) + xlogx(1.0 - boundary))
    h_bnd = torch.where(boundary > 0, h_bnd, torch.zeros_like(h_bnd))
    return h_label.clamp(min=0.0), h_bnd.clamp(min=0.0)


# ---------------------------------------------------------------- samples


def sample(scores, transition, duration_bias, lengths=None, *, num_samples, seed=0,
           generator=None, start=None, end=None, proj_start=None, proj_end=None,
           allowed=None, backend="auto") -> list[list[list[tuple[int, int, int]]]]:
    """Exact posterior samples by forward filtering, backward sampling.

    Args (besides those of `log_partition`; `backend` is accepted for symmetry: the
    filtering pass is always the exact float64 torch recursion on the inputs' device):
        num_samples: N >= 1 segmentations per sequence.
        seed: seeds a CPU torch.Generator (ignored when `generator` is given); the same
            seed and inputs give the same samples.
        generator: a CPU torch.Generator to draw from instead.
    Returns:
        samples[b][n]: a list of (start, duration, label) tuples covering [0, L_b), in
        order; [] for every n where sequence b has no allowed segmentation.

    Memory: alpha at every boundary, (T+1, B, C) float64, and prefix sums (B, T+1, C).
    Time: one forward pass, then (number of segments) steps over N * B chains, each
    O(K C) per chain.
    """
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples: expected an integer >= 1, got {num_samples!r}")
    x = check_inputs(scores, transition, duration_bias, lengths, start=start, end=end,
                     proj_start=proj_start, proj_end=proj_end, allowed=allowed)
    x = _detach(x)
    if generator is None:
        generator = torch.Generator().manual_seed(int(seed))
    dev = x.scores.device
    B, T, C = x.batch, x.T, x.C
    K = min(x.K, T)
    N = num_samples
    _, alpha, log_z = _alphas(x, None)  # (T+1, B, C)
    S = _prefix(x)
    ps = _proj(x, "proj_start")
    db = x.duration_bias.to(WORK)[:K]
    trd = _trd(x, K)
    st, en = _start_end(x)
    cnt = _bad_prefix(x)
    ks = torch.arange(1, K + 1, device=dev)

    def gumbel(shape):
        u = torch.rand(shape, generator=generator, dtype=WORK).to(dev)
        return -torch.log(-torch.log(u.clamp(min=1e-300)))

    chain_b = torch.arange(B, device=dev).repeat_interleave(N)
    t = x.lengths[chain_b].clone()
    succ_c = torch.zeros(B * N, dtype=torch.int64, device=dev)
    succ_d = torch.zeros(B * N, dtype=torch.int64, device=dev)  # 0: the last segment
    ok_b = torch.isfinite(log_z)
    active = ok_b[chain_b] & (t > 0)
    record = []
    with torch.no_grad(), reference._one_thread(dev):
        while bool(active.any()):
            idx = torch.nonzero(active).flatten()
            bi, ti = chain_b[idx], t[idx]
            n = idx.shape[0]
            last = succ_d[idx] == 0
            link = trd[(succ_d[idx] - 1).clamp(min=0), :, succ_c[idx]]  # (n, C): tr[c, succ]
            link = torch.where(last[:, None], en[None, :], link)
            logits = alpha[ti, bi] + link
            c = torch.argmax(logits + gumbel((n, C)), dim=1)
            s = ti[:, None] - ks[None, :]  # (n, K)
            sc = s.clamp(min=0)
            a_s = alpha[sc, bi[:, None]]  # (n, K, C')
            opened = torch.logsumexp(a_s + trd[:, :, c].permute(2, 0, 1), dim=2)  # (n, K)
            opened = torch.where(s == 0, st[c][:, None], opened)
            w = (opened - S[bi[:, None], sc, c[:, None]] + db[:, c].T
                 + ps[bi[:, None], sc, c[:, None]])
            ok = s >= 0
            if cnt is not None:
                ok &= cnt[bi[:, None], sc, c[:, None]] == cnt[bi, ti, c][:, None]
            w = torch.where(ok, w, torch.full_like(w, NEG))
            k = torch.argmax(w + gumbel((n, K)), dim=1)
            d = k + 1
            record.append((idx.cpu(), (ti - d).cpu(), d.cpu(), c.cpu()))
            t[idx] = ti - d
            succ_c[idx], succ_d[idx] = c, d
            active[idx] = t[idx] > 0
    out: list[list[list[tuple[int, int, int]]]] = [[[] for _ in range(N)] for _ in range(B)]
    for idx, s, d, c in record:
        for i, a, dd, cc in zip(idx.tolist(), s.tolist(), d.tolist(), c.tolist()):
            out[i // N][i % N].append((a, dd, cc))
    for rows in out:
        for segs in rows:
            segs.reverse()
    return out
