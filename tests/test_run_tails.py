"""Run tails (crf.run_tails, genemodel/frames.FrameLayout.add_tails): one segmentation per
gene structure.

Oracles: a segmentation count written here (dynamic programming over the masks, plain
Python) and the grammar's log-partition with every score 0, which is the log of the
number of segmentations: 0 exactly when there is one.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from semiseg.genemodel.frames import FrameLayout
from semiseg.genemodel.gold import GoldReport, frame_gold
from semiseg.genome import LabelScheme
from semiseg.genome.gff import Transcript


def _scheme(min_intron: int) -> LabelScheme:
    labels = [{"name": "intergenic", "strand": "."},
              {"name": "CDS+", "role": "CDS", "strand": "+"},
              {"name": "CDS-", "role": "CDS", "strand": "-"},
              {"name": "intron+", "role": "intron", "strand": "+"},
              {"name": "intron-", "role": "intron", "strand": "-"}]
    return LabelScheme.from_dict({"name": "t", "kind": "gene_structure",
                                  "background": "intergenic", "labels": labels,
                                  "min_intron": min_intron})


def _durations(dm, K):
    """Per label, the durations the duration mask allows."""
    return [[d for d in range(1, K + 1) if dm[d - 1, c] == 0] for c in range(dm.shape[1])]


def _sample_path(lay, K, T, rng):
    """A random segmentation of T steps under the grammar without tails, beginning and
    ending with an outside label: [(start, duration, label)]."""
    tm = lay.transition_mask(tails=False)
    dm = lay.duration_mask(K)
    bm = lay.begin_mask()
    tail = lay.is_tail()
    outside = [c for c in range(len(lay)) if lay.frame[c] < 0 and not tail[c]]
    durs = _durations(dm, K)
    while True:
        path, t, prev = [], 0, None
        while t < T:
            opts = [(c, d) for c in range(len(lay)) if not tail[c] for d in durs[c]
                    if t + d <= T and bm[t % 3, c]
                    and (prev is None and c in outside
                         or prev is not None and tm[(d - 1) % 3, prev, c] == 0)]
            if not opts:
                break
            c, d = rng.choice(opts)
            path.append((t, d, c))
            t, prev = t + d, c
        if t == T and path[-1][2] in outside:
            return path


def _count(lay, K, keys, tails: bool, typed: bool = False) -> int:
    """Segmentations of the per-step keys (a chaining label's run kind, any other
    label's index; typed: a chaining label's run kind and exon type) under the masks:
    plain dynamic programming over (end, last label)."""
    tm = lay.transition_mask(tails=tails)
    dm = lay.duration_mask(K)
    bm = lay.begin_mask()
    run = lay._run_kind()
    chaining = set(run[c] for c in np.flatnonzero(lay.is_tail()))
    key = [((("run", run[c], lay.exon[c]) if typed else ("run", run[c]))
            if run[c] in chaining else ("label", lay.base[c])) for c in range(len(lay))]
    T = len(keys)
    n = [dict() for _ in range(T + 1)]  # n[t][c]: segmentations of [0, t) ending in c
    for t in range(1, T + 1):
        for c in range(len(lay)):
            if not tails and lay.is_tail()[c]:
                continue
            total = 0
            for d in range(1, min(K, t) + 1):
                s = t - d
                if dm[d - 1, c] != 0 or not bm[s % 3, c]:
                    continue
                if any(keys[p] != key[c] for p in range(s, t)):
                    continue
                if s == 0:
                    total += 1
                else:
                    total += sum(v for p, v in n[s].items() if tm[(d - 1) % 3, p, c] == 0)
            if total:
                n[t][c] = total
    return sum(v for c, v in n[T].items() if not (tails and lay.is_tail()[c]))


@pytest.mark.parametrize("min_intron,K", [(6, 7), (1, 5), (9, 12)])
def test_each_gene_structure_has_exactly_one_segmentation_with_tails(min_intron, K):
    """Random gene structures (segmentations of the grammar without tails, outside
    labels at both ends) have many segmentations without tails and exactly one with
    them."""
    lay = FrameLayout.from_scheme(_scheme(min_intron), tails=True)
    rng = random.Random(min_intron * 100 + K)
    run = lay._run_kind()
    chaining = set(run[c] for c in np.flatnonzero(lay.is_tail()))
    several = 0
    for _ in range(25):
        path = _sample_path(lay, K, 40, rng)
        keys = []
        for _, d, c in path:
            keys += [("run", run[c]) if run[c] in chaining else ("label", c)] * d
        assert _count(lay, K, keys, tails=True) == 1, path
        without = _count(lay, K, keys, tails=False)
        assert without >= 1
        several += without > 1
    assert several > 10  # the test means something: chained runs had choices before


def _tx(strand, *blocks):
    return Transcript(id="t", chrom="c", strand=strand, type="mRNA",
                      cds=np.array(blocks, np.int64), exons=np.zeros((0, 2), np.int64),
                      utrs=np.zeros((0, 2), np.int64))


def _gold_log_z(tails: bool, K: int) -> float:
    """The grammar's log-partition (scores 0, float64) masked to the gold labelling of
    intergenic sequence around a plus-strand gene with one 300 bp intron."""
    from semiseg.crf import log_partition
    from semiseg.genemodel.frames import base_codes
    from semiseg.genemodel.seqmask import sequence_allowed

    rng = random.Random(3)
    intron = "GT" + "".join(rng.choice("AC") for _ in range(296)) + "AG"
    gene = "ATGAAA" + intron + "GCCTAA"  # spliced ATG AAA GCC TAA
    seq = "C" * 130 + gene + "C" * 90
    lay = FrameLayout.from_scheme(_scheme(20), tails=tails)
    codes = frame_gold(lay, np.zeros(len(seq), np.int64),
                       [_tx("+", (130, 136), (436, 442))], seq, report=GoldReport())
    al = sequence_allowed(lay, torch.as_tensor(base_codes(seq))).numpy()
    allowed = torch.as_tensor(al & lay.gold_mask(codes))
    return float(log_partition(torch.zeros(1, *allowed.shape, dtype=torch.float64),
                               torch.tensor(lay.transition_mask()),
                               torch.tensor(lay.duration_mask(K)), allowed=allowed[None],
                               end=torch.tensor(lay.end_mask()) if tails else None,
                               backend="torch"))


def test_a_gold_gene_longer_than_k_has_one_path_with_tails():
    """A gene with an intron and intergenic runs longer than K: with tails its gold
    labelling is one segmentation (log-count 0); without, a great many."""
    K = 64
    assert _gold_log_z(tails=True, K=K) == pytest.approx(0.0, abs=1e-9)
    assert _gold_log_z(tails=False, K=K) > 50 * math.log(2)


def test_tails_keep_every_other_label_and_the_posterior_decode():
    """Tail labels come after every other label (gold codes stay valid); a head with
    tails decodes and gives marginals that sum to 1 (labels of its scheme only)."""
    from semiseg.genemodel.head import FrameHead

    plain = FrameLayout.from_scheme(_scheme(20))
    lay = FrameLayout.from_scheme(_scheme(20), tails=True)
    n = len(plain)
    assert lay.names[:n] == plain.names and lay.scheme_label[:n] == plain.scheme_label
    assert sorted(lay.names[n:]) == sorted(
        [x + "~" for x in plain.names if x == "intergenic" or x.startswith(("intron", "CDS"))])
    head = FrameHead(lay, max_duration=32).double()
    torch.manual_seed(0)
    T = 400
    rng = random.Random(1)
    seq = "".join(rng.choice("ACGT") for _ in range(T))
    from semiseg.genemodel.frames import base_codes

    onehot = torch.nn.functional.one_hot(torch.as_tensor(base_codes(seq)).long(), 4)
    em = torch.cat([torch.randn(1, T, len(lay.channels), dtype=torch.float64),
                    onehot[None].double()], -1)
    seg, post, bnd = head.decode_with_marginals(em, torch.tensor([T]), backend="torch")
    assert torch.allclose(post.sum(-1).double(), torch.ones(1, T, dtype=torch.float64), atol=1e-5)
    internal = head.decode_posterior_internal(em, torch.tensor([T]), backend="torch")
    assert not lay.is_tail()[internal.labels[0].numpy()].any()
    assert (seg.labels[0] >= 0).all() and int(seg.labels.max()) < head.num_labels


@pytest.mark.parametrize("min_intron,K", [(2, 4), (4, 5)])
def test_long_introns_give_each_long_intron_two_segmentations(min_intron, K):
    """crf.long_introns: a second tail kind per intron label. Random gene structures
    have 2 ** (introns longer than K) segmentations (each such intron's tails all of one
    kind or all of the other), counted here by dynamic programming, and a tail of one
    kind never goes on into the other."""
    lay = FrameLayout.from_scheme(_scheme(min_intron), tails=True, long_introns=True)
    plain = FrameLayout.from_scheme(_scheme(min_intron), tails=True)
    assert lay.names[:len(plain)] == plain.names
    rng = random.Random(min_intron * 31 + K)
    run = lay._run_kind()
    chaining = set(run[c] for c in np.flatnonzero(lay.is_tail()))
    kind = np.asarray(lay.kind)
    tail = lay.is_tail()
    tm = lay.transition_mask()
    cross = tail[:, None] & tail[None, :] & (kind[:, None] != kind[None, :])
    assert cross.any() and not np.isfinite(tm[:, cross]).any()
    long_seen = 0
    for i in range(200):  # 25 structures, more until 3 long introns were counted
        if i >= 25 and long_seen >= 3:
            break
        path = _sample_path(plain, K, 50, rng)
        keys, runs = [], []
        for _, d, c in path:
            k = ("run", run[c]) if run[c] in chaining else ("label", c)
            if keys and keys[-1] == k and k[0] == "run":
                runs[-1][1] += d
            else:
                runs.append([k, d])
            keys += [k] * d
        n_long = sum(1 for k, d in runs
                     if k[0] == "run" and lay.kind_names[k[1]].startswith("intron") and d > K)
        long_seen += n_long
        assert _count(lay, K, keys, tails=True) == 2 ** n_long, path
    assert long_seen >= 3  # the test means something


def test_long_intron_tails_start_apart_and_a_head_decodes():
    """The second intron tails' scores start apart from the first's (a rarer way in,
    a flatter tail: else both would learn alike), and a head with them decodes to the
    scheme's labels."""
    from semiseg.genemodel.frames import base_codes
    from semiseg.genemodel.head import LONG_INTRON_INIT, FrameHead

    lay = FrameLayout.from_scheme(_scheme(20), tails=True, long_introns=True)
    head = FrameHead(lay, max_duration=32)
    names, _ = lay.param_kinds()
    k1, k2 = names.index("intron~+"), names.index("intron=+")
    donor = names.index("donor+")
    assert float(head.transition[donor, k2]) == LONG_INTRON_INIT[0]
    assert float(head.transition[donor, k1]) == 0.0
    assert float(head.transition[k2, k2]) == 0.0
    assert float(head.duration[-1, k2]) == pytest.approx(LONG_INTRON_INIT[1])
    assert float(head.duration[-1, k1]) == 0.0
    T = 300
    rng = random.Random(4)
    seq = "".join(rng.choice("ACGT") for _ in range(T))
    onehot = torch.nn.functional.one_hot(torch.as_tensor(base_codes(seq)).long(), 4)
    torch.manual_seed(1)
    em = torch.cat([torch.randn(1, T, len(lay.channels)), onehot[None].float()], -1)
    seg, post, _ = head.decode_with_marginals(em, torch.tensor([T]), backend="torch")
    assert torch.allclose(post.sum(-1), torch.ones(1, T), atol=1e-4)
    assert (seg.labels[0] >= 0).all() and int(seg.labels.max()) < head.num_labels


def test_long_introns_without_run_tails_is_a_clear_error():
    """crf.long_introns adds to the run tails: without crf.run_tails a one-line error
    naming the option, not a model that silently ignores it."""
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError

    with pytest.raises(SemisegError, match="crf.long_introns.*crf.run_tails"):
        build_model(load_config("configs/demo.yaml", ["crf.long_introns=true",
                                                      "crf.run_tails=false"]), 4, 5)
    build_model(load_config("configs/demo.yaml", ["crf.long_introns=true",
                                                  "crf.run_tails=true"]), 4, 5)


@pytest.mark.parametrize("tails", [False, True])
def test_gold_mask_against_its_definition(tails):
    """gold_mask, element by element: a code allows its own label, UNKNOWN allows all,
    a strand's any-intron code allows every label whose run is that strand's intron,
    and a run tail is allowed wherever its label is. Array and tensor input alike."""
    from semiseg.genemodel.frames import INTRON_ANY, UNKNOWN

    lay = FrameLayout.from_scheme(_scheme(20), tails=tails)
    C = len(lay)
    rng = np.random.default_rng(3)
    codes = rng.integers(-3, C, size=(3, 41))
    codes[0, :3] = (UNKNOWN, INTRON_ANY["+"], INTRON_ANY["-"])  # each special code at least once
    run = lay._run_kind()

    def own(code, c):
        if code == UNKNOWN or code == c:
            return True
        return any(code == ic and run[c] == lay.kind_of(f"intron{s}")
                   for s, ic in INTRON_ANY.items())

    want = np.array([[[own(k, c) or own(k, lay.base[c]) for c in range(C)] for k in row]
                     for row in codes])
    assert tails == lay.has_tails
    assert np.array_equal(lay.gold_mask(codes), want)
    got = lay.gold_mask(torch.as_tensor(codes))
    assert isinstance(got, torch.Tensor) and torch.equal(got, torch.as_tensor(want))
