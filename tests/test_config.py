"""Config loading: validation, suggestions for unknown keys, overrides, shipped configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from semiseg.config import Config, apply_overrides, from_dict, load_config
from semiseg.errors import SemisegError

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_validate():
    cfg = from_dict({})
    assert isinstance(cfg, Config)
    assert cfg.model.encoder == "cnn" and cfg.crf.duration == "learned"


def test_unknown_key_suggests_the_closest():
    with pytest.raises(SemisegError,
                       match=r"unknown config key 'train.epoch'.*did you mean 'epochs'"):
        from_dict({"train": {"epoch": 3}})
    with pytest.raises(SemisegError, match=r"unknown config key 'modle'.*did you mean 'model'"):
        from_dict({"modle": {}})


@pytest.mark.parametrize("data, message", [
    ({"train": {"epochs": "ten"}}, "train.epochs: expected an integer"),
    ({"train": {"epochs": 0}}, "train.epochs: must be positive"),
    ({"train": {"lr": -1.0}}, "train.lr: must not be negative"),
    ({"crf": {"duration": "gamma"}}, "crf.duration: expected one of"),
    ({"model": {"encoder": "transformer"}}, "model.encoder: expected one of"),
    ({"device": "tpu"}, "device: expected one of"),
    ({"crf": {"boundaries": "yes"}}, "crf.boundaries: expected true or false"),
    ({"model": {"resolution": 10}, "inputs": {"bin_size": 3}}, "multiple of inputs.bin_size"),
    ({"windows": {"size": 1000, "overlap": 1000}}, "overlap must be smaller"),
    ({"windows": {"valid_fraction": 1.5}}, "valid_fraction"),
    ({"inputs": {"sequence": False}}, "needs the sequence, tracks, or both"),
    ({"model": []}, "model: expected a mapping"),
])
def test_bad_values(data, message):
    with pytest.raises(SemisegError, match=message):
        from_dict(data)


def test_relative_paths_follow_the_config_file(tmp_path):
    (tmp_path / "sub").mkdir()
    cfg_path = tmp_path / "sub" / "c.yaml"
    cfg_path.write_text("inputs:\n  fasta: ../g.fa\n  tracks: {dnase: x.bw, atac: "
                        "{path: y.bam, mapq: 10}}\nlabels:\n  annotation: a.gff3\n")
    cfg = load_config(cfg_path)
    assert cfg.inputs.fasta == str(tmp_path / "g.fa")
    assert cfg.labels.annotation == str(tmp_path / "sub" / "a.gff3")
    assert cfg.inputs.tracks["dnase"] == str(tmp_path / "sub" / "x.bw")
    assert cfg.inputs.tracks["atac"] == {"path": str(tmp_path / "sub" / "y.bam"), "mapq": 10}


def test_overrides():
    data = apply_overrides({"train": {"epochs": 3}}, ["train.epochs=7", "crf.centering=mean",
                                                       "windows.chroms=[chrI, chrII]"])
    cfg = from_dict(data)
    assert cfg.train.epochs == 7 and cfg.crf.centering == "mean"
    assert cfg.windows.chroms == ["chrI", "chrII"]
    with pytest.raises(SemisegError, match="expected KEY=VALUE"):
        apply_overrides({}, ["train.epochs"])
    with pytest.raises(SemisegError, match="did you mean 'lr'"):
        from_dict(apply_overrides({}, ["train.lrr=0.1"]))


def test_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("train:\n  epochz: 3\n")
    with pytest.raises(SemisegError, match=r"bad.yaml: unknown config key 'train.epochz'"):
        load_config(p)
    p.write_text("train: [unclosed\n")
    with pytest.raises(SemisegError, match="bad.yaml"):
        load_config(p)
    with pytest.raises(SemisegError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", ["demo.yaml", "gene_structure.yaml", "chromatin.yaml"])
def test_shipped_configs_load(name):
    cfg = load_config(ROOT / "configs" / name)
    assert cfg.model.resolution % cfg.inputs.bin_size == 0


def test_demo_yaml_matches_the_builtin_demo():
    """`semiseg demo` carries its settings in code (it must run after pip install);
    configs/demo.yaml must say the same."""
    from semiseg.demo import demo_config

    shipped = load_config(ROOT / "configs" / "demo.yaml").to_dict()
    builtin = demo_config((ROOT / "data" / "yeast").resolve()).to_dict()
    assert shipped == builtin


def test_scheme_in_config_is_valid():
    from semiseg.genome import load_scheme

    for name in ("demo.yaml", "gene_structure.yaml"):
        scheme = load_scheme(load_config(ROOT / "configs" / name).labels.scheme)
        assert scheme.background is not None
