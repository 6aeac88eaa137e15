"""The torch backend (semiseg/crf/reference.py) against brute-force enumeration.

Every case runs in float64 (docs/contract.md: 1e-10) and with several chunk sizes, so
that the checkpoints, the ring rebasing between chunks and the recomputation in the
backward pass are all exercised at tiny T.
"""

from __future__ import annotations

import math
import zlib

import bruteforce as bf
import pytest
import torch

from semiseg.crf import (
    log_partition,
    marginals,
    reference,
    reference_backward,
    reference_model,
    viterbi,
)

F64 = torch.float64
TOL = dict(atol=1e-10, rtol=1e-10)
BATCHED = ("scores", "proj_start", "proj_end", "allowed", "lengths")
NAMES = ("scores", "transition", "duration_bias", "start", "end", "proj_start", "proj_end")


@pytest.fixture(params=[None, 2], ids=["chunk-auto", "chunk-2"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(reference_model, "CHUNK", request.param)
    return request.param


FORMS = ("static", "dur-trans", "periodic")


def period_for(K):
    """The period of the "periodic" form: 3 where K allows (P < K), else 1; at K = 1 no
    P < K exists, so P = 2 > K (fully duration-dependent with a slice never used)."""
    return max(1, min(3, K - 1)) if K > 1 else 2


def make(B, T, C, K, *, dd=False, terms=(), lengths=None, seed=0, allowed_p=0.25):
    """Random float64 inputs; `terms` picks the optional ones. `dd`: False or "static"
    (C, C); True or "dur-trans" (K, C, C); "periodic" (P, C, C), P = period_for(K)."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=F64)

    form = {False: "static", True: "dur-trans"}.get(dd, dd)
    tr_shape = {"static": (C, C), "dur-trans": (K, C, C),
                "periodic": (period_for(K), C, C)}[form]
    kw = dict(scores=r(B, T, C), transition=r(*tr_shape), duration_bias=r(K, C))
    if "start" in terms:
        kw["start"] = r(C)
    if "end" in terms:
        kw["end"] = r(C)
    if "proj" in terms:
        kw["proj_start"] = r(B, T, C)
        kw["proj_end"] = r(B, T, C)
    if "allowed" in terms:
        kw["allowed"] = torch.rand(B, T, C, generator=g) > allowed_p
    if lengths is None:
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        lengths[0] = T
    kw["lengths"] = torch.as_tensor(lengths)
    return kw


def split(kw):
    """(positional args, keyword args) for both semiseg.crf and bruteforce."""
    kw = dict(kw)
    args = (kw.pop("scores"), kw.pop("transition"), kw.pop("duration_bias"), kw.pop("lengths"))
    return args, kw


def float_inputs(kw):
    return {n: kw[n] for n in NAMES if kw.get(n) is not None}


def oracle(kw, *, check_marginals=True):
    """Brute-force results for `kw`: log Z, the gradients of sum_b w_b log Z_b (w a fixed
    random cotangent), the best paths and, optionally, the marginals."""
    B = kw["scores"].shape[0]
    leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
    kw_leaf = {**kw, **leaves}
    w = torch.randn(B, dtype=F64, generator=torch.Generator().manual_seed(1))
    names = list(leaves)
    rows = []
    g_want = [torch.zeros_like(leaves[n]) for n in names]
    # one sequence at a time: the oracle's own gradient of a -inf row is NaN (logsumexp
    # of nothing), so those rows stay out of it; a backend must give them exactly zero
    for b in range(B):
        sub = {k: (v[b:b + 1] if k in BATCHED and v is not None else v)
               for k, v in kw_leaf.items()}
        a_b, o_b = split(sub)
        z_b = bf.log_partition(*a_b, **o_b)[0]
        rows.append(z_b.detach())
        if torch.isfinite(z_b):
            gb = torch.autograd.grad(z_b * w[b], [leaves[n] for n in names], allow_unused=True)
            g_want = [x if y is None else x + y for x, y in zip(g_want, gb)]
    args_d, opts_d = split(kw)
    out = dict(z=torch.stack(rows), w=w, grads=dict(zip(names, g_want)),
               best=bf.viterbi(*args_d, **opts_d), marginals=None)
    if check_marginals:
        out["marginals"] = bf.marginals(*args_d, **opts_d)
    return out


def check_backend(kw, want, backend="torch"):
    """A backend's log Z, gradients, Viterbi path and marginals against `oracle(kw)`."""
    B = kw["scores"].shape[0]
    leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
    args, opts = split({**kw, **leaves})
    got = log_partition(*args, **opts, backend=backend)
    assert got.dtype == F64
    torch.testing.assert_close(got, want["z"], **TOL)
    fin = torch.isfinite(want["z"])
    z = (torch.where(fin, got, torch.zeros_like(got)) * want["w"]).sum()
    names = list(leaves)
    g_got = torch.autograd.grad(z, [leaves[n] for n in names], allow_unused=True)
    for n, a in zip(names, g_got):
        assert a is not None, n
        assert not torch.isnan(a).any(), n
        torch.testing.assert_close(a, want["grads"][n], **TOL, msg=lambda m, n=n: f"grad {n}: {m}")

    # Viterbi: score, a best path, and the returned path's own score
    args_d, opts_d = split(kw)
    seg = viterbi(*args_d, **opts_d, backend=backend)
    lengths = kw["lengths"]
    for b in range(B):
        score, paths = want["best"][b]
        if not paths or score == -math.inf:
            assert seg.score[b] == -math.inf and seg.segments[b] == []
            assert (seg.labels[b] == -1).all()
            continue
        assert abs(float(seg.score[b]) - score) <= 1e-10 * max(1.0, abs(score))
        assert [tuple(s) for s in seg.segments[b]] in [[tuple(s) for s in p] for p in paths]
        own = bf.path_score(b, seg.segments[b], *args_d[:3], **{
            k: v for k, v in opts_d.items() if k != "allowed"})
        assert abs(float(own) - float(seg.score[b])) <= 1e-10 * max(1.0, abs(score))
        L = int(lengths[b])
        want_labels = torch.full((kw["scores"].shape[1],), -1, dtype=torch.int64)
        for s, d, c in seg.segments[b]:
            want_labels[s:s + d] = c
        assert torch.equal(seg.labels[b], want_labels)
        assert seg.segments[b][0][0] == 0 and sum(d for _, d, _ in seg.segments[b]) == L

    if want["marginals"] is not None:
        lab, bnd = marginals(*args_d, **opts_d, backend=backend)
        lab_w, bnd_w = want["marginals"]
        # the oracle's softmax over only -inf paths is NaN; the contract says 0 there
        lab_w = torch.where(fin[:, None, None], lab_w, torch.zeros_like(lab_w))
        bnd_w = torch.where(fin[:, None], bnd_w, torch.zeros_like(bnd_w))
        torch.testing.assert_close(lab, lab_w, **TOL)
        torch.testing.assert_close(bnd, bnd_w, **TOL)


def check_against_bruteforce(kw, *, check_marginals=True, backend="torch"):
    check_backend(kw, oracle(kw, check_marginals=check_marginals), backend)


# (B, T, C, K): K in {1, 2, 3, >= T}; C up to 3 where the enumeration stays small
SHAPES = [(3, 7, 2, 1), (2, 6, 2, 2), (2, 5, 2, 3), (2, 5, 2, 5), (2, 4, 2, 9),
          (2, 4, 3, 2), (2, 3, 3, 4), (2, 1, 3, 1), (2, 3, 1, 2)]
TERMS = {"plain": (), "start-end": ("start", "end"), "proj": ("proj",),
         "allowed": ("allowed",), "all": ("start", "end", "proj", "allowed")}


SHAPE_IDS = [f"B{b}T{t}C{c}K{k}" for b, t, c, k in SHAPES]


def _seed(*key):
    return zlib.crc32(repr(key).encode()) % 1000


@pytest.mark.parametrize("dd", FORMS)
@pytest.mark.parametrize("terms", list(TERMS), ids=list(TERMS))
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_matches_bruteforce(shape, terms, dd):
    B, T, C, K = shape
    kw = make(B, T, C, K, dd=dd, terms=TERMS[terms], seed=_seed(shape, terms, dd))
    check_against_bruteforce(kw)


@pytest.mark.parametrize("dd", FORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_matches_bruteforce_small_chunks(shape, dd, monkeypatch):
    """Chunks of 1, 2 and 3 steps, recomputed all at once, one at a time and two at a
    time: every ring rebase, checkpoint restore and ring roll is exercised."""
    B, T, C, K = shape
    kw = make(B, T, C, K, dd=dd, terms=TERMS["all"], seed=_seed(shape, dd, "chunks"))
    ring = B * (C + 1) * C * K if dd == "dur-trans" else B * 3 * C * K
    for size, group in ((1, None), (2, 1), (3, 2)):
        monkeypatch.setattr(reference_model, "CHUNK", size)
        if group is not None:
            monkeypatch.setattr(reference_backward, "RECOMPUTE_RING", group * ring)
        check_against_bruteforce(kw, check_marginals=size == 2)


@pytest.mark.parametrize("dd", FORMS)
def test_neg_inf_parameters(dd, chunk):
    """Forbidden transitions, durations and first/last labels (-inf) are exact."""
    B, T, C, K = 2, 4, 3, 3
    kw = make(B, T, C, K, dd=dd, terms=("start", "end", "proj"), seed=7)
    ninf = -math.inf
    kw["transition"][..., 0, 1] = ninf  # never 0 -> 1
    kw["transition"][..., 2, 2] = ninf
    kw["duration_bias"][0, 2] = ninf  # label 2 never lasts 1
    kw["duration_bias"][2, 0] = ninf
    kw["start"][1] = ninf
    kw["end"][0] = ninf
    check_against_bruteforce(kw)


@pytest.mark.parametrize("dd", FORMS)
def test_nothing_allowed(dd, chunk):
    """A sequence with no allowed segmentation: log Z = -inf, zero (not NaN) gradients,
    empty Viterbi path; the others are unaffected."""
    B, T, C, K = 3, 5, 2, 2
    kw = make(B, T, C, K, dd=dd, terms=("start", "end", "proj", "allowed"), seed=3,
              lengths=[5, 4, 5])
    kw["allowed"][:] = True
    kw["allowed"][1, 2, :] = False  # sequence 1: position 2 takes no label
    kw["allowed"][2, :, 1] = False
    kw["duration_bias"][:, 0] = -math.inf  # sequence 2: label 1 disallowed, label 0 no duration
    check_against_bruteforce(kw)
    args, opts = split(kw)
    z = log_partition(*args, **opts, backend="torch")
    assert torch.isneginf(z[1]) and torch.isneginf(z[2]) and torch.isfinite(z[0])
    lab, bnd = marginals(*args, **opts, backend="torch")
    assert (lab[1:] == 0).all() and (bnd[1:] == 0).all()


def test_all_minus_inf_end():
    kw = make(2, 4, 2, 2, terms=("end",), seed=5)
    kw["end"][:] = -math.inf
    check_against_bruteforce(kw)


@pytest.mark.parametrize("dd", FORMS)
def test_gradcheck(dd, monkeypatch):
    monkeypatch.setattr(reference_model, "CHUNK", 2)
    kw = make(2, 5, 2, 3, dd=dd, terms=("start", "end", "proj", "allowed"), seed=11,
              allowed_p=0.1, lengths=[5, 3])
    names = list(float_inputs(kw))
    allowed, lengths = kw["allowed"], kw["lengths"]

    def f(*xs):
        d = dict(zip(names, xs))
        return log_partition(d.pop("scores"), d.pop("transition"), d.pop("duration_bias"),
                             lengths, allowed=allowed, backend="torch", **d)

    xs = [kw[n].clone().requires_grad_() for n in names]
    assert torch.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-7)


def test_marginal_properties(chunk):
    kw = make(3, 7, 3, 3, terms=("start", "end", "proj"), seed=2, lengths=[7, 4, 1])
    args, opts = split(kw)
    lab, bnd = marginals(*args, **opts, backend="torch")
    for b, L in enumerate([7, 4, 1]):
        torch.testing.assert_close(lab[b, :L].sum(-1), torch.ones(L, dtype=F64), **TOL)
        assert (lab[b, L:] == 0).all() and (bnd[b, L:] == 0).all()
        assert abs(float(bnd[b, 0]) - 1.0) < 1e-12
        assert ((bnd[b, :L] >= 0) & (bnd[b, :L] <= 1 + 1e-12)).all()


def test_duration_longer_than_sequence():
    """K > T: durations beyond T get zero gradient; results equal K = T."""
    kw = make(2, 4, 2, 9, terms=("start",), seed=4)
    args, opts = split(kw)
    db = args[2].clone().requires_grad_()
    z = log_partition(args[0], args[1], db, args[3], **opts, backend="torch")
    z.sum().backward()
    assert (db.grad[4:] == 0).all()
    z4 = log_partition(args[0], args[1], args[2][:4], args[3], **opts, backend="torch")
    torch.testing.assert_close(z.detach(), z4, **TOL)


def test_float32_output_dtype_and_half_upcast():
    kw = make(2, 6, 2, 3, terms=("start", "proj"), seed=9)
    args, opts = split(kw)
    f32 = [a.float() if a.is_floating_point() else a for a in args]
    o32 = {k: (v.float() if v.is_floating_point() else v) for k, v in opts.items()}
    z32 = log_partition(*f32, **o32, backend="torch")
    assert z32.dtype == torch.float32
    z64 = log_partition(*args, **opts, backend="torch")
    torch.testing.assert_close(z32.double(), z64, atol=1e-5, rtol=1e-6)
    zh = log_partition(f32[0].half(), *f32[1:], **o32, backend="torch")
    assert zh.dtype == torch.float32
    seg = viterbi(*f32, **o32, backend="torch")
    assert seg.score.dtype == torch.float32


def test_deterministic():
    kw = make(2, 30, 3, 4, terms=("start", "end", "proj", "allowed"), seed=12, allowed_p=0.05)
    leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
    runs = []
    for _ in range(2):
        for v in leaves.values():
            v.grad = None
        d = {**kw, **leaves}
        args, opts = split(d)
        z = log_partition(*args, **opts, backend="torch")
        z.sum().backward()
        runs.append([z.detach().clone()] + [v.grad.clone() for v in leaves.values()])
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def _path_scores64(segments, kw):
    """Score of given segmentations in float64 (vectorised; for long sequences)."""
    out = []
    f = kw["scores"].double()
    S = torch.cat([torch.zeros_like(f[:, :1]), f.cumsum(1)], 1)
    tr = kw["transition"].double()
    db = kw["duration_bias"].double()
    for b, segs in enumerate(segments):
        s = torch.tensor([x[0] for x in segs])
        d = torch.tensor([x[1] for x in segs])
        c = torch.tensor([x[2] for x in segs])
        tot = (S[b, s + d, c] - S[b, s, c] + db[d - 1, c]).sum()
        tot = tot + tr[c[:-1], c[1:]].sum()
        out.append(float(tot))
    return out


def check_long_float32_accuracy(backend: str, form: str = "static", K: int = 4):
    """T = 20,000 in float32 against a float64 evaluation, at the contract's bounds; the
    Viterbi path's own score (static form: summed here in float64) equals the score."""
    g = torch.Generator().manual_seed(0)
    B, T, C = 2, 20_000, 3
    scores = torch.randn(B, T, C, generator=g) * 3 + 1.0  # N(0, 3^2), with a drift
    tr = torch.randn(*((C, C) if form == "static" else (3, C, C)), generator=g)
    db = torch.randn(K, C, generator=g)
    lengths = torch.tensor([T, T - 3001])
    res = {}
    for dt in (torch.float32, torch.float64):
        xs = [v.detach().to(dt).clone().requires_grad_() for v in (scores, tr, db)]
        z = log_partition(*xs, lengths, backend=backend)
        z.sum().backward()
        assert z.dtype == dt
        res[dt] = (z.detach(), *[x.grad for x in xs])
    z32, gs32, gt32, gd32 = res[torch.float32]
    z64, gs64, gt64, gd64 = res[torch.float64]
    assert ((z32.double() - z64).abs() <= 1e-6 * z64.abs().clamp(min=1)).all()
    assert (gs32.double() - gs64).abs().max() <= 1e-4
    for a, b in ((gt32, gt64), (gd32, gd64)):
        assert (a.double() - b).norm() <= 1e-4 * b.norm()
    assert torch.isfinite(gs32).all()

    seg = viterbi(scores, tr, db, lengths, backend=backend)
    seg64 = viterbi(scores.double(), tr.double(), db.double(), lengths, backend=backend)
    assert seg.score.dtype == torch.float32
    assert ((seg.score.double() - seg64.score).abs() <= 1e-6 * seg64.score.abs()).all()
    if form == "static":
        own = _path_scores64(seg.segments, dict(scores=scores, transition=tr, duration_bias=db))
        for b in range(B):
            assert abs(own[b] - float(seg64.score[b])) <= 1e-6 * abs(float(seg64.score[b]))
    for b in range(B):
        assert sum(d for _, d, _ in seg.segments[b]) == int(lengths[b])


def test_long_float32_accuracy():
    check_long_float32_accuracy("torch")


@pytest.mark.parametrize("dd", FORMS)
def test_forward_keeps_only_checkpoints(dd):
    """What the forward pass keeps for the backward pass is O(sqrt(T K) K C) checkpoints,
    far below one (T, C) array, let alone O(T K C)."""
    from semiseg.crf.inputs import check_inputs

    B, T, C, K = 2, 4000, 3, 16
    kw = make(B, T, C, K, dd=dd, seed=13, lengths=[T, T - 7])
    args, opts = split(kw)
    x = check_inputs(*args, **opts)
    _, saved = reference.forward(x)
    tensors = [t for st in saved[1] for t in st] + [saved[2], saved[3]]
    kept = sum(t.numel() for t in tensors)
    per_ring = {"dur-trans": B * (2 * C + 1) * K, "static": B * C * K,
                "periodic": B * 3 * C * K}[dd]
    n_chunks = math.ceil((T + 1) / int(math.sqrt((T + 1) * K)))
    assert len(saved[1]) == n_chunks
    assert kept <= n_chunks * per_ring + 2 * B * C
    assert kept < B * T * C


def _lse(x, dim):
    """logsumexp whose gradient is 0, not NaN, where every term is -inf."""
    dead = torch.isneginf(x).all(dim, keepdim=True)
    safe = torch.where(dead, torch.zeros_like(x), x)
    out = torch.logsumexp(safe, dim, keepdim=True)
    return torch.where(dead, torch.full_like(out, -math.inf), out).squeeze(dim)


def naive_dp(scores, tr, db, lengths, *, start=None, end=None, proj_start=None,
             proj_end=None, allowed=None, reduce=_lse):
    """A plain O(T K C^2) dynamic programme written straight from docs/contract.md, with autograd:
    an oracle for long sequences (many chunks) where enumeration is impossible.
    The default reduce gives log Z; a max gives the Viterbi score."""
    B, T, C = scores.shape
    K = db.shape[0]
    out = []
    for b in range(B):
        L = int(lengths[b])
        alpha = [None] * (L + 1)  # alpha[t][c]: segmentations of [0, t) ending in label c
        for t in range(1, L + 1):
            terms = []
            for d in range(1, min(K, t) + 1):
                s = t - d
                seg = scores[b, s:t].sum(0) + db[d - 1]
                if proj_start is not None:
                    seg = seg + proj_start[b, s]
                if proj_end is not None:
                    seg = seg + proj_end[b, t - 1]
                if allowed is not None:
                    seg = torch.where(allowed[b, s:t].all(0), seg, torch.full_like(seg, -math.inf))
                if s == 0:
                    prev = start if start is not None else torch.zeros_like(seg)
                else:
                    trd = tr[(d - 1) % tr.shape[0]] if tr.dim() == 3 else tr
                    prev = reduce(alpha[s][:, None] + trd, 0)
                terms.append(prev + seg)
            alpha[t] = reduce(torch.stack(terms), 0)
        last = alpha[L] + (end if end is not None else 0.0)
        out.append(reduce(last, 0))
    return torch.stack(out)


def _max(x, dim):
    return x.amax(dim)


@pytest.mark.parametrize("dd", FORMS)
@pytest.mark.parametrize("chunking", ["auto", "small"])
def test_long_sequences_against_naive_dp(dd, chunking, monkeypatch):
    """T = 150 (several chunks, several recompute groups): log Z, every gradient and the
    Viterbi score against the plain dynamic programme, with every optional term."""
    B, T, C, K = 2, 150, 3, 6
    if chunking == "small":
        monkeypatch.setattr(reference_model, "CHUNK", 7)
        monkeypatch.setattr(reference_backward, "RECOMPUTE_RING", 3 * B * (C + 1) * C * K)
    kw = make(B, T, C, K, dd=dd, terms=TERMS["all"], seed=21, allowed_p=0.03,
              lengths=[T, 97])
    kw["scores"] = kw["scores"] * 3
    leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
    args, opts = split({**kw, **leaves})
    names = list(leaves)
    want = naive_dp(*args, **opts)
    got = log_partition(*args, **opts, backend="torch")
    torch.testing.assert_close(got, want.detach(), atol=1e-9, rtol=1e-12)
    w = torch.tensor([0.7, -1.3], dtype=F64)
    g_want = torch.autograd.grad((want * w).sum(), [leaves[n] for n in names])
    g_got = torch.autograd.grad((got * w).sum(), [leaves[n] for n in names])
    for n, a, b in zip(names, g_got, g_want):
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-9, msg=lambda m, n=n: f"{n}: {m}")

    args_d, opts_d = split(kw)
    seg = viterbi(*args_d, **opts_d, backend="torch")
    best = naive_dp(*args_d, **opts_d, reduce=_max)
    torch.testing.assert_close(seg.score, best, atol=1e-9, rtol=1e-12)
    for b in range(B):
        own = bf.path_score(b, seg.segments[b], *args_d[:3],
                            **{k: v for k, v in opts_d.items() if k != "allowed"})
        assert abs(float(own) - float(best[b])) <= 1e-9 * abs(float(best[b]))
        assert bf.is_allowed(b, seg.segments[b], kw["allowed"])
