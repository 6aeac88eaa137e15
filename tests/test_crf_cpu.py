"""The compiled CPU backend (semiseg/crf/numba/, numba) against the same oracles as the
torch backend: brute-force enumeration in float64 (test_crf_reference's machinery, one
oracle per case checked at several chunk sizes), the plain dynamic programme with
autograd at longer T, the torch backend, and float64 at T = 20,000 for float32 inputs.
"""

from __future__ import annotations

import math
import os

import pytest
import torch

pytest.importorskip("numba")

from test_crf_reference import (  # noqa: E402
    FORMS,
    SHAPE_IDS,
    SHAPES,
    TERMS,
    _seed,
    check_backend,
    check_long_float32_accuracy,
    float_inputs,
    make,
    naive_dp,
    oracle,
    split,
)

from semiseg.crf import dispatch, log_partition, marginals, viterbi  # noqa: E402
from semiseg.crf import numba as cpu  # noqa: E402
from semiseg.crf.inputs import FLOAT_FIELDS  # noqa: E402

F64 = torch.float64


def _check_chunks(kw, chunks=(None, 1, 2), monkeypatch=None):
    """One brute-force oracle, the numba backend at each chunk size (1 and 2 put a
    checkpoint at almost every boundary)."""
    want = oracle(kw)
    no_marg = dict(want, marginals=None)
    for i, size in enumerate(chunks):
        monkeypatch.setattr(cpu, "CHUNK", size)
        check_backend(kw, want if i == 0 else no_marg, backend="numba")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_matches_bruteforce_all_terms(shape, form, monkeypatch):
    B, T, C, K = shape
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=_seed(shape, "all", form))
    _check_chunks(kw, monkeypatch=monkeypatch)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("terms", ["plain", "start-end", "proj", "allowed"])
@pytest.mark.parametrize("shape", [(2, 6, 2, 2), (2, 5, 2, 5), (2, 4, 3, 9)],
                         ids=["K2", "K5", "K9>T"])
def test_matches_bruteforce_each_term(shape, terms, form, monkeypatch):
    B, T, C, K = shape
    kw = make(B, T, C, K, dd=form, terms=TERMS[terms], seed=_seed(shape, terms, form))
    _check_chunks(kw, chunks=(None, 2), monkeypatch=monkeypatch)


@pytest.mark.parametrize("form", FORMS)
def test_neg_inf_parameters(form, monkeypatch):
    B, T, C, K = 2, 5, 3, 4
    kw = make(B, T, C, K, dd=form, terms=("start", "end", "proj", "allowed"), seed=7,
              allowed_p=0.1)
    kw["transition"][..., 0, 1] = -math.inf
    kw["transition"][..., 2, 2] = -math.inf
    kw["duration_bias"][0, 2] = -math.inf
    kw["duration_bias"][2, 0] = -math.inf
    kw["start"][1] = -math.inf
    kw["end"][0] = -math.inf
    _check_chunks(kw, monkeypatch=monkeypatch)


@pytest.mark.parametrize("form", ["static", "periodic"])
def test_sparse_grammar_transitions(form, monkeypatch):
    """A gene grammar's transitions: most -inf, so the kernels sum over the finite ones
    only; rows (r, dst) with no source, one source and several, a source with no
    target, and a row whose linear-space sum underflows (the exact log-space path)."""
    B, T, C, K = 2, 5, 4, 4  # T = 5: ~3,000 paths a sequence for the oracle (T = 6: ~13,000)
    kw = make(B, T, C, K, dd=form, terms=("start", "end", "proj", "allowed"), seed=11,
              allowed_p=0.1)
    tr = kw["transition"].view(-1, C, C)  # (Q, src, dst)
    keep = torch.zeros(C, C, dtype=torch.bool)
    for src, dst in [(0, 1), (1, 1), (1, 2), (3, 2), (2, 0), (3, 0), (0, 0), (2, 2)]:
        keep[src, dst] = True
    tr[:, ~keep] = -math.inf  # dst 3: no source; dst 0: three; src 3 -> 2 and 0
    if tr.shape[0] > 1:
        tr[1, 0, 1] = -math.inf  # a row with a source in one residue only
    _check_chunks(kw, monkeypatch=monkeypatch)
    # every path starts in 0 and ends in 2, which only 1 and 3 enter; their scores -800 a
    # position put them ~800 nats below 0 at every boundary, so dst 2's linear sum
    # underflows to 0 even in float64 (exp(-800)): only the exact log-space path gives
    # the whole log Z, which rests on it
    kw["scores"][:, :, [1, 3]] -= 800.0
    kw["start"][1:] = -math.inf
    kw["end"][[0, 1, 3]] = -math.inf
    kw["allowed"][:] = True
    _check_chunks(kw, monkeypatch=monkeypatch)


def _against_naive_dp(kw):
    """The numba backend against the plain dynamic programme (autograd for the
    gradients; its NaN gradients of -inf parameters count as zero): log Z, every
    gradient, the Viterbi score. Returns the Viterbi segmentation."""
    leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
    args, opts = split({**kw, **leaves})
    want = naive_dp(*args, **opts)
    got = log_partition(*args, **opts, backend="numba")
    torch.testing.assert_close(got, want.detach(), atol=1e-9, rtol=1e-12)
    w = torch.tensor([0.7, -1.3], dtype=F64)
    names = list(leaves)
    g_want = torch.autograd.grad((want * w).sum(), [leaves[n] for n in names])
    g_got = torch.autograd.grad((got * w).sum(), [leaves[n] for n in names])
    for n, a, b in zip(names, g_got, g_want):
        torch.testing.assert_close(a, torch.nan_to_num(b), atol=1e-9, rtol=1e-9,
                                   msg=lambda m, n=n: f"{n}: {m}")
    args_d, opts_d = split(kw)
    seg = viterbi(*args_d, **opts_d, backend="numba")
    best = naive_dp(*args_d, **opts_d, reduce=lambda x, dim: x.amax(dim))
    torch.testing.assert_close(seg.score, best, atol=1e-9, rtol=1e-12)
    return seg


def _duration_windows(kw, K):
    """Each label's finite durations a window inside 1..K, as a gene grammar's are (codon
    and site labels 1-3 bases, run tails exactly one length): label 0 all of 1..K, 1
    exactly 3, 2 from 2 to K - 1 (a hole at 3 when K > 4), 3 exactly K, 4 (if there is
    one) none at all."""
    db = kw["duration_bias"]  # (K, C)
    keep = torch.zeros_like(db, dtype=torch.bool)
    keep[:, 0] = True
    keep[2, 1] = True
    keep[1:K - 1, 2] = True
    keep[2, 2] = K <= 4
    keep[K - 1, 3] = True
    db[~keep] = -math.inf


@pytest.mark.parametrize("form", ["static", "periodic"])
def test_duration_windows_per_label(form, monkeypatch):
    """Labels whose finite durations are a window of 1..K (the kernels sum over that
    window only, _Arrays.dr): brute force at every chunk size, then T = 80 against the
    plain dynamic programme (log Z, every gradient, the Viterbi score)."""
    B, T, C, K = 2, 5, 4, 4  # the oracle's cost: 5-10 s
    kw = make(B, T, C, K, dd=form, terms=("start", "end", "proj"), seed=17)
    _duration_windows(kw, K)
    _check_chunks(kw, monkeypatch=monkeypatch)
    monkeypatch.setattr(cpu, "CHUNK", 7)
    B, T, C, K = 2, 80, 5, 6
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=23, allowed_p=0.03,
              lengths=[T, 61])
    _duration_windows(kw, K)
    seg = _against_naive_dp(kw)
    for b in range(2):  # every segment's duration is one its label allows
        for _, d, c in seg.segments[b]:
            assert torch.isfinite(kw["duration_bias"][d - 1, c])


@pytest.mark.parametrize("period", [2, 4])
def test_periods_other_than_three_against_naive_dp(period, monkeypatch):
    """Periods other than 3 (the reverse pass's generic residue sums; period 3 has a loop
    of its own, fac._residue_sums3): T = 80 with chunks of 7 and per-label duration
    windows, against the plain dynamic programme."""
    monkeypatch.setattr(cpu, "CHUNK", 7)
    B, T, C, K = 2, 80, 5, 6
    kw = make(B, T, C, K, dd="periodic", terms=TERMS["all"], seed=29 + period,
              allowed_p=0.03, lengths=[T, 59])
    tr = kw["transition"]  # (3, C, C)
    kw["transition"] = torch.cat([tr, tr[:1] + 0.5])[:period].contiguous()
    _duration_windows(kw, K)
    _against_naive_dp(kw)


@pytest.mark.parametrize("form", FORMS)
def test_nothing_allowed(form, monkeypatch):
    """No allowed segmentation: log Z = -inf, zero gradients, Viterbi -inf and empty."""
    B, T, C, K = 3, 5, 2, 2
    kw = make(B, T, C, K, dd=form, terms=("start", "end", "proj", "allowed"), seed=3,
              lengths=[5, 4, 5])
    kw["allowed"][:] = True
    kw["allowed"][1, 2, :] = False
    kw["allowed"][2, :, 1] = False
    kw["duration_bias"][:, 0] = -math.inf
    _check_chunks(kw, monkeypatch=monkeypatch)
    args, opts = split(kw)
    z = log_partition(*args, **opts, backend="numba")
    assert torch.isneginf(z[1]) and torch.isneginf(z[2]) and torch.isfinite(z[0])
    seg = viterbi(*args, **opts, backend="numba")
    assert torch.isneginf(seg.score[1:]).all() and seg.segments[1] == seg.segments[2] == []


def test_all_minus_inf_end(monkeypatch):
    kw = make(2, 4, 2, 2, terms=("end",), seed=5)
    kw["end"][:] = -math.inf
    _check_chunks(kw, monkeypatch=monkeypatch)


@pytest.mark.parametrize("form", FORMS)
def test_long_sequences_against_naive_dp(form, monkeypatch):
    """T = 80 with chunks of 7: log Z, every gradient (autograd through the plain dynamic
    programme) and the Viterbi score, with every optional input."""
    monkeypatch.setattr(cpu, "CHUNK", 7)
    B, T, C, K = 2, 80, 3, 6
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=21, allowed_p=0.03,
              lengths=[T, 57])
    kw["scores"] = kw["scores"] * 3
    _against_naive_dp(kw)


@pytest.mark.parametrize("form", FORMS)
def test_matches_torch_backend(form):
    """A mid-sized batch (several chunks, variable lengths, every input) against the torch
    backend in float64: log Z, every gradient, Viterbi score and marginals."""
    B, T, C, K = 3, 400, 4, 9
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=31, allowed_p=0.02,
              lengths=[T, 311, 1])
    res = {}
    for backend in ("torch", "numba"):
        leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
        args, opts = split({**kw, **leaves})
        z = log_partition(*args, **opts, backend=backend)
        (z * torch.tensor([1.0, -0.5, 2.0], dtype=F64)).sum().backward()
        args_d, opts_d = split(kw)
        seg = viterbi(*args_d, **opts_d, backend=backend)
        lab, bnd = marginals(*args_d, **opts_d, backend=backend)
        res[backend] = [z.detach(), seg.score, lab, bnd] + [v.grad for v in leaves.values()]
    for a, b in zip(res["torch"], res["numba"]):
        torch.testing.assert_close(b, a, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("form", ["static", "periodic"])
def test_long_float32_accuracy(form):
    check_long_float32_accuracy("numba", form, K=8)


def test_float32_inputs_give_the_float64_bits():
    """The kernels read float32 scores, proj_start and proj_end as they are (views, no
    float64 copies) and widen each value into float64 sums: log Z, the gradients, the
    label marginals and the Viterbi labels and score are the bits that the same values
    given as float64 give, rounded to float32. (The boundary marginals are left out: they
    are the proj_start gradient summed over labels after the kernels, in the scores'
    dtype, so float32 sums differ from rounded float64 ones by an ulp, as before.)"""
    for form in FORMS:
        kw = make(3, 300, 4, 7, dd=form, terms=TERMS["all"], seed=5, allowed_p=0.05,
                  lengths=[300, 211, 1])
        res = {}
        for dt in (torch.float32, F64):
            k = {n: (v.float().to(dt) if torch.is_floating_point(v) else v)
                 for n, v in kw.items()}
            leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(k).items()}
            args, opts = split({**k, **leaves})
            z = log_partition(*args, **opts, backend="numba")
            z.sum().backward()
            args_d, opts_d = split(k)
            seg = viterbi(*args_d, **opts_d, backend="numba")
            lab, _ = marginals(*args_d, **opts_d, backend="numba")
            res[dt] = [z.detach(), seg.score, lab] + [v.grad for v in leaves.values()]
            res[dt] = [r.float() for r in res[dt]] + [seg.labels]
        for a, b in zip(res[torch.float32], res[F64], strict=True):
            assert torch.equal(a, b)


def test_deterministic():
    """Two runs (the batch spread over threads) give bitwise-identical results."""
    for form in FORMS:
        kw = make(4, 300, 3, 5, dd=form, terms=TERMS["all"], seed=12, allowed_p=0.05)
        runs = []
        for _ in range(2):
            leaves = {n: v.clone().requires_grad_() for n, v in float_inputs(kw).items()}
            args, opts = split({**kw, **leaves})
            z = log_partition(*args, **opts, backend="numba")
            z.sum().backward()
            seg = viterbi(*split(kw)[0], **split(kw)[1], backend="numba")
            runs.append([z.detach(), seg.score, seg.labels] + [v.grad for v in leaves.values()])
        for a, b in zip(*runs):
            assert torch.equal(a, b)


def test_dispatch_auto_picks_numba(monkeypatch):
    """auto runs the compiled backend on CPU tensors, float32 and float64 alike."""
    calls = []
    real = cpu.forward
    monkeypatch.setattr(cpu, "forward",
                        lambda x, keep=False: calls.append(x.scores.dtype) or real(x, keep))
    kw = make(2, 6, 2, 3, terms=("start",), seed=9)
    args, opts = split(kw)
    for dt in (torch.float64, torch.float32):
        a = [v.to(dt) if v.is_floating_point() else v for v in args]
        o = {k: v.to(dt) for k, v in opts.items()}
        z = log_partition(*a, **o)  # backend="auto"
        assert z.dtype == dt
    assert calls == [torch.float64, torch.float32]
    assert dispatch._backend(cpu_inputs(kw), "auto") is cpu


def cpu_inputs(kw):
    from semiseg.crf.inputs import check_inputs

    args, opts = split(kw)
    return check_inputs(*args, **opts)


@pytest.mark.parametrize("form", FORMS)
def test_forward_keeps_only_checkpoints(form):
    """What the forward pass keeps for the backward pass: checkpoints every
    ~sqrt(T K) boundaries, far below one (T, C) array (never O(T K C))."""
    B, T, C, K = 2, 4000, 3, 16
    kw = make(B, T, C, K, dd=form, seed=13, lengths=[T, T - 7])
    _, saved = cpu.forward(cpu_inputs(kw))
    _, ck, ck_lo, alpha_end, _, _, rows = saved
    assert rows is None
    kept = sum(c.size for c in ck) + ck_lo.size + alpha_end.size
    assert kept < B * T * C
    n_chunks = math.ceil((T + 1) / int(math.sqrt((T + 1) * K)))
    assert ck_lo.shape[1] == n_chunks


@pytest.mark.parametrize("form", FORMS)
def test_backward_without_parameter_sums(form, monkeypatch):
    """backward(wanted=the per-position gradients), what the posterior pass asks for: the
    factorised kernels skip the duration-bias and transition sums and leave them out; the
    gradients asked for are the brute force's, and bitwise those of a full backward."""
    monkeypatch.setattr(cpu, "CHUNK", 2)  # a checkpoint every 2 boundaries
    B, T, C, K = 3, 7, 3, 4
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=_seed("no-params", form),
              lengths=[7, 5, 2])
    want = oracle(kw, check_marginals=False)
    x = cpu_inputs(kw)
    per_position = ("scores", "proj_start", "proj_end")
    full = cpu.backward(x, cpu.forward(x, keep=True)[1], want["w"])
    part = cpu.backward(x, cpu.forward(x, keep=True)[1], want["w"], wanted=per_position)
    for n in per_position:
        assert torch.equal(part[n], full[n]), n
        torch.testing.assert_close(part[n], want["grads"][n], rtol=1e-9, atol=1e-10)
    left_out = form != "dur-trans"  # the duration-dependent kernels form every sum
    for n in ("duration_bias", "transition"):
        assert (n not in part) == left_out, n
        torch.testing.assert_close(full[n], want["grads"][n], rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("form", FORMS)
def test_float32_gradients_are_the_float64_ones_rounded(form, monkeypatch):
    """float32 inputs: the kernels sum in float64 (the label marginals are written
    straight into a float32 array), so every gradient is the bits of the same inputs'
    float64 backward rounded once to float32; proj_end's is left out when not wanted."""
    monkeypatch.setattr(cpu, "CHUNK", 3)
    B, T, C, K = 2, 11, 3, 4
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=_seed("f32-round", form),
              lengths=[11, 6])
    x = cpu_inputs(kw)
    given = [n for n in FLOAT_FIELDS if getattr(x, n) is not None]
    x32 = x.replace(**{n: getattr(x, n).float() for n in given})
    x64 = x32.replace(**{n: getattr(x32, n).double() for n in given})  # the same values
    w = torch.tensor([0.75, 1.25], dtype=torch.float64)  # exact in float32
    g64 = cpu.backward(x64, cpu.forward(x64, keep=True)[1], w)
    g32 = cpu.backward(x32, cpu.forward(x32, keep=True)[1], w.float())
    for n in ("scores", "proj_start", "proj_end"):
        assert g32[n].dtype == torch.float32
        assert torch.equal(g32[n], g64[n].float()), n
    part = cpu.backward(x32, cpu.forward(x32, keep=True)[1], w.float(),
                        wanted=("scores", "proj_start"))
    assert "proj_end" not in part
    assert torch.equal(part["scores"], g32["scores"])


def test_kernel_cache_folder_changes_with_any_kernel_source(tmp_path):
    """The compiled kernels are cached per version of crf/numba's sources: a change in
    a helper module alone (core.py, whose functions fac.py's kernels call) gives a new
    folder, so no kernel runs its old compiled helpers (numba checks a cache entry only
    against the file of the function it loads)."""
    import shutil
    from pathlib import Path

    from semiseg.crf.numba import core

    src = Path(core.__file__).parent
    for f in src.glob("*.py"):
        shutil.copy(f, tmp_path / f.name)
    first = core.sources_digest(str(tmp_path))
    assert first == core.sources_digest(str(src))
    assert Path(core.cache_dir()).name == first or os.environ.get("NUMBA_CACHE_DIR")
    with open(tmp_path / "core.py", "a") as f:
        f.write("\n# a helper changed\n")
    assert core.sources_digest(str(tmp_path)) != first
    (tmp_path / "notes.txt").write_text("not a source")
    (tmp_path / "core.py").write_bytes((src / "core.py").read_bytes())
    assert core.sources_digest(str(tmp_path)) == first


def test_seam_kernels_cache_beside_the_crf_kernels():
    """annotate/seams.py's compiled functions are cached where the CRF's kernels are
    (core.cache_dir), not in the package's __pycache__ (which pip's record of the install
    does not hold)."""
    from pathlib import Path

    import semiseg
    from semiseg.annotate import seams
    from semiseg.crf.numba import core

    for fn in (seams._trace, seams._coalesce, seams._forward):
        where = Path(fn._cache._cache_path)  # numba's cache folder of that function
        assert where.is_relative_to(core.cache_dir()), where
        assert not where.is_relative_to(Path(semiseg.__file__).parent), where


def test_compiled_kernels_are_cached_outside_the_package(tmp_path):
    """With no NUMBA_CACHE_DIR, a fresh process caches the kernels it compiles under
    $XDG_CACHE_HOME/semiseg/numba and writes nothing into the package (a cache there is
    not in pip's record and outlives an uninstall), and numba's own setting is restored
    for the rest of the process; $SEMISEG_CACHE_DIR moves it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import semiseg

    pkg = Path(semiseg.__file__).parent
    before = sorted(pkg.rglob("*.nb[ic]"))
    code = ("import torch, numba.core.config as c\n"
            "from semiseg.crf import log_partition\n"
            "x = torch.randn(1, 9, 2, dtype=torch.float64)\n"
            "log_partition(x, torch.zeros(2, 2, dtype=torch.float64),\n"
            "              torch.zeros(3, 2, dtype=torch.float64), backend='numba')\n"
            "print(repr(c.CACHE_DIR))\n")
    root = str(pkg.parent)
    # the two processes compile at the same time (each into its own empty cache): the
    # test's wall time is one compilation, not two
    runs = []
    for var, where in (("XDG_CACHE_HOME", tmp_path / "xdg" / "semiseg" / "numba"),
                       ("SEMISEG_CACHE_DIR", tmp_path / "own" / "numba")):
        env = {k: v for k, v in os.environ.items()
               if k not in ("NUMBA_CACHE_DIR", "SEMISEG_CACHE_DIR", "XDG_CACHE_HOME")}
        env[var] = str(where.parent if var == "SEMISEG_CACHE_DIR" else tmp_path / "xdg")
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        runs.append((where, subprocess.Popen([sys.executable, "-c", code], env=env,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             text=True, cwd=tmp_path)))
    try:
        for where, proc in runs:
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr[-2000:]
            assert stdout.strip() == "''"  # numba's setting is back to unset
            assert list(where.rglob("*.nbi")), f"nothing cached under {where}"
    finally:  # a failure above: no process outlives the test
        for _, proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert sorted(pkg.rglob("*.nb[ic]")) == before


@pytest.mark.parametrize("form", ["static", "periodic"])
def test_one_sequence_backward_on_two_cores_is_the_one_core_backward(form, monkeypatch):
    """One sequence on a machine with two cores: each chunk's forward rows recomputed on
    a second thread beside the reverse pass of the chunk after it (_backward_pipelined).
    Every gradient bitwise the one-thread pass's, with and without the parameter
    sums, at chunk sizes that leave one row and several; and the brute force's."""
    B, T, C, K = 1, 7, 3, 4
    kw = make(B, T, C, K, dd=form, terms=TERMS["all"], seed=_seed("two-cores", form))
    want = oracle(kw, check_marginals=False)
    x = cpu_inputs(kw)
    monkeypatch.setattr(cpu, "KEEP_ROWS_BYTES", 0)  # each chunk's rows recomputed
    calls = []
    real = cpu._fac_backward
    monkeypatch.setattr(cpu, "_fac_backward",
                        lambda *a, **k: (calls.append(k["two_cores"]), real(*a, **k))[1])
    for size in (1, 2, 3):
        monkeypatch.setattr(cpu, "CHUNK", size)
        for wanted in (None, ("scores", "proj_start", "proj_end")):
            got = {}
            for cores in (1, 2):
                monkeypatch.setattr(cpu, "_threads", lambda cores=cores: cores)
                saved = cpu.forward(x, keep=True)[1]
                got[cores] = cpu.backward(x, saved, want["w"], wanted=wanted)
            assert got[1].keys() == got[2].keys()
            for n in got[1]:
                assert torch.equal(got[1][n], got[2][n]), (size, wanted, n)
                torch.testing.assert_close(got[2][n], want["grads"][n], rtol=1e-9, atol=1e-10)
    assert calls == [False, True] * 6  # each pair: one core, then the two-core path


@pytest.mark.parametrize("form", ["static", "periodic"])
def test_two_core_backward_of_a_long_sequence_is_the_one_core_backward(form, monkeypatch):
    """T = 20,000 in chunks of 2,000 rows (C 12, K 40), long enough that each chunk's
    recompute on the second thread runs while the reverse pass reads the other buffer,
    and, for the per-position gradients alone, that the two halves of the backward run
    side by side from the state made beside the forward (_upper_state): every gradient
    bitwise the one-core pass's (a buffer shared between the two would differ)."""
    kw = make(1, 20000, 12, 40, dd=form, terms=TERMS["all"],
              seed=_seed("two-cores-long", form))
    x = cpu_inputs(kw)
    monkeypatch.setattr(cpu, "CHUNK", 2000)
    monkeypatch.setattr(cpu, "KEEP_ROWS_BYTES", 0)  # each chunk's rows recomputed
    w = torch.tensor([0.8], dtype=F64)
    halves = []  # the reverse pass's state at the middle, made beside the forward
    real = cpu._upper_state
    monkeypatch.setattr(cpu, "_upper_state", lambda *a: halves.append(1) or real(*a))
    for wanted in (None, ("scores", "proj_start", "proj_end")):
        got = {}
        for cores in (1, 2):
            monkeypatch.setattr(cpu, "_threads", lambda cores=cores: cores)
            got[cores] = cpu.backward(x, cpu.forward(x, keep=True)[1], w, wanted=wanted)
        for n in got[1]:
            assert torch.equal(got[1][n], got[2][n]), (wanted, n)
    # two cores: the state made both times; used by the per-position backward alone
    # (the parameter sums stay in one order), which is then two halves side by side
    assert len(halves) == 2


@pytest.mark.parametrize("form", ["static", "periodic"])
@pytest.mark.parametrize("T, chunk", [(7, 1), (7, 3), (20000, 2000)])
def test_forward_rows_kept_give_the_recomputed_bits(form, T, chunk, monkeypatch):
    """The forward keeping every chunk's rows (KEEP_ROWS_BYTES) for the backward to read,
    against the backward recomputing them from the checkpoints: log Z and every gradient
    bitwise the same, on one core and two (the pipelined recompute, the two halves side
    by side), with and without the parameter sums; at T = 7 also the brute force's."""
    C, K = (3, 4) if T == 7 else (12, 40)
    kw = make(1, T, C, K, dd=form, terms=TERMS["all"], seed=_seed("kept-rows", form, T))
    want = oracle(kw, check_marginals=False) if T == 7 else None
    w = want["w"] if want else torch.tensor([0.8], dtype=F64)
    x = cpu_inputs(kw)
    monkeypatch.setattr(cpu, "CHUNK", chunk)
    kept = []
    real = cpu._kept_rows
    monkeypatch.setattr(cpu, "_kept_rows", lambda *a: (kept.append(a), real(*a))[1])
    for cores in (1, 2):
        monkeypatch.setattr(cpu, "_threads", lambda cores=cores: cores)
        for wanted in (None, ("scores", "proj_start", "proj_end")):
            got = {}
            for budget in (0, 1 << 30):
                monkeypatch.setattr(cpu, "KEEP_ROWS_BYTES", budget)
                z, saved = cpu.forward(x, keep=True)
                assert (saved[-1] is not None) == bool(budget)  # the rows kept, or not
                got[budget] = (z, cpu.backward(x, saved, w, wanted=wanted))
            assert torch.equal(got[0][0], got[1 << 30][0])
            for n in got[0][1]:
                assert torch.equal(got[0][1][n], got[1 << 30][1][n]), (cores, wanted, n)
                if want:
                    torch.testing.assert_close(got[0][1][n], want["grads"][n], rtol=1e-9,
                                               atol=1e-10)
    assert len(kept) == 8 and kept[0] == (1, T, C, 1 if form == "static" else 3)
