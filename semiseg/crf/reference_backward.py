"""The torch backend's hand-written backward pass (reference.py has the model, the forward
and the notation).

The backward pass is hand-written (no autograd graph through the loop). The forward
pass keeps the ring at the start of each chunk (a checkpoint; log space needs no
separate normaliser); the backward pass walks the chunks from the end, recomputes their
alphas from the checkpoints (several chunks side by side, as extra rows of one batched
pass, each ring rolled so that its chunk starts in slot 0), and runs the beta recursion
through a second ring of the closing terms

    h_t(c)          = A_t(c) + beta_t(c)                 (beta_L = end, -inf beyond L)
    beta_gamma_s(c) = P_s(c) + logsumexp_d duration_bias[d-1, c] + h_{s+d}(c)
    beta_t(c')      = logsumexp_c transition[c', c] + beta_gamma_t(c)     t < L
                      (duration-dependent: logsumexp_{d,c} transition[d-1, c', c]
                       + P_t(c) + duration_bias[d-1, c] + h_{t+d}(c)),

killed by `allowed` like the forward ring. Segment marginals
exp(gamma_s + P_s + duration_bias + h_{s+d} - log Z) give the duration_bias gradient
(per step from the exponentials of the beta logsumexp; duration-dependent, per block
of steps, with prefix counts of disallowed positions); start/end marginals of segments
give proj_start/proj_end; the label marginal (the scores gradient, the adjoint of the
prefix sums) is the number of segments started minus the number ended before t,
accumulated backwards. Working memory is O(K C + C^2) per sequence (O(K C^2)
duration-dependent) plus the checkpoints and a bounded number of chunks of per-step
values; nothing is O(T K C). A sequence whose log Z is -inf gets zero gradients.

Periodic transitions in the backward pass: beta_gamma splits by residue,
beta_gamma^r_s(c) = P_s(c) + logsumexp_{d = r+1 mod Q} duration_bias[d-1, c] + h_{s+d}(c),
and beta_t(c') = logsumexp_{r, c} transition[r, c', c] + beta_gamma^r_t(c).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .inputs import CRFInputs
from .reference_model import NEG, WORK, _chunk_terms, _Forward, _Model

_TINY = torch.finfo(WORK).min  # stands in for a -inf maximum in hand-written logsumexp

# The backward pass recomputes several chunks side by side: at most RECOMPUTE_ROWS
# steps x sequences at once, and rings of at most RECOMPUTE_RING elements (past that the
# per-op Python overhead is amortised and the exps dominate; larger groups gain nothing).
RECOMPUTE_ROWS = 1 << 15
RECOMPUTE_RING = 1 << 15


def _recompute(m: _Model, spans, states, terms):
    """The alphas (and, static, gamma_s + P_s) of the chunks `spans`, recomputed from their
    checkpoints side by side: one pass of the longest chunk's length over G * B rows.
    Each ring is rolled so that every chunk's first boundary sits in slot 0."""
    G, B, C, K = len(spans), m.B, m.C, m.K
    dev = m.db.device
    n = max(t1 - t0 for t0, t1 in spans)
    fw = _Forward(m, G * B)
    # slots roll so that each chunk starts in slot 0; the periodic copies so that its
    # first boundary reads copy 0
    rolled = [tuple(torch.roll(s, -(t0 % K), dims=-1) if m.dd else
                    torch.roll(s, (-(t0 % K), -(t0 % m.Q)), dims=(-1, 1)) for s in st)
              for (t0, _), st in zip(spans, states)]
    fw.restore(tuple(torch.cat(parts) for parts in zip(*rolled)))
    A = torch.zeros(n, G * B, C, dtype=WORK, device=dev)
    P = torch.zeros(n, G * B, C, dtype=WORK, device=dev)
    kill = None if m.bad is None else torch.zeros(n, G * B, C, dtype=torch.bool, device=dev)
    first = None
    for g, ((t0, t1), (A_g, P_g, _)) in enumerate(zip(spans, terms)):
        rows = slice(g * B, (g + 1) * B)
        A[:t1 - t0, rows] = A_g
        P[:t1 - t0, rows] = P_g
        if kill is not None:  # boundary t > 0 closes segments over position t - 1
            lo = max(t0, 1)
            kill[lo - t0:t1 - t0, rows] = m.bad[:, lo - 1:t1 - 1].transpose(0, 1)
        if t0 == 0:
            first = torch.zeros(G * B, 1, dtype=torch.bool, device=dev)
            first[rows] = True
    alphas = torch.empty(n, G * B, C, dtype=WORK, device=dev)
    opens = None if m.dd else torch.empty(n, G * B, m.Q, C, dtype=WORK, device=dev)
    for i in range(n):
        j = i % K
        alpha, _ = fw.step(j, A[i], P[i], q=i % m.Q, kill=None if kill is None else kill[i],
                           first=first if i == 0 else None)
        alphas[i] = alpha
        if opens is not None:
            opens[i] = fw.opened
    out = []
    for g, (t0, t1) in enumerate(spans):
        rows = slice(g * B, (g + 1) * B)
        out.append((alphas[:t1 - t0, rows], None if opens is None else opens[:t1 - t0, rows]))
    return out


def _bad_counts(m: _Model, t0: int, n: int) -> Tensor | None:
    """cnt[i] = number of disallowed positions in [t0, t0 + i) per (b, c), for i = 0..n+K-1
    (positions past T count as allowed): segment [s, s + d) is allowed iff
    cnt[s + d - t0] == cnt[s - t0]."""
    if m.bad is None:
        return None
    hi = min(t0 + n + m.K - 1, m.T)
    cnt = torch.zeros(n + m.K, m.B, m.C, dtype=torch.int32, device=m.bad.device)
    if hi > t0:
        c = m.bad[:, t0:hi].transpose(0, 1).to(torch.int32).cumsum(0)
        cnt[1:hi - t0 + 1] = c
        cnt[hi - t0 + 1:] = c[-1]
    return cnt


def gradients(x: CRFInputs, saved, grad_log_z: Tensor) -> dict[str, Tensor]:
    m, checkpoints, log_z, alpha_end = saved
    B, T, C, K = m.B, m.T, m.C, m.K
    dev, out_dtype = x.scores.device, x.scores.dtype
    finite = torch.isfinite(log_z)
    lz = torch.where(finite, log_z, torch.zeros_like(log_z))[:, None]  # (B, 1)
    w = torch.where(finite, grad_log_z.to(WORK), torch.zeros_like(log_z))[:, None]  # (B, 1)

    g_scores = torch.empty(B, T, C, dtype=out_dtype, device=dev)
    g_ps = torch.empty(B, T, C, dtype=out_dtype, device=dev)
    g_pe = torch.empty(B, T, C, dtype=out_dtype, device=dev)
    g_db = torch.zeros(C, K, dtype=WORK, device=dev)
    g_db_b = torch.zeros(B, C, K, dtype=WORK, device=dev)  # static: accumulated per step
    g_start = torch.zeros(C, dtype=WORK, device=dev)
    g_end = (torch.exp(alpha_end + m.end - lz) * w).sum(0)

    hbuf = torch.full((B, C, 2 * K), NEG, dtype=WORK, device=dev)
    db_t = m.db.T.contiguous()  # (C, K), d = k + 1
    tr_p = by_r = r_of_k = None  # (dd: tr_p; static / periodic: the residues)
    if m.dd:
        tr_p = m.tr.permute(1, 2, 0).contiguous()  # (C+1, C, K): [src, dst, d-1]
        g_tr = torch.zeros_like(tr_p)
        # per-step segment marginals are (B, C+1, C, K): this many steps at a time
        blk = max(1, (1 << 19) // (B * (C + 1) * C * K))
    else:
        Q = m.Q
        g_tr = torch.zeros_like(m.tr)  # (Q, C, C)
        blk = max(1, (1 << 18) // (B * Q * C * C))
        r_of_k = torch.arange(K, device=dev) % Q  # residue of duration d = k + 1
        by_r = torch.nn.functional.one_hot(r_of_k, Q).to(WORK)  # (K, Q)
    none = torch.full((B, C), NEG, dtype=WORK, device=dev)
    beyond = torch.tensor([0.0 if n >= T else NEG for n in m.lengths], dtype=WORK,
                          device=dev)[:, None]  # -inf for sequences with L_b < t
    min_len = min(m.lengths)
    carry = torch.zeros(B, C, dtype=WORK, device=dev)  # label marginal after the chunk
    h_tail = torch.full((K, B, C), NEG, dtype=WORK, device=dev)  # h_{t1..t1+K-1} (dd)
    chunks = m.chunks()
    ring = B * (C + 1) * C * K if m.dd else B * C * K
    group = max(1, min(RECOMPUTE_ROWS // (B * (chunks[0][1] - chunks[0][0])),
                       RECOMPUTE_RING // ring))
    recomputed, terms = {}, {}
    for ci in range(len(chunks) - 1, -1, -1):
        t0, t1 = chunks[ci]
        n = t1 - t0
        if ci not in recomputed:
            # recompute the alphas (and gamma_s + P_s, static) of this chunk and of the
            # group - 1 before it, side by side from their checkpoints
            ids = list(range(max(0, ci - group + 1), ci + 1))
            terms = {cj: _chunk_terms(x, *chunks[cj]) for cj in ids}
            out = _recompute(m, [chunks[cj] for cj in ids], [checkpoints[cj] for cj in ids],
                             [terms[cj] for cj in ids])
            recomputed = dict(zip(ids, out))
        alphas, opens = recomputed.pop(ci)
        A, P, D = terms.pop(ci)
        if D is not None:
            # rebase the closing terms from S[t1] = 0 to S[t0] = 0
            hbuf.add_(D[:, :, None])
            if m.dd:
                h_tail.add_(D)

        # the beta recursion, backwards through the chunk
        betas, bgs, starts = _betas(m, t0, n, A, P, opens, hbuf, db_t, lz, w, g_db_b, by_r,
                                    r_of_k, tr_p, none, beyond, min_len)

        if m.dd:
            h_tail = _dd_marginals(m, t0, n, A, P, alphas, betas, starts, h_tail, db_t, tr_p,
                                   lz, w, none, blk, g_tr, g_db)

        # the other marginals, vectorised over the chunk
        ends = torch.exp(alphas + betas - lz) * w  # P(segment of c ends at boundary t)
        if not m.dd:
            if t0 == 0:
                g_start += starts[0].sum(0)
            for a0 in range(0, n, blk):
                # (r, B, Q, C', C): alpha_t(c') + transition[q, c', c] + beta_gamma^q_t(c)
                a = alphas[a0:a0 + blk][:, :, None, :, None]
                bg = bgs[a0:a0 + blk].transpose(2, 3)[:, :, :, None, :]
                g_tr += (torch.exp(a + m.tr + bg - lz[:, :, None, None])
                         * w[:, :, None, None]).sum((0, 1))
        hi = min(t1, T)
        rows = hi - t0
        g_ps[:, t0:hi] = starts[:rows].transpose(0, 1).to(out_dtype)
        lo = max(t0, 1)
        g_pe[:, lo - 1:t1 - 1] = ends[lo - t0:].transpose(0, 1).to(out_dtype)
        net = ends - starts  # marginal(u) = sum_{t > u} ends_t - starts_t
        rev = net.flip(0).cumsum(0).flip(0)  # rev[i] = sum_{i' >= i} net[i']
        label = torch.cat([rev[1:], torch.zeros_like(rev[:1])]) + carry
        g_scores[:, t0:hi] = label[:rows].transpose(0, 1).to(out_dtype)
        carry = carry + rev[0]

    return _assemble(x, m, g_scores, g_ps, g_pe, g_tr, g_db, g_db_b, g_start, g_end)


def _betas(m: _Model, t0: int, n: int, A, P, opens, hbuf, db_t, lz, w, g_db_b, by_r, r_of_k,
           tr_p, none, beyond, min_len):
    """The beta recursion backwards through one chunk [t0, t0 + n): betas (closing),
    beta_gamma^r (static / periodic, residues last; None for dd) and the start marginals;
    pushes h_t = A_t + beta_t into hbuf and adds the duration-bias marginals to g_db_b."""
    B, C, K, T = m.B, m.C, m.K, m.T
    dev = hbuf.device
    Q = None if m.dd else m.Q
    betas = torch.full((n, B, C), NEG, dtype=WORK, device=dev)  # beta_t (closing)
    # beta_gamma^r_s (static/periodic), residues last
    bgs = None if m.dd else torch.full((n, B, C, Q), NEG, dtype=WORK, device=dev)
    starts = torch.zeros(n, B, C, dtype=WORK, device=dev)  # P(segment of c starts at s)
    # gamma^r_s + P_s - log Z, residues last (n, B, C, Q)
    opens_lz = None if m.dd else opens.transpose(2, 3) - lz[:, :, None]
    for i in range(n - 1, -1, -1):
        t = t0 + i
        if t < T:
            if m.bad is not None:  # segments over position t: gone
                hbuf.masked_fill_(m.bad[:, t, :, None], NEG)
            j = (t + 1) % K
            close = hbuf[:, :, j:j + K]  # h_{t+d}, d = 1..K
            if t == 0 and m.dd:
                break  # the starts at 0 (phantom predecessor) come below
            if m.dd:
                u = P[i][:, :, None] + db_t + close  # (B, C, K)
                beta = torch.logsumexp(tr_p[:C] + u[:, None], dim=(2, 3))
            else:
                # beta_gamma^r_t by a logsumexp whose exponentials also give the
                # marginals of the segments starting at t (duration_bias gradient)
                v = close + db_t
                mx = v.amax(dim=2).clamp_(min=_TINY)
                e = torch.exp(v - mx[:, :, None])  # (B, C, K)
                tot = e.sum(dim=2, keepdim=True) if Q == 1 else e @ by_r  # (B, C, Q)
                bg = torch.log(tot, out=bgs[i]).add_(mx[:, :, None]).add_(P[i][:, :, None])
                fac = torch.exp(opens_lz[i] + mx[:, :, None]).mul_(w[:, :, None])
                g_db_b.addcmul_(e, fac if Q == 1 else fac[:, :, r_of_k])
                torch.sum(tot * fac, dim=2, out=starts[i])
                if t == 0:
                    break
                # (B, Q, C', C) over the residues and the destination labels
                beta = torch.logsumexp(m.tr + bg.transpose(1, 2)[:, :, None, :],
                                       dim=(1, 3))
        else:
            beta = none
        if t > min_len:
            beta = beta + beyond
        idx = m.at_len.get(t)
        if idx is not None:
            beta = beta.clone()
            beta[idx] = m.end
            beyond[idx] = 0.0
        betas[i] = beta
        _Forward._push(hbuf, t % K, A[i] + beta)
    return betas, bgs, starts


def _dd_marginals(m: _Model, t0: int, n: int, A, P, alphas, betas, starts, h_tail, db_t, tr_p,
                  lz, w, none, blk, g_tr, g_db):
    """Duration-dependent: the segment marginals of one chunk into g_tr, g_db and starts;
    returns the closing terms h of the chunk's first K boundaries (the next chunk's tail)."""
    B, C, K, T = m.B, m.C, m.K, m.T
    # segment marginals, vectorised over blocks of steps: for a segment (s, d, c)
    # after c', exp(alpha_s(c') + transition[d-1, c', c] + P_s(c)
    #               + duration_bias[d-1, c] + h_{s+d}(c) - log Z),  h = A + beta
    # (unmasked h; disallowed segments are dropped with the prefix counts)
    h_ext = torch.cat([A + betas, h_tail])  # h_{t0..t1+K-1}
    cnt = _bad_counts(m, t0, n)
    for i0 in range(0, min(n, T - t0), blk):
        i1 = min(i0 + blk, n, T - t0)
        hw = h_ext[i0 + 1:i1 + K].unfold(0, K, 1)  # (r, B, C, K): h_{s+d}, d = k+1
        if cnt is not None:
            ok = cnt[i0 + 1:i1 + K].unfold(0, K, 1) == cnt[i0:i1, :, :, None]
            hw = torch.where(ok, hw, torch.full_like(hw, NEG))
        u = (P[i0:i1, :, :, None] + db_t) + hw  # (r, B, C, K)
        a_aug = torch.cat([alphas[i0:i1], none[None, :, :1].expand(i1 - i0, B, 1)], 2)
        if t0 + i0 == 0:  # the first segment's predecessor: the phantom label
            a_aug[0] = NEG
            a_aug[0, :, C] = 0.0
        seg = torch.exp(tr_p + u[:, :, None] + (a_aug - lz)[:, :, :, None, None])
        seg = seg * w[:, :, None, None]
        g_tr += seg.sum((0, 1))
        seg_c = seg.sum(2)  # (r, B, C, K)
        g_db += seg_c.sum((0, 1))
        starts[i0:i1] = seg_c.sum(3)
    return h_ext[:K].clone()


def _assemble(x: CRFInputs, m: _Model, g_scores, g_ps, g_pe, g_tr, g_db, g_db_b, g_start,
              g_end) -> dict[str, Tensor]:
    """The gradient dict from the accumulated float64 sums, in the inputs' shapes and dtype."""
    C, K = m.C, m.K
    out_dtype = x.scores.dtype
    if m.dd:
        g_tr = g_tr.permute(2, 0, 1)  # (K, C+1, C)
        g_start = g_tr[:, C].sum(0)
        g_tr = g_tr[:, :C]
    g_tr_full = torch.zeros_like(x.transition, dtype=out_dtype)
    if m.dd:
        g_tr_full[:K] = g_tr.to(out_dtype)
    else:
        g_tr_full.copy_(g_tr.reshape(x.transition.shape))
    g_db_full = torch.zeros_like(x.duration_bias, dtype=out_dtype)
    g_db_full[:K] = (g_db + g_db_b.sum(0)).T.to(out_dtype)
    return {
        "scores": g_scores,
        "transition": g_tr_full,
        "duration_bias": g_db_full,
        "start": g_start.to(out_dtype),
        "end": g_end.to(out_dtype),
        "proj_start": g_ps,
        "proj_end": g_pe,
    }


