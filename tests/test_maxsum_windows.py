"""The max-sum in windows decoded side by side and certified in order
(annotate/maxsum_windows.py) against the whole-sequence Viterbi and brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_seams import adversarial, check_against_bruteforce, naive, random_cases, whole

from semiseg.annotate.maxsum_windows import parallel_certified_viterbi
from semiseg.annotate.seams import SeamStats


@pytest.mark.parametrize("Q", [1, 3], ids=["static", "periodic"])
def test_side_by_side_equals_whole_sequence_decode(Q):
    """Random semi-CRFs and window sizes, on 1 and 3 threads: the whole-sequence
    decode's labels and score, and most seams certified from the windows decoded side by
    side (so that path, not only the fallback, is what was checked)."""
    total = SeamStats()
    for seed, T, kw, (want, want_score, starts) in random_cases(Q):
        for W, ov, threads in ((8, 7, 1), (10, 3, 3), (12, 6, 2), (25, 8, 3), (40, 16, 1),
                               (T - 1, 10, 2), (T + 5, 4, 2)):
            st = SeamStats()
            got, score = parallel_certified_viterbi(**kw, window=W, overlap=ov,
                                                    threads=threads, stats=st)
            np.testing.assert_array_equal(got, want, err_msg=f"seed {seed} W {W} ov {ov}")
            assert score == pytest.approx(want_score, rel=1e-9, abs=1e-9)
            unique = "proj_start" in kw and np.isfinite(want_score)
            for t0, c0 in st.points if unique else ():  # each certificate is on the path
                assert starts[t0] and want[t0 - 1] == c0, (seed, W, ov, t0, c0)
            total.add(st)
    assert total.side > 200 and total.side > 2 * (total.first + total.widened)


def test_side_by_side_equals_bruteforce():
    """Tiny sequences against enumeration (every best segmentation listed)."""
    check_against_bruteforce(lambda **kw: parallel_certified_viterbi(
        **kw, window=2, overlap=2, threads=2))


@pytest.mark.parametrize("K", [4, 40], ids=["chained", "long-segments"])
def test_free_windows_in_a_trap_issue_no_certificate(K):
    """The trap of test_seams: a window that starts inside the long middle prefers the
    wrong label. Only the first window (which reads the deciding first bases) may
    certify a seam, at its label; the decode stays right."""
    kw = adversarial(K=K)
    want, _ = whole(kw)
    W, ov = 60, 20
    assert (naive(kw, W, ov) != want).any()
    st = SeamStats()
    got, _ = parallel_certified_viterbi(**kw, window=W, overlap=ov, threads=2, stats=st)
    np.testing.assert_array_equal(got, want)
    assert all(t0 <= W + ov and want[t0 - 1] == c0 for t0, c0 in st.points)
    assert st.whole == 1  # the rest went to the end from the entry, never certified


def test_gene_model_posteriors_side_by_side():
    """The shipped fly model's posterior decode scores (its max-sum's real inputs) over
    20 kb: windows of 3,000 steps side by side give the whole decode's labels."""
    from pathlib import Path

    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.crf import viterbi
    from semiseg.genome import Fasta, GenomeData

    root = Path(__file__).resolve().parent.parent
    ck = load_checkpoint(resolve_model("fly"))
    with Fasta(str(root / "data" / "fly" / "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, torch.device("cpu"), 100000, 5000, 2000000, 200000)
        em, _ = ann.emissions(Item("chr2R_2M_6M", 3_100_000, 3_120_000))
    head = ann.model.crf
    t = head._terms(em[None], torch.tensor([em.shape[0]]))
    g = head._posteriors(t, "auto")[0]
    sc = head.decode_posteriors(g)
    want = viterbi(sc[None], head.decode_tmask, head.decode_dmask, allowed=t["allowed"],
                   proj_start=t["proj_start"]).labels[0].numpy()
    st = SeamStats()
    got, _ = parallel_certified_viterbi(sc, head.decode_tmask, head.decode_dmask,
                                        allowed=t["allowed"][0], proj_start=t["proj_start"][0],
                                        window=3000, overlap=1000, threads=2, stats=st)
    np.testing.assert_array_equal(got, want)
    assert st.side >= 4
