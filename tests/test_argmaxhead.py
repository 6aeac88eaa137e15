"""The no-CRF baseline head (semiseg/genemodel/argmaxhead.py) against per-base numpy arithmetic."""

from __future__ import annotations

import numpy as np
import torch

from semiseg.genemodel.argmaxhead import ArgmaxHead
from semiseg.genemodel.frames import UNKNOWN, FrameLayout
from semiseg.genome import LabelScheme


def layout():
    return FrameLayout.from_scheme(LabelScheme.from_dict({
        "name": "t", "kind": "gene_structure", "background": "intergenic", "labels": [
            {"name": "intergenic", "strand": "."},
            {"name": "CDS+", "role": "CDS", "strand": "+"},
            {"name": "CDS-", "role": "CDS", "strand": "-"}]}))


def test_argmax_head_against_numpy():
    lay = layout()
    head = ArgmaxHead(lay)
    rng = np.random.default_rng(0)
    B, T, C = 2, 30, head.num_labels
    x = rng.normal(size=(B, T, C + 4)) * 2
    em = torch.tensor(x, dtype=torch.float32)
    codes = rng.integers(0, len(lay), size=(B, T))
    codes[0, :5] = UNKNOWN
    lengths = torch.tensor([30, 22])
    # numpy oracle
    lp = x[..., :C] - np.log(np.exp(x[..., :C]).sum(-1, keepdims=True))
    y = np.asarray(lay.scheme_label)[codes]
    y[0, :5] = -1
    y[1, 22:] = -1
    want = [-sum(lp[b, t, y[b, t]] for t in range(T) if y[b, t] >= 0) for b in range(B)]
    got = head.nll(em, torch.as_tensor(codes), lengths)
    assert np.allclose(got.numpy(), want, rtol=1e-5)
    seg = head.decode(em, lengths)
    for b, L in enumerate([30, 22]):
        am = lp[b, :L].argmax(-1)
        assert (seg.labels[b, :L].numpy() == am).all() and (seg.labels[b, L:] == -1).all()
        rebuilt = np.concatenate([[c] * d for _, d, c in seg.segments[b]])
        assert (rebuilt == am).all()
        assert all(seg.segments[b][i][2] != seg.segments[b][i + 1][2]
                   for i in range(len(seg.segments[b]) - 1))
    p, bnd = head.marginals(em, lengths)
    pn = np.exp(lp)
    assert np.allclose(p[0].numpy(), pn[0], atol=1e-6)
    assert np.allclose(bnd[0, 1:].numpy(), 1 - (pn[0, 1:] * pn[0, :-1]).sum(-1), atol=1e-6)
    assert float(p[1, 22:].abs().max()) == 0 and float(bnd[1, 22:].abs().max()) == 0


def test_the_argmax_model_swaps_strands_under_reverse_complement():
    """The demo scheme (intergenic, CDS+, CDS-, intron+, intron-): the reverse-complement
    pass swaps each stranded label's channel with its twin's, then A<->T, C<->G."""
    import pytest

    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError
    from semiseg.genome import load_scheme
    from semiseg.model import Segmenter

    cfg = load_config("configs/demo.yaml", ["crf.head=argmax", "crf.site_scores=false",
                                            "crf.orf_length_scores=false"])
    scheme = load_scheme(cfg.labels.scheme)
    model = Segmenter(4, len(scheme.names), cfg, scheme=scheme)
    assert model.channel_swap.tolist() == [0, 2, 1, 4, 3, 5 + 3, 5 + 2, 5 + 1, 5 + 0]
    with pytest.raises(SemisegError, match="crf.head"):
        Segmenter(4, 5, load_config("configs/demo.yaml",
                                    ["crf.head=argmax", "crf.frames=false",
                                     "crf.site_scores=false", "crf.orf_length_scores=false"]),
                  scheme=scheme)


def test_a_configured_intron_penalty_is_ignored_by_the_argmax_head(tmp_path):
    """The demo config with crf.head=argmax keeps annotate.intron_penalty (and a
    branch_penalty): annotating with the config's values must work (nothing to
    penalise); asking for one on the command line is a one-line error, as is a negative
    branch penalty, and none leaves output."""
    import copy
    import math
    import os

    import pytest

    from semiseg.annotate.run import annotate
    from semiseg.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
    from semiseg.errors import SemisegError
    from semiseg.genome import Fasta

    root = os.path.join(os.path.dirname(__file__), "..")
    ckpt = load_checkpoint(os.path.join(root, "semiseg", "models", "yeast_cds_frames.pt"))
    ckpt = copy.deepcopy(ckpt.data)
    ckpt["config"]["crf"].update(head="argmax", site_scores=False, orf_length_scores=False)
    ckpt["config"]["annotate"]["intron_penalty"] = 2.0
    ckpt["config"]["annotate"]["branch_penalty"] = 2.0
    from semiseg.genome import load_scheme
    from semiseg.model import Segmenter

    cfg = Checkpoint("argmax", ckpt).config
    torch.manual_seed(0)
    model = Segmenter(ckpt["n_features"], len(ckpt["labels"]["labels"]), cfg,
                      scheme=load_scheme(cfg.labels.scheme))
    ckpt["model"] = model.state_dict()
    from semiseg.model import model_hash
    ckpt["model_hash"] = model_hash(ckpt["model"])  # a new model: its own identity
    path = tmp_path / "argmax.pt"
    save_checkpoint(ckpt, path)
    with Fasta(os.path.join(root, "data", "yeast", "chrI.fa")) as fa:
        seq = fa.fetch("chrI", 30000, 33000)
    fasta = tmp_path / "s.fa"
    fasta.write_text(f">s\n{seq}\n")
    annotate(str(path), str(fasta), str(tmp_path / "a"), device="cpu")
    assert (tmp_path / "a.bed").stat().st_size > 0
    with pytest.raises(SemisegError, match="--intron-penalty"):
        annotate(str(path), str(fasta), str(tmp_path / "b"), device="cpu", intron_penalty=2.0)
    with pytest.raises(SemisegError, match="--branch-penalty"):
        annotate(str(path), str(fasta), str(tmp_path / "b"), device="cpu", branch_penalty=2.0)
    for bad in (-1.0, math.nan):
        with pytest.raises(SemisegError, match="--branch-penalty: expected a number >= 0 or "
                                               "inf"):
            annotate(os.path.join(root, "semiseg", "models", "yeast_cds_frames.pt"),
                     str(fasta), str(tmp_path / "b"), device="cpu", branch_penalty=bad)
    with pytest.raises(SemisegError, match="--intron-penalty: expected a finite number"):
        annotate(os.path.join(root, "semiseg", "models", "yeast_cds_frames.pt"), str(fasta),
                 str(tmp_path / "b"), device="cpu", intron_penalty=math.inf)
    assert not list(tmp_path.glob("b.*"))
