"""train.symmetric_introns (semiseg/genemodel/symmetry.py): the tied introns' per-strand
constants that give both strands the same net score per base, against known shifts of a
strand's length model and a float64 log-partition of long runs at other lengths."""

from __future__ import annotations

import os

import pytest
import torch
from seqs import ROOT
from test_frames import scheme

from semiseg.crf import log_partition
from semiseg.genemodel.frames import FrameLayout
from semiseg.genemodel.head import FrameHead
from semiseg.genemodel.symmetry import symmetric_intron_bias

K = 40
FLY_MODEL = os.path.join(ROOT, "semiseg", "models", "fly_gene_frames.pt")


def _head(seed: int, tails: bool) -> FrameHead:
    lay = FrameLayout.from_scheme(scheme(), tails=tails)
    head = FrameHead(lay, max_duration=K, tie_noncoding=True)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in (head.transition, head.duration, head.noncoding_bias):
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return head


def _kind_params(head, name: str) -> list[int]:
    """The learned-parameter kinds of a label kind (its run tails included)."""
    lay = head.layout
    return sorted({int(head.kind[c]) for c in range(len(lay))
                   if lay.kind_names[lay._run_kind()[c]] == name})


def _net(head, bias, name: str, n0: int, n1: int) -> float:
    """Growth per base of log Z of a long run of `name` (float64, the intron's constant
    added to its bases as the tie adds it) minus the background's; each run's two
    lengths near n0 and n1, whole tail pieces of its own apart."""
    lay = head.layout
    kind = lay._run_kind()
    C = len(kind)
    t = head._terms(torch.zeros(1, 16, head.n_channels + 4), torch.tensor([16]))
    tr, db = t["transition"].detach().double(), t["duration_bias"].detach().double()

    def rate(label, add):
        cols = [c for c in range(C) if lay.kind_names[kind[c]] == label]
        tails = [c for c in cols if lay.base[c] != c]
        step = lay.tail_duration(tails[0], head.max_duration) if tails else 1
        z = []
        lengths = (-(-n0 // step) * step, -(-n1 // step) * step)
        for n in lengths:
            allowed = torch.zeros(1, n, C, dtype=torch.bool)
            allowed[..., cols] = True
            z.append(float(log_partition(torch.full((1, n, C), add, dtype=torch.float64), tr,
                                         db, allowed=allowed)))
        return (z[1] - z[0]) / (lengths[1] - lengths[0])

    strand = name[-1]
    return rate(name, bias["+-".index(strand)]) - rate("outside:intergenic", 0.0)


def _fly_head():
    """The shipped fly model's head with its constants as trained (its calibration,
    whose constants are already symmetric, left out)."""
    from semiseg.checkpoint import Checkpoint, build_model, load_checkpoint

    data = dict(load_checkpoint(FLY_MODEL).data)
    data.pop("calibration", None)
    return build_model(Checkpoint("trained", data))[0].crf


@pytest.mark.parametrize("which", ["random, no run tails", "shipped fly model"])
def test_both_strands_net_the_same_per_base(which):
    """After the constants are set, a long intron run of either strand gains the same
    score per base against intergenic sequence (measured at other lengths than the
    module's), and that common net is the mean of the two nets before."""
    head = _head(1, False) if which.startswith("random") else _fly_head()
    n0, n1 = 1500, 2500  # the module's runs: 3000 and about 6000
    before = head.noncoding_bias.tolist()
    nets0 = [_net(head, before, s, n0, n1) for s in ("intron+", "intron-")]
    assert abs(nets0[0] - nets0[1]) > (0.01 if which.startswith("random") else 5e-5)
    bias = symmetric_intron_bias(head)
    assert head.noncoding_bias.tolist() == before  # the head is not changed
    nets = [_net(head, bias, s, n0, n1) for s in ("intron+", "intron-")]
    assert abs(nets[0] - nets[1]) < 1e-6
    assert abs(nets[0] - (nets0[0] + nets0[1]) / 2) < 1e-6


def test_a_known_shift_of_one_strand_moves_the_constants_by_half():
    """delta per base added to every plus-strand intron segment (delta x its duration):
    the plus strand's constant falls by delta / 2 and the minus strand's rises by
    delta / 2 (their mean net rises by delta / 2)."""
    head = _head(2, tails=False)
    b0 = symmetric_intron_bias(head)
    delta = 0.05
    d = torch.arange(1, K + 1, dtype=torch.float32)
    with torch.no_grad():
        for k in _kind_params(head, "intron+"):
            head.duration[:, k] += delta * d
    b1 = symmetric_intron_bias(head)
    assert b1[0] - b0[0] == pytest.approx(-delta / 2, abs=1e-6)
    assert b1[1] - b0[1] == pytest.approx(delta / 2, abs=1e-6)


def test_no_tied_introns_nothing_to_set():
    lay = FrameLayout.from_scheme(scheme())
    assert symmetric_intron_bias(FrameHead(lay, max_duration=K)) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_head_on_the_gpu_gives_the_same_constants():
    """After GPU training the head lives on CUDA (train.symmetric_introns runs there):
    the constants are those of the same head on the CPU (the run's own inputs were once
    made on the CPU, and training crashed after its last epoch)."""
    head = _head(3, tails=True)
    want = symmetric_intron_bias(head)
    assert symmetric_intron_bias(head.cuda()) == pytest.approx(want, abs=1e-9)
