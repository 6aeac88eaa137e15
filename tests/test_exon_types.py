"""Exon types (crf.exon_types, genemodel/frames.py): the coding bases of each exon in the
label of its type (single, initial, internal, terminal), each type with its own learned
scores.

Oracles: each exon's type read off a gene structure here, in plain Python, from the
codon or splice site on either side and the strand (the transcript's sense); the
segmentation count of test_run_tails (dynamic programming over the masks); gold codes
compared with the codes of the layout without types; a float64 log-partition.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from test_run_tails import _count, _sample_path, _scheme, _tx

from semiseg.genemodel.frames import EXONS, FrameLayout
from semiseg.genemodel.gold import GoldReport, frame_gold


def _expected_type(strand: str, left: str, right: str) -> str:
    """An exon's type from the kinds on its left and right (genome order)."""
    if strand == "+":
        first, last = left == "start", right == "stop"
    else:  # the transcript runs right to left
        first, last = right == "start", left == "stop"
    return {(True, True): "single", (True, False): "initial", (False, False): "internal",
            (False, True): "terminal"}[first, last]


def _count_typed(lay, K, keys) -> int:
    """test_run_tails._count with each step's key naming the exon type too: (run kind,
    exon type) for the labels that chain, the label (its base) for the others."""
    return _count(lay, K, keys, tails=True, typed=True)


def _typed_keys(plain, typed, path):
    """_count_typed's per-step keys of the typed layout for a path of the layout without
    types, each CDS run's type read off its neighbours; and the exons' (first step,
    last step + 1, type)."""
    segs = [(s, d, plain.kind_names[plain.kind[c]], c) for s, d, c in path]
    run = typed._run_kind()
    chaining = set(run[c] for c in np.flatnonzero(typed.is_tail()))
    keys, exons = [], []
    i = 0
    while i < len(segs):
        s, d, k, c = segs[i]
        if k[:-1] != "CDS":
            tc = typed.names.index(plain.names[c])
            keys += [("run", run[tc], -1) if run[tc] in chaining else ("label", tc)] * d
            i += 1
            continue
        j = i
        while j < len(segs) and segs[j][2] == k and segs[j][3] == c:
            j += 1
        left = segs[i - 1][2][:-1] if i else "edge"
        right = segs[j][2][:-1] if j < len(segs) else "edge"
        e = EXONS.index(_expected_type(k[-1], left, right))
        n = sum(x[1] for x in segs[i:j])
        tc = typed.names.index(f"{plain.names[c]}.{EXONS[e]}")
        exons.append((len(keys), len(keys) + n, e))
        keys += [("run", run[tc], e)] * n
        i = j
    return keys, exons


@pytest.mark.parametrize("min_intron,K,T", [(2, 4, 50), (1, 5, 60)])
def test_each_gene_structure_has_one_typed_segmentation_and_no_other_type(min_intron, K, T):
    """Random gene structures (outside labels at both ends, so every exon's ends are
    seen): with exon types and run tails, the labelling whose exons carry the types
    read off their neighbours here has exactly one segmentation; the same structure
    with one exon given any other type has none; and, types not named, the structure
    has exactly one typed segmentation (test_run_tails._count: keys by run kind)."""
    plain = FrameLayout.from_scheme(_scheme(min_intron), tails=True)
    typed = FrameLayout.from_scheme(_scheme(min_intron), tails=True, exon_types=True)
    rng = random.Random(min_intron * 7 + K)
    seen = set()
    for i in range(100):  # 30 structures, more until every type was checked
        if i >= 30 and seen == set(range(len(EXONS))):
            break
        path = _sample_path(plain, K, T, rng)
        keys, exons = _typed_keys(plain, typed, path)
        assert _count_typed(typed, K, keys) == 1, path
        untyped = [(k[0], k[1]) if k[0] == "run" else k for k in keys]
        assert _count(typed, K, untyped, tails=True) == 1, path
        for a, b, e in sorted(exons, key=lambda x: x[2] in seen)[:2]:  # types not yet seen
            seen.add(e)
            for other in range(len(EXONS)):
                if other != e:
                    wrong = keys[:a] + [(k[0], k[1], other) for k in keys[a:b]] + keys[b:]
                    assert _count_typed(typed, K, wrong) == 0, (path, a, other)
    assert seen == set(range(len(EXONS)))  # the sample held every type


def test_a_coding_tail_goes_on_only_in_its_own_exon_type():
    """The transition mask: a typed coding label's run tail continues into its own type
    only, and a last piece of one type never into another type's coding bases."""
    typed = FrameLayout.from_scheme(_scheme(6), tails=True, exon_types=True)
    cds = [c for c in range(len(typed)) if typed.exon[c] >= 0 and not typed.is_tail()[c]]
    assert len(cds) == 2 * 3 * 4
    tm = typed.transition_mask()
    for c in cds:
        tail = next(t for t in range(len(typed)) if typed.base[t] == c and t != c)
        for c2 in cds:
            if typed.exon[c2] != typed.exon[c]:
                assert not np.isfinite(tm[:, tail, c2]).any()
                assert not np.isfinite(tm[:, c, c2]).any()
        assert np.isfinite(tm[:, tail, c]).any()


def _gene_seq():
    rng = random.Random(5)

    def intron(n):
        return "GT" + "".join(rng.choice("AC") for _ in range(n - 4)) + "AG"

    # + strand, three exons: ATG AAA | intron | GCC CCC | intron | GGG TAA
    gene = "ATGAAA" + intron(40) + "GCCCCC" + intron(44) + "GGGTAA"
    single = "ATGCCCAAATGA"
    return "C" * 20 + gene + "C" * 15 + single + "C" * 20


def test_gold_codes_carry_each_exon_type_and_collapse_to_the_untyped_codes():
    """frame_gold with exon types: the coding bases of the first, middle and last exon
    of a three-exon gene and of a one-exon gene in their types (on both strands, the
    minus one the reverse complement), and otherwise the codes of the layout without
    types (same kind and frame at every base)."""
    from semiseg.genome.codes import reverse_complement

    seq = _gene_seq()
    a = 20
    blocks = [(a, a + 6), (a + 46, a + 52), (a + 96, a + 102)]
    s0 = a + 102 + 15
    single = [(s0, s0 + 12)]
    for strand in "+-":
        s = seq if strand == "+" else reverse_complement(seq)
        n = len(s)
        bl = blocks if strand == "+" else [(n - e, n - b) for b, e in blocks[::-1]]
        sg = single if strand == "+" else [(n - e, n - b) for b, e in single]
        txs = [_tx(strand, *bl), _tx(strand, *sg)]
        out = {}
        for typed in (False, True):
            lay = FrameLayout.from_scheme(_scheme(20), exon_types=typed)
            out[typed] = (lay, frame_gold(lay, np.zeros(n, np.int64), txs, s,
                                          report=GoldReport()))
        (pl, pc), (tl, tc) = out[False], out[True]
        kf = [(pl.kind[c], pl.frame[c]) if c >= 0 else c for c in pc]
        kt = [(tl.kind[c], tl.frame[c]) if c >= 0 else c for c in tc]
        assert kf == kt
        types = {}
        for p, c in enumerate(tc):
            if c >= 0 and tl.exon[c] >= 0:
                types.setdefault(EXONS[tl.exon[c]], []).append(p)
        # transcript order: + left to right, - right to left
        first, mid, last = (bl if strand == "+" else bl[::-1])
        want = {"initial": first, "internal": mid, "terminal": last, "single": sg[0]}
        for e, (b0, b1) in want.items():
            got = types[e]
            assert b0 <= min(got) and max(got) < b1, (strand, e)
        assert not (set(types) - set(want))


def _log_z_gold(lay, seq, codes, K=32):
    from semiseg.crf import log_partition
    from semiseg.genemodel.frames import base_codes
    from semiseg.genemodel.seqmask import sequence_allowed

    al = sequence_allowed(lay, torch.as_tensor(base_codes(seq))).numpy()
    allowed = torch.as_tensor(al & lay.gold_mask(codes))
    return float(log_partition(torch.zeros(1, *allowed.shape, dtype=torch.float64),
                               torch.tensor(lay.transition_mask()),
                               torch.tensor(lay.duration_mask(K)), allowed=allowed[None],
                               end=torch.tensor(lay.end_mask()), backend="torch"))


def test_gold_of_typed_genes_is_one_segmentation_of_the_grammar():
    """The typed gold codes of the three-exon and one-exon genes (both strands, run
    tails) are exactly one segmentation (log-count 0, float64); with a middle exon's
    codes set to the initial type the gold path is forbidden (-inf)."""
    from semiseg.genome.codes import reverse_complement

    seq = _gene_seq()
    a = 20
    blocks = [(a, a + 6), (a + 46, a + 52), (a + 96, a + 102)]
    s0 = a + 102 + 15
    for strand in "+-":
        s = seq if strand == "+" else reverse_complement(seq)
        n = len(s)
        bl = blocks if strand == "+" else [(n - e, n - b) for b, e in blocks[::-1]]
        sg = (s0, s0 + 12) if strand == "+" else (n - s0 - 12, n - s0)
        lay = FrameLayout.from_scheme(_scheme(20), tails=True, exon_types=True)
        codes = frame_gold(lay, np.zeros(n, np.int64), [_tx(strand, *bl), _tx(strand, sg)],
                           s, report=GoldReport())
        assert _log_z_gold(lay, s, codes) == pytest.approx(0.0, abs=1e-9)
        bad = codes.copy()
        mid = bl[1]
        for p in range(*mid):
            c = bad[p]
            if c >= 0 and lay.exon[c] >= 0:
                bad[p] = lay._find(lay.kind[c], lay.frame[c], EXONS.index("initial"))
        assert _log_z_gold(lay, s, bad) == float("-inf")


def test_a_typed_head_decodes_and_its_types_have_their_own_scores():
    """A FrameHead with exon types: durations and transitions per exon type (their own
    parameters), decodes to scheme labels with marginals that sum to 1; the posterior
    decode's score of a coding label sums its kind and frame over the types (and run
    tails), as plain sums here."""
    from semiseg.genemodel.frames import base_codes
    from semiseg.genemodel.head import FrameHead

    lay = FrameLayout.from_scheme(_scheme(20), tails=True, exon_types=True)
    plain = FrameLayout.from_scheme(_scheme(20), tails=True)
    head = FrameHead(lay, max_duration=32).double()
    names, pk = lay.param_kinds()
    assert head.duration.shape[1] == len(names) == len(plain.kind_names) + 16
    assert len({pk[c] for c in range(len(lay)) if lay.exon[c] >= 0}) == 16
    T = 300
    rng = random.Random(2)
    seq = "".join(rng.choice("ACGT") for _ in range(T))
    onehot = torch.nn.functional.one_hot(torch.as_tensor(base_codes(seq)).long(), 4)
    torch.manual_seed(0)
    em = torch.cat([torch.randn(1, T, len(lay.channels), dtype=torch.float64),
                    onehot[None].double()], -1)
    seg, post, _ = head.decode_with_marginals(em, torch.tensor([T]), backend="torch")
    assert torch.allclose(post.sum(-1).double(), torch.ones(1, T, dtype=torch.float64), atol=1e-5)
    g = torch.rand(1, T, len(lay), dtype=torch.float64)
    dp = head.decode_posteriors(g)
    for c in range(len(lay)):
        if lay.is_tail()[c]:
            assert float(dp[..., c].abs().max()) == 0.0
            continue
        same = [x for x in range(len(lay)) if lay.kind[lay.base[x]] == lay.kind[c]
                and lay.frame[x] == lay.frame[c]]
        assert torch.allclose(dp[..., c], g[..., same].sum(-1))


@pytest.mark.parametrize("kw", [dict(tails=True), dict(tails=True, exon_types=True),
                                dict(tails=True, exon_types=True, long_introns=True)])
def test_decode_scores_are_each_groups_sum_in_label_order_to_the_bit(kw):
    """The posterior decode's score of a label, in float32: its group's posteriors
    added in label order into 0, the very bits of a plain loop of float32 additions
    (the certified decode and the whole-sequence decode must see the same numbers);
    run tails 0."""
    from semiseg.genemodel.head import FrameHead

    lay = FrameLayout.from_scheme(_scheme(20), **kw)
    head = FrameHead(lay, max_duration=16)
    tail = lay.is_tail()
    key = [(lay.kind[lay.base[c]], lay.frame[lay.base[c]]) for c in range(len(lay))]
    torch.manual_seed(3)
    g = torch.rand(2, 50, len(lay))
    g[g < 0.3] = 0.0
    g[0, :, 5] *= 1e-6  # terms of very different sizes, where the order shows
    dp = head.decode_posteriors(g).numpy()
    x = g.numpy()
    for c in range(len(lay)):
        if tail[c]:
            assert (dp[..., c] == 0).all()
            continue
        want = np.zeros(x.shape[:2], np.float32)
        for j in range(len(lay)):
            if key[j] == key[c]:
                want = want + x[..., j]
        assert (dp[..., c].view(np.int32) == want.view(np.int32)).all(), c
