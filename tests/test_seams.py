"""Certified windowed decoding (semiseg/annotate/seams.py, docs/decoding.md, issue 42).

Oracles: the whole-sequence Viterbi of the torch reference backend (itself tested
against enumeration in test_crf_reference.py) and, for tiny sequences, brute-force
enumeration (bruteforce.py)."""

from __future__ import annotations

from pathlib import Path

import bruteforce as bf
import numpy as np
import pytest
import torch

from semiseg.annotate import batches
from semiseg.annotate.seams import SeamStats, certified_viterbi
from semiseg.crf import viterbi

F64 = torch.float64


def random_crf(T, C, K, Q, seed, allowed_p=0.1, proj=True):
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=F64)

    kw = {"scores": r(T, C), "transition": r(C, C) if Q == 1 else r(Q, C, C),
          "duration_bias": r(K, C), "start": r(C), "end": r(C)}
    if proj:
        kw["proj_start"], kw["proj_end"] = r(T, C), r(T, C)
    if allowed_p:
        kw["allowed"] = torch.rand(T, C, generator=g) > allowed_p
    return kw


def whole(kw, starts=False):
    """Labels (T,) and score of the whole-sequence Viterbi (reference backend); with
    `starts`, also where its segments start (T,) bool."""
    b = {k: (v[None] if k in ("scores", "proj_start", "proj_end", "allowed") else v)
         for k, v in kw.items()}
    seg = viterbi(b.pop("scores"), b.pop("transition"), b.pop("duration_bias"),
                  backend="torch", **b)
    out = seg.labels[0].numpy(), float(seg.score[0])
    if not starts:
        return out
    first = np.zeros(len(out[0]) + 1, bool)
    first[[s for s, _, _ in seg.segments[0]]] = True
    return (*out, first)


def naive(kw, W, overlap):
    """The old windowed decode: windows decoded alone, each keeping its centre."""
    T = kw["scores"].shape[0]
    out = np.empty(T, np.int64)
    for cs, ce, ws, we in batches.windows(T, W, overlap):
        sub = {k: (v[ws:we] if k in ("scores", "proj_start", "proj_end", "allowed") else v)
               for k, v in kw.items()}
        lab, _ = whole(sub)
        out[cs:ce] = lab[cs - ws:ce - ws]
    return out


def random_cases(Q, n=40):
    """(T, kw, (whole labels, score, segment starts)) of n random semi-CRFs of period Q,
    with and without masks and projected terms, and their whole-sequence decode."""
    for seed in range(n):
        rng = np.random.default_rng(seed)
        C = int(rng.integers(2, 5))
        K = int(rng.integers(Q + 1, 7))
        T = int(rng.integers(60, 220))
        kw = random_crf(T, C, K, Q, seed, allowed_p=0.1 if seed % 2 else 0.0,
                        proj=seed % 3 != 0)
        yield seed, T, kw, whole(kw, starts=True)


@pytest.mark.parametrize("Q", [1, 3], ids=["static", "periodic"])
def test_certified_equals_whole_sequence_decode(Q):
    """Many random semi-CRFs and window sizes: the certified windowed labels and score
    are the whole-sequence decode's, and at least some seams certified (so the windowed
    path, not only the whole fallback, is what was checked)."""
    total = SeamStats()
    for seed, T, kw, (want, want_score, starts) in random_cases(Q):
        for W, ov in ((8, 7), (10, 3), (12, 6), (25, 8), (40, 16), (T - 1, 10)):
            st = SeamStats()
            got, score = certified_viterbi(**kw, window=W, overlap=ov, stats=st)
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed} W {W} ov {ov}")
            assert score == pytest.approx(want_score, rel=1e-9, abs=1e-9)
            # every certificate itself: the whole path has a segment boundary there,
            # after a segment of the certified label (where the best segmentation is
            # unique: random proj terms; without them durations of one label can swap)
            unique = "proj_start" in kw and np.isfinite(want_score)
            for t0, c0 in st.points if unique else ():
                assert starts[t0] and want[t0 - 1] == c0, (seed, W, ov, t0, c0)
            total.add(st)
            total.points += st.points
    assert total.first > 100 and len(total.points) > 200
    assert total.first + total.widened > total.whole


def check_against_bruteforce(decode):
    """decode(**kw) -> (labels, score) on tiny sequences against enumeration (every best
    segmentation listed): one of the best labellings and their score, or labels -1 and
    score -inf where nothing is allowed."""
    for seed in range(8):
        kw = random_crf(7, 2, 3, 1 if seed % 2 else 2, 100 + seed, allowed_p=0.1)
        args = {k: (v[None] if k in ("scores", "proj_start", "proj_end", "allowed") else v)
                for k, v in kw.items()}
        best, segs = bf.viterbi(args.pop("scores"), args.pop("transition"),
                                args.pop("duration_bias"), **args)[0]
        got, score = decode(**kw)
        if not segs:
            assert (got == -1).all() and score == float("-inf")
            continue
        want = [np.concatenate([[c] * d for _, d, c in seg]) for seg in segs]
        assert any((got == w).all() for w in want)
        assert score == pytest.approx(best, abs=1e-9)


def test_certified_equals_bruteforce():
    """Tiny sequences against enumeration (every best segmentation listed)."""
    check_against_bruteforce(lambda **kw: certified_viterbi(**kw, window=3, overlap=3))


def adversarial(T=400, K=4):
    """Two labels with equal evidence over a long middle, switching between them nearly
    forbidden (-30), a slight pull (+0.01 per base) towards label 1 everywhere but the
    first 5 bases, which say label 0 (+10 each). The whole-sequence path is label 0
    throughout (switching costs 30, gains at most 0.01 T < 30); a window that starts
    inside the middle sees only the pull towards 1."""
    scores = torch.zeros(T, 2, dtype=F64)
    scores[:, 1] = 0.01
    scores[:5, 0] = 10.0
    tr = torch.tensor([[0.0, -30.0], [-30.0, 0.0]], dtype=F64)
    return {"scores": scores, "transition": tr, "duration_bias": torch.zeros(K, 2, dtype=F64)}


@pytest.mark.parametrize("K", [4, 40], ids=["chained", "long-segments"])
def test_adversarial_naive_wrong_certificate_refuses(K):
    """K = 40: single segments reach past the old windows' overlap (20 steps)."""
    kw = adversarial(K=K)
    want, _ = whole(kw)
    assert (want == 0).all()
    W, ov = 60, 20
    assert (naive(kw, W, ov) != want).any()  # the naive overlap stitch is wrong
    st = SeamStats()
    got, _ = certified_viterbi(**kw, window=W, overlap=ov, stats=st)
    np.testing.assert_array_equal(got, want)
    assert st.first == 0 and st.widened == 0 and st.whole == 1  # never certified


def test_adversarial_certifies_once_evidence_is_inside():
    """The same trap with the deciding evidence repeated every 100 bases: seams certify
    (after widening where a window holds no evidence), and the decode stays right."""
    kw = adversarial(600)
    for a in range(0, 600, 100):
        kw["scores"][a:a + 5, 0] = 10.0
    want, _ = whole(kw)
    st = SeamStats()
    got, _ = certified_viterbi(**kw, window=60, overlap=20, stats=st)
    np.testing.assert_array_equal(got, want)
    assert st.first + st.widened > 0


@pytest.mark.slow
def test_yeast_chrII_piece_certified_windows_equal_whole_decode(tmp_path):
    """The shipped yeast gene model on 80 kb of chrII: windows of 12,000 steps (so there
    are several seams) give the whole-sequence decode's BED and GFF3 rows, and the log
    counts the seams."""
    import re

    from test_shipped_models import cli

    from semiseg.genome import Fasta

    root = Path(__file__).resolve().parent.parent
    with Fasta(str(root / "data" / "yeast" / "chrII.fa")) as fa:
        seq = fa.fetch("chrII", 100000, 180000).upper()
    fasta = tmp_path / "p.fa"
    fasta.write_text(f">p\n{seq}\n")
    runs = {}
    for name, extra in (("whole", ()), ("windows", ("--max-decode-steps", "12000"))):
        proc = cli("annotate", "--model", "yeast", "--fasta", fasta, "--out",
                   tmp_path / name / "p", "--device", "cpu", *extra)
        assert proc.returncode == 0, proc.stderr
        runs[name] = proc.stderr
    assert "decoded as one sequence" in runs["whole"]
    assert "decoded in certified windows" in runs["windows"]
    m = re.search(r"seams: (?:(\d+) certified side by side, )?(\d+) certified at the first "
                  r"width, (\d+) widened, (\d+) decoded "
                  r"whole; posterior seams: (\d+) certified .* at the first width, (\d+) widened, "
                  r"(\d+) decoded whole", runs["windows"])
    assert m, runs["windows"]
    viterbi_seams, post_seams = [v or 0 for v in m.groups()[:4]], m.groups()[4:]
    assert sum(map(int, post_seams)) >= 5  # 80,000 steps in windows of 12,000
    # the posterior decode's Viterbi runs in certified windows unless the posteriors
    # were computed whole (then it is whole too: posterior_seams.gene_decode)
    went_whole = "whole at once" in runs["windows"] or int(post_seams[2]) > 0
    assert (sum(map(int, viterbi_seams)) == 0) if went_whole else (
        sum(map(int, viterbi_seams)) >= 5)
    for ext in ("bed", "gff3"):
        rows = [[r for r in (tmp_path / n / f"p.{ext}").read_text().splitlines()
                 if not r.startswith("#")] for n in ("whole", "windows")]
        assert rows[0] == rows[1] and len(rows[0]) > 20


def _chri_emissions(start: int, end: int):
    """(the shipped yeast model's checkpoint, its gene-model CRF head, the emissions of
    chrI[start:end]) on the CPU."""
    from seqs import SHIPPED_MODEL

    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.checkpoint import load_checkpoint
    from semiseg.genome import Fasta, GenomeData

    root = Path(__file__).resolve().parent.parent
    ck = load_checkpoint(SHIPPED_MODEL)
    with Fasta(str(root / "data" / "yeast" / "chrI.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, torch.device("cpu"), 100000, 5000, 2000000, 200000)
        em, _ = ann.emissions(Item("chrI", start, end))
    return ck, ann.model.crf, em


def test_gene_decode_equals_whole_posterior_decode():
    """The yeast gene model's posterior decode of 15 kb of chrI in certified windows of
    4,000 steps: the whole-sequence decode's labels, label marginals within 1e-5, and
    every seam accounted for."""
    from semiseg.annotate.posterior_seams import gene_decode
    from semiseg.genemodel.generules import set_donor_motif

    ck, crf, em = _chri_emissions(30000, 45000)
    crf.branch_penalty = float("inf")  # as annotate sets them from the checkpoint
    set_donor_motif(crf, ck.config.annotate.donor_motif, None)
    seg, post, bnd = crf.decode_with_marginals(em[None], torch.tensor([em.shape[0]]))
    want = seg.labels[0].numpy()
    assert len(set(want.tolist())) >= 3
    st = SeamStats()
    lab, p2, b2 = gene_decode(crf, em, 4000, 1000, 2, stats=st)
    np.testing.assert_array_equal(lab, want)
    assert float((p2 - post[0]).abs().max()) < 1e-5
    assert float((b2 - bnd[0]).abs().max()) < 1e-5
    assert st.side + st.first + st.widened + st.whole >= 3  # 15,000 steps, windows of 4,000
    assert st.post_first + st.post_widened + st.post_whole == 4  # 5 posterior windows


def test_gene_decode_with_run_tails_equals_whole_posterior_decode():
    """The shipped fly model (crf.run_tails: its tails' posteriors are added to their
    labels' before the decode) on 20 kb of fly in certified windows of 6,000 steps: the
    whole-sequence decode's labels and marginals."""
    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.annotate.posterior_seams import gene_decode
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    root = Path(__file__).resolve().parent.parent
    ck = load_checkpoint(resolve_model("fly"))
    assert ck.config.crf.run_tails
    with Fasta(str(root / "data" / "fly" / "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, torch.device("cpu"), 100000, 5000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", 3_110_000, 3_130_000))
    crf = ann.model.crf
    seg, post, bnd = crf.decode_with_marginals(em[None], torch.tensor([em.shape[0]]))
    want = seg.labels[0].numpy()
    assert len(set(want.tolist())) >= 3
    lab, p2, b2 = gene_decode(crf, em, 6000, 1000, 2, stats=SeamStats())
    np.testing.assert_array_equal(lab, want)
    assert float((p2 - post[0]).abs().max()) < 1e-5


def _count_calls(monkeypatch, seams):
    """Record the window lengths of every posterior call of `seams`."""
    calls = []
    real = seams._compute_ext

    def spy(head, terms, exts, *a):  # windows and seams' intersections
        calls.append(sorted(we - ws for ws, we in set(exts)))
        return real(head, terms, exts, *a)
    monkeypatch.setattr(seams, "_compute_ext", spy)
    return calls


def test_far_seam_of_long_windows_goes_whole_at_once(monkeypatch):
    """Long windows (longer than twice the probe): a posterior seam whose bound exceeds
    `far` at the first width skips the widenings and merges: the whole sequence
    next, and the posteriors are the whole sequence's. Without that rule (far = inf) the
    seams widen, then merge, to the same posteriors."""
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    calls = _count_calls(monkeypatch, seams)
    from semiseg.annotate import posterior_bound

    real = posterior_bound.seam_cut
    n = [0]

    def cut(*a):  # the probe's seam as it is, every later seam far apart
        n[0] += 1
        return real(*a) if n[0] == 1 else (None, 1.0)
    monkeypatch.setattr(posterior_bound, "seam_cut", cut)
    # windows of 4,000 overlapping by 1,000 over 9,000: kept 3,000, windows [0, 3,500),
    # [2,499, 6,500), [5,499, 9,000) (starts rounded down to the frame period 3); the
    # probe reaches 700 steps either side of 3,000: [2,298, 3,500) and [2,499, 3,700)
    for far, first in ((0.05, True), (float("inf"), False)):
        calls.clear()
        n[0] = 0
        st = SeamStats()
        g, _, _ = seams.stitched_posteriors(crf, em, 4000, 1000, 4, far=far, stats=st,
                                            probe=700)
        # (and each seam's intersection: [2,499, 3,500) and [5,499, 6,500))
        assert calls[:2] == [[1001, 1201, 1202], [1001, 1001, 3500, 3501, 4001]], calls
        assert calls[-1] == [9000] and st.post_seqs_whole == 1
        assert (len(calls) == 3) == first  # far apart: whole at once
        assert st.post_whole == 2 and st.post_first == 0  # 3 windows, 2 seams
        assert float((g - whole).abs().max()) < 1e-6  # float32 noise of the batching


def test_a_sequence_over_the_whole_cap_never_goes_whole_at_once(monkeypatch):
    """whole_cap (the CPU's memory bound): a sequence longer than it takes no far-seam
    shortcut and no probe: its far seam widens, then merges its two windows only, and
    the posteriors are still the whole sequence's."""
    from semiseg.annotate import posterior_bound
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    calls = _count_calls(monkeypatch, seams)
    real = posterior_bound.seam_cut

    def cut(lo, hi, *a):  # the seam at 6,000 never certifies; the one at 3,000 as it is
        return (None, 1.0) if lo > 4000 else real(lo, hi, *a)
    monkeypatch.setattr(posterior_bound, "seam_cut", cut)
    st = SeamStats()
    g, _, _ = seams.stitched_posteriors(crf, em, 4000, 1000, 4, far=0.05, stats=st,
                                        probe=700, whole_cap=8999)
    assert max(max(c) for c in calls) < 9000  # never the whole 9,000 steps at once
    assert [1001, 1201, 1202] not in calls  # no probe
    assert st.post_seqs_whole == 0 and st.post_whole == 1  # one seam merged
    assert float((g - whole).abs().max()) < 1e-5


def test_far_probe_goes_whole_before_any_full_window(monkeypatch):
    """Long windows: the first seam is probed with two short windows; a probe whose bound
    exceeds `far` sends the sequence whole at once (no full window computed), one
    that agrees is followed by the full windows and their own checks. Either way the
    posteriors are the whole sequence's."""
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    calls = _count_calls(monkeypatch, seams)
    # windows of 6,000 steps overlapping by 1,000 over 9,000: centres [0, 5,000) and
    # [5,000, 9,000), windows [0, 5,500) and [4,500, 9,000); the probe reaches 1,500
    # steps to either side of the seam at 5,000: [3,498, 5,500) (3,500 rounded down to
    # the frame period 3) and [4,500, 6,500); each pair with its intersection [4,500, 5,500)
    for tol, want in ((-1.0, [[1000, 2000, 2002], [9000]]),
                      (1e-5, [[1000, 2000, 2002], [1000, 4500, 5500]])):
        calls.clear()
        st = SeamStats()
        g, _, _ = seams.stitched_posteriors(crf, em, 6000, 1000, 4, tol=tol, far=-1.0,
                                            stats=st, probe=1500)
        assert calls[:2] == want, calls
        assert float((g - whole).abs().max()) < 1e-5
        assert len(st.post_probes) == (tol < 0)
        assert st.post_first + st.post_widened + st.post_whole == 1
    # windows no longer than twice the probe: no probe at all
    calls.clear()
    seams.stitched_posteriors(crf, em, 6000, 1000, 4, probe=3000)
    assert calls[0] == [1000, 4500, 5500]


def test_short_windows_widen_then_merge_until_seams_agree(monkeypatch):
    """Short windows whose seams never agree (tol = -1): each seam's overlap is doubled
    max_widen times, then its two windows become one, until one window is left; the
    posteriors are then the whole sequence's, and every seam counts as decoded whole."""
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    calls = _count_calls(monkeypatch, seams)
    st = SeamStats()
    out: list = []
    g, _, _ = seams.stitched_posteriors(crf, em, 3000, 600, 8, tol=-1.0, max_widen=1,
                                        stats=st, windows_out=out)
    # 9,000 steps, kept centres of 2,400: 4 windows, 3 seams (and their 3 intersections);
    # round 1 the windows, round 2 each seam widened once (every window changed), then
    # merges
    assert len(calls[0]) == 7 and len(calls[1]) == 7
    assert out == [(0, 9000, 0, 9000)] and st.post_seqs_whole == 1
    assert st.post_whole == 3 and st.post_first == 0
    assert float((g - whole).abs().max()) < 1e-6


def test_widened_seam_recomputes_a_window_that_did_not_change(monkeypatch):
    """Windows of 3,950 steps overlapping by 1,000 over 9,000: kept spans end at 2,950,
    5,900 and 8,850, so the third window already reaches the sequence's end. Its seam
    with the last window failing once (forced) is widened: the last window reaches
    further left while the third keeps its extent, and so its pass is computed again
    for the boundary marginals of the larger overlap (found at 300 kb of fly on a GPU:
    the rows were missing). The posteriors are the whole sequence's."""
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    calls = _count_calls(monkeypatch, seams)
    from semiseg.annotate import posterior_bound

    real = posterior_bound.seam_cut
    failed = []

    def cut(lo, hi, *a):  # the last seam (it may cut from 7,375) fails once
        if lo > 7000 and not failed:
            failed.append(lo)
            return None, 1.0
        return real(lo, hi, *a)
    monkeypatch.setattr(posterior_bound, "seam_cut", cut)
    st = SeamStats()
    out: list = []
    g, _, _ = seams.stitched_posteriors(crf, em, 3950, 1000, 8, stats=st, windows_out=out)
    assert failed and st.post_widened >= 1 and len(out) == 4
    assert out[2][3] == 9000 and calls[1].count(9000 - out[2][2]) == 1  # computed again
    assert float((g - whole).abs().max()) < 1e-6


def test_merge_rounds_take_merge_factor_times_the_steps_a_call(monkeypatch):
    """Seams 0 and 2 of four failing (forced; the others certify at tol 1e-2) merge
    windows 0-1 and 2-3 of five at once (max_widen 0) into two windows about twice the
    first width. At one window's steps a call (per_call 1) the merge
    round runs them in two semi-CRF calls; with merge_factor 4 in one. The posteriors
    are the whole sequence's either way (only the batching differs: float32 rounding)."""
    from semiseg.annotate import posterior_bound
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    real_cut, real_pass = posterior_bound.seam_cut, seams.posteriors_and_ends
    fail_at = {1800, 5400}  # the nominal places of seams 0 and 2 (kept spans of 1,800)

    def cut(lo, hi, *a):
        if any(lo <= m < hi for m in fail_at) and hi - lo < 1900:  # first width only
            return None, 1.0
        return real_cut(lo, hi, *a)
    monkeypatch.setattr(posterior_bound, "seam_cut", cut)
    results = {}
    for factor in (1, 4):
        batches = []

        def spy(t, *a, batches=batches):
            batches.append(t["lengths"].tolist())
            return real_pass(t, *a)
        monkeypatch.setattr(seams, "posteriors_and_ends", spy)
        st, out = SeamStats(), []
        g, _, _ = seams.stitched_posteriors(crf, em, 2800, 1000, 1, tol=1e-2, max_widen=0,
                                            stats=st, windows_out=out, merge_factor=factor)
        assert st.post_whole == 2 and len(out) == 3, (st, out)
        merged = [[n for n in b if n > 3000] for b in batches]  # the merged windows
        merged = [m for m in merged if m]
        assert sum(map(len, merged)) == 2
        assert len(merged) == (2 if factor == 1 else 1), batches
        assert float((g - whole).abs().max()) < 1e-2
        results[factor] = g
    assert float((results[1] - results[4]).abs().max()) < 1e-6


def test_annotate_long_merges_at_once_on_a_gpu_only(monkeypatch):
    """annotate_long asks gene_decode for no doubling of a failing seam on a CUDA device
    (GPU_MAX_WIDEN: its calls are latency-bound) and for CPU_MAX_WIDEN on the CPU, whose
    windows are the user's memory bound; windows of at most GPU_WINDOW on the GPU."""
    from types import SimpleNamespace

    from semiseg.annotate import posterior_seams as seams

    asked = []

    class Stop(Exception):
        pass

    def spy(head, em, W, ov, per_call, **kw):
        asked.append((W, kw["max_widen"]))
        raise Stop
    monkeypatch.setattr(seams, "gene_decode", spy)
    for dev in ("cuda", "cpu"):
        ann = SimpleNamespace(model=SimpleNamespace(crf=SimpleNamespace(max_duration=256)),
                              device=torch.device(dev), max_steps=1_000_000, overlap=0,
                              batch_steps=200_000)
        with pytest.raises(Stop):
            seams.annotate_long(ann, torch.zeros(5, 3), None)
    assert asked == [(seams.GPU_WINDOW, 0), (1_000_000, 2)]


def test_window_terms_come_from_the_whole_sequence():
    """Windows of 9,374 steps overlapping by 2,048 over 15 kb of chrI leave a last window
    of 1,374 steps. Its head terms computed from its own bases alone (the ORF-length
    score reads a whole ORF, which the window's start cuts) gave posteriors 0.21 away
    from the whole decode's in the sequence's last 49 steps, with every seam agreeing;
    sliced from the whole sequence's terms they are the whole decode's."""
    from semiseg.annotate.posterior_seams import gene_decode

    _, crf, em = _chri_emissions(30000, 45000)
    _, post, bnd = crf.decode_with_marginals(em[None], torch.tensor([em.shape[0]]))
    _, p2, b2 = gene_decode(crf, em, 9374, 2048, 1, stats=SeamStats())
    assert float((p2 - post[0]).abs().max()) < 1e-5
    assert float((b2 - bnd[0]).abs().max()) < 1e-5


@pytest.mark.parametrize("W", [1500, 3000])
def test_widening_never_reaches_past_a_windows_own_far_end(W, monkeypatch):
    """Windows that overlap by half their length (`--decode-overlap` W / 2), one seam
    failing always (forced) while its neighbours certify: its second doubling would
    reach past the left window's start or the right window's end, and the bound then
    read boundary marginals from outside a window (rows sliced from the wrong end:
    silently, or a traceback at 300 kb of fly with windows of 32,768 overlapping by
    16,384). Such a seam merges instead: every seam checked has its left window
    starting first and its right window ending last, with their intersection between,
    and the posteriors are the whole sequence's."""
    from semiseg.annotate import posterior_bound
    from semiseg.annotate import posterior_seams as seams

    _, crf, em = _chri_emissions(30000, 39000)
    whole, _, _ = seams.stitched_posteriors(crf, em, em.shape[0] + 1, 1000, 4)
    real = posterior_bound.seam_cut
    seen = []

    def cut(lo, hi, K, A, B, C, *a):
        seen.append((A.start, A.end, B.start, B.end, C.start, C.end))
        if lo < 4500 < hi:  # the seam at 4,500 never certifies
            return None, 1.0
        return real(lo, hi, K, A, B, C, *a)
    monkeypatch.setattr(posterior_bound, "seam_cut", cut)
    st = SeamStats()
    g, _, _ = seams.stitched_posteriors(crf, em, W, W // 2, 8, max_widen=2, stats=st)
    assert seen and st.post_whole >= 1
    for a0, a1, b0, b1, c0, c1 in seen:
        assert a0 <= b0 < a1 <= b1 and (c0, c1) == (b0, a1)
    assert float((g - whole).abs().max()) < 1e-5
