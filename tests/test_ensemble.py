"""Ensembles of gene models (semiseg/genemodel/ensemble.py, `semiseg ensemble`).

Oracles: an ensemble of a model with itself annotates exactly as the model alone (the
mean of two equal terms is the term); an ensemble's CRF terms equal the float64 mean of
its members' terms computed by the members themselves; bad combinations are refused.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from seqs import ROOT, SHIPPED_MODEL, chrI_piece

from semiseg.checkpoint import (
    Checkpoint,
    build_model,
    load_checkpoint,
    save_checkpoint,
    write_ensemble,
)
from semiseg.errors import SemisegError
from semiseg.genemodel.ensemble import make_ensemble
from semiseg.model import model_hash


def perturbed(ckpt: dict, seed: int) -> dict:
    """A second member: the shipped weights with seeded noise (a different model)."""
    g = torch.Generator().manual_seed(seed)
    state = {k: (v + 0.05 * torch.randn(v.shape, generator=g) if v.is_floating_point()
                 else v.clone()) for k, v in ckpt["model"].items()}
    out = dict(ckpt, model=state, model_hash=model_hash(state))
    out.pop("content_hash", None)  # the shipped file's content hash is not this model's
    return out


@pytest.fixture(scope="module")
def shipped():
    return load_checkpoint(SHIPPED_MODEL).data


@pytest.fixture(scope="module")
def piece(tmp_path_factory):
    return chrI_piece(tmp_path_factory.mktemp("ens"), 30000, 38000)[1]


def test_terms_are_the_members_mean(shipped):
    a, b = shipped, perturbed(shipped, 1)
    ens, _ = build_model(Checkpoint("ab", make_ensemble([a, b], ["a", "b"])))
    ma, _ = build_model(Checkpoint("a", a))
    mb, _ = build_model(Checkpoint("b", b))
    for m in (ens, ma, mb):
        m.eval()
    g = torch.Generator().manual_seed(0)
    T = 700
    codes = torch.randint(0, 4, (2, T), generator=g)
    x = torch.zeros(2, T, shipped["n_features"])
    x[..., :4] = torch.nn.functional.one_hot(codes, 4).float()
    lengths = torch.tensor([T, T - 123])
    with torch.no_grad():
        em, _, _ = ens(x, lengths)
        t = ens.crf._terms(em, lengths)
        ta = ma.crf._terms(ma(x, lengths)[0], lengths)
        tb = mb.crf._terms(mb(x, lengths)[0], lengths)
    for key in ("scores", "transition", "duration_bias", "start", "end"):
        want = (ta[key].double() + tb[key].double()) / 2
        got = t[key].double()
        fin = torch.isfinite(want)
        assert torch.equal(fin, torch.isfinite(got)), key
        assert torch.equal(want[~fin], got[~fin]), key  # the same -inf entries
        assert torch.allclose(got[fin], want[fin], rtol=1e-6, atol=1e-5), key
        assert not torch.allclose(ta[key].double()[fin], want[fin]) or key in ("start", "end")
    assert torch.equal(t["allowed"], ta["allowed"])
    # the ensemble's posteriors are neither member's
    pe = ens.crf._posteriors(t, "auto")
    pa = ma.crf._posteriors(ta, "auto")
    assert (pe - pa).abs().max() > 1e-3
    assert torch.allclose(pe.sum(-1)[0], torch.ones(T), atol=1e-4)


def test_an_ensemble_of_one_model_twice_annotates_as_the_model(shipped, piece, tmp_path):
    from semiseg.annotate.run import annotate

    ens = tmp_path / "twice.pt"
    save_checkpoint(make_ensemble([shipped, shipped], ["a", "a"]), ens)
    out = {}
    for name, model in (("one", SHIPPED_MODEL), ("two", str(ens))):
        annotate(model, piece, str(tmp_path / name), device="cpu")
        out[name] = {s: Path(f"{tmp_path / name}.{s}").read_bytes() for s in ("bed", "gff3")}
        assert out[name]["bed"]
    assert out["one"]["bed"] == out["two"]["bed"]
    # the GFF3 header names the model hash, which differs; the features do not
    strip = [b"\n".join(line for line in out[k]["gff3"].splitlines() if not line.startswith(b"#"))
             for k in ("one", "two")]
    assert strip[0] == strip[1]


def test_cli_writes_an_ensemble_that_annotates(shipped, piece, tmp_path):
    b = tmp_path / "b.pt"
    save_checkpoint(perturbed(shipped, 2), b)
    ens = tmp_path / "e" / "ens.pt"
    env = dict(os.environ, PYTHONPATH=ROOT)
    run = subprocess.run([sys.executable, "-m", "semiseg.cli", "ensemble", SHIPPED_MODEL, str(b),
                          "-o", str(ens)], check=False, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    ck = load_checkpoint(ens).data
    assert ck["member_hashes"] == [shipped["model_hash"],
                                   model_hash(load_checkpoint(b).data["model"])]
    assert ck["model_hash"] not in ck["member_hashes"]
    assert "optimizer" not in ck
    run = subprocess.run([sys.executable, "-m", "semiseg.cli", "annotate", "--model", str(ens),
                          "--fasta", piece, "--out", str(tmp_path / "a"), "--device", "cpu"],
                         check=False, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "ensemble of 2 models" in run.stderr + run.stdout
    rows = Path(tmp_path / "a.bed").read_text().splitlines()
    assert rows and rows[-1].split("\t")[2] == "8000"


def test_bad_combinations_are_refused(shipped, tmp_path):
    b = perturbed(shipped, 3)
    with pytest.raises(SemisegError, match="at least two"):
        make_ensemble([shipped], ["a"])
    nested = make_ensemble([shipped, b], ["a", "b"])
    with pytest.raises(SemisegError, match="already an ensemble"):
        make_ensemble([nested, b], ["n", "b"])
    other = dict(b, config={**b["config"], "crf": {**b["config"]["crf"], "max_duration": 128}})
    with pytest.raises(SemisegError, match="'crf' differs"):
        make_ensemble([shipped, other], ["a", "o"])
    chromatin = dict(b, config={**b["config"], "crf": {**b["config"]["crf"], "frames": False}})
    with pytest.raises(SemisegError, match="only gene models"):
        make_ensemble([shipped, chromatin], ["a", "c"])
    cols = dict(b, columns=list(np.asarray(b["columns"])[::-1]))
    with pytest.raises(SemisegError, match="columns differs"):
        make_ensemble([shipped, cols], ["a", "c"])
    moved = dict(b, genome={**b["genome"], "fasta": ["/elsewhere/chrI.fa"]})
    assert len(make_ensemble([shipped, moved], ["a", "m"])["members"]) == 2  # same files
    iupac = dict(b, genome={**b["genome"], "iupac": "other"})
    with pytest.raises(SemisegError, match="genome differs"):
        make_ensemble([shipped, iupac], ["a", "i"])
    # the training section may differ (seeds, epochs, a held-out block)
    seeded = dict(b, config={**b["config"], "train": {**b["config"]["train"], "seed": 9}})
    assert len(make_ensemble([shipped, seeded], ["a", "s"])["members"]) == 2
    with pytest.raises(SemisegError, match="is a folder"):
        save = tmp_path / "adir"
        save.mkdir()
        torch.save(shipped, tmp_path / "a.pt")
        torch.save(b, tmp_path / "b.pt")
        write_ensemble([str(tmp_path / "a.pt"), str(tmp_path / "b.pt")], str(save))


def member_checkpoint(ckpt: dict, i: int = 0) -> dict:
    """Member i of an ensemble checkpoint as a single-model checkpoint (a single-model
    checkpoint is returned as it is)."""
    if "members" not in ckpt:
        return ckpt
    out = {k: v for k, v in ckpt.items()
           if k not in ("members", "member_hashes", "member_calibration")}
    out.update(model=ckpt["members"][i], model_hash=ckpt["member_hashes"][i])
    if (ckpt.get("member_calibration") or [None] * (i + 1))[i] is not None:
        out["calibration"] = ckpt["member_calibration"][i]
    return out


def test_a_member_comes_back_out(shipped):
    b = perturbed(shipped, 4)
    ens = make_ensemble([shipped, b], ["a", "b"])
    back = member_checkpoint(ens, 1)
    assert back["model_hash"] == b["model_hash"] and "members" not in back
    model, _ = build_model(Checkpoint("member 1", back))
    assert model_hash(model.state_dict()) == b["model_hash"]
    assert member_checkpoint(shipped) is shipped


def test_each_member_keeps_its_own_encoder_scale(shipped):
    """train.calibrate: an ensemble's members keep the scales fitted for them (one
    unscaled), and a member taken back out has its own again."""
    a = dict(shipped, calibration={"encoder_scale": 0.8})
    b = perturbed(shipped, 5)
    ens = make_ensemble([a, b], ["a", "b"])
    assert "calibration" not in ens
    model, _ = build_model(Checkpoint("ab", ens))
    assert [m.crf.encoder_scale for m in model.members] == [0.8, 1.0]
    back, _ = build_model(Checkpoint("a", member_checkpoint(ens, 0)))
    assert back.crf.encoder_scale == 0.8
