"""Splice-site channels (semiseg/genemodel/splice.py) against string scans of the sequence."""

from __future__ import annotations

import math
import random

import numpy as np
import torch
from seqs import layout, onehot, rc

from semiseg.genemodel.sites import PSEUDO, count_site_pwms
from semiseg.genemodel.splice import ACCEPTOR, DONOR, SCALE, SpliceSignals


def site_string(seq: str, p: int, span, minus: bool) -> str:
    """The site's bases in the transcript's direction, '-' off the sequence."""
    before, after = span
    pad = "-" * 64
    s = pad + seq + pad
    q = p + 64
    if not minus:
        return s[q - before:q + after]
    return rc(s[q - after + 1:q + before + 1])


def test_counts_match_a_direct_count():
    rng = random.Random(1)
    lay = layout()
    kinds = [lay.kind_names[k] for k in lay.kind]
    code = {k: kinds.index(k) for k in ("donor+", "acceptor+", "donor-", "acceptor-")}
    seqs, golds, sites = [], [], {"donor": [], "acceptor": []}
    for _ in range(3):
        seq = "".join(rng.choice("ACGT") for _ in range(300))
        gold = np.zeros(len(seq), np.int64)
        for kind in code:
            for p in rng.sample(range(len(seq)), 4):  # some near the edges too
                gold[p] = code[kind]
        for p in np.flatnonzero(gold):
            kind = kinds[gold[p]]
            site = kind[:-1]
            sites[site].append(site_string(seq, p, DONOR if site == "donor" else ACCEPTOR,
                                           kind.endswith("-")))
        seqs.append(onehot(seq))
        golds.append(gold)
    mats, n = count_site_pwms(seqs, golds, lay, ("donor", "acceptor"))
    donor, acceptor = mats["donor"], mats["acceptor"]
    assert n == {"donor": len(sites["donor"]), "acceptor": len(sites["acceptor"])}
    allseq = "".join("".join("ACGT"[i] for i in x.argmax(1)) for x in seqs)
    bg = [(allseq.count(b) + 1) / (len(allseq) + 4) for b in "ACGT"]
    for mat, strs in ((donor, sites["donor"]), (acceptor, sites["acceptor"])):
        for i in range(mat.shape[1]):
            col = [s[i] for s in strs]
            total = sum(c in "ACGT" for c in col) + 4 * PSEUDO
            for j, b in enumerate("ACGT"):
                want = math.log((col.count(b) + PSEUDO) / total / bg[j])
                assert abs(mat[j, i] - want) < 1e-5


def direct_scores(seq: str, donor: np.ndarray, acceptor: np.ndarray) -> np.ndarray:
    out = np.zeros((len(seq), 4))
    for p in range(len(seq)):
        for j, (mat, span, minus) in enumerate(((donor, DONOR, False), (acceptor, ACCEPTOR, False),
                                                 (donor, DONOR, True), (acceptor, ACCEPTOR, True))):
            s = site_string(seq, p, span, minus)
            out[p, j] = sum(mat["ACGT".index(b), i] for i, b in enumerate(s) if b in "ACGT")
    return out / SCALE


def test_channels_match_string_scans_on_both_strands():
    rng = np.random.default_rng(2)
    donor = rng.normal(size=(4, sum(DONOR))).astype(np.float32)
    acceptor = rng.normal(size=(4, sum(ACCEPTOR))).astype(np.float32)
    m = SpliceSignals()
    m.set(donor, acceptor)
    r = random.Random(3)
    seq = "".join(r.choice("ACGTN") for _ in range(90))
    got = m(torch.from_numpy(onehot(seq))[None])[0].double().numpy()
    np.testing.assert_allclose(got, direct_scores(seq, donor, acceptor), atol=1e-5)
    # the reverse complement, read backwards, swaps the strands' channels
    back = m(torch.from_numpy(onehot(rc(seq)))[None])[0].numpy()[::-1]
    np.testing.assert_allclose(back[:, [2, 3, 0, 1]], got, atol=1e-5)


def test_matrices_travel_with_the_model_state():
    m = SpliceSignals()
    m.set(np.ones((4, sum(DONOR)), np.float32), 2 * np.ones((4, sum(ACCEPTOR)), np.float32))
    fresh = SpliceSignals()
    fresh.load_state_dict(m.state_dict())
    assert torch.equal(fresh.donor, m.donor) and torch.equal(fresh.acceptor, m.acceptor)


def test_training_counts_the_yeast_splice_sites_into_the_model(tmp_path):
    """On the demo's chrII the counted matrices put GT at the donor and AG at the
    acceptor (every gold intron is GT..AG), and they travel in a checkpoint."""
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.train.loop import _load_data
    from semiseg.train.tables import count_sites

    cfg = load_config("configs/demo.yaml", ["model.splice_features=true", "model.channels=8",
                                            "model.layers=2", "model.fine_channels=8"])
    _, data, scheme, columns, train_ds, _ = _load_data(cfg)
    model, _ = build_model(cfg, len(columns), len(scheme.names))
    count_sites(model, scheme, train_ds)
    d = model.encoder.splice.donor.numpy()
    a = model.encoder.splice.acceptor.numpy()
    A, C, G, T = range(4)
    assert d[:, DONOR[0]].argmax() == G and d[:, DONOR[0] + 1].argmax() == T
    assert a[:, ACCEPTOR[0] - 1].argmax() == A and a[:, ACCEPTOR[0]].argmax() == G
    assert d[G, DONOR[0]] > 1.0 and a[G, ACCEPTOR[0]] > 1.0  # far above background
    state = {k: v.clone() for k, v in model.state_dict().items()}
    again, _ = build_model(cfg, len(columns), len(scheme.names))
    again.load_state_dict(state)
    assert torch.equal(again.encoder.splice.donor, model.encoder.splice.donor)
