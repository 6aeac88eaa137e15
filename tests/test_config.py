"""Config loading: validation, suggestions for unknown keys, overrides, shipped configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from semiseg.config.load import CHOICES, ON_OFF, _get, apply_overrides, from_dict, load_config
from semiseg.config.schema import Config
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


def test_number_overrides_read_as_python_floats():
    """YAML 1.1 reads 1e4 and inf as strings; a number field takes them as Python's float()
    does, and still refuses NaN and words."""
    for text, want in (("1e4", 1e4), ("inf", float("inf")), (".inf", float("inf")),
                       ("2.5", 2.5), ("3", 3.0)):
        cfg = from_dict(apply_overrides({}, [f"annotate.branch_penalty={text}"]))
        assert cfg.annotate.branch_penalty == want, text
    for text in ("nan", ".nan", "abc"):
        with pytest.raises(SemisegError, match="annotate.branch_penalty: expected a number"):
            from_dict(apply_overrides({}, [f"annotate.branch_penalty={text}"]))


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


# ----------------------------------------------------------------------------- YAML words
ENUM_VALUES = [(key, value) for key, choices in sorted(CHOICES.items()) for value in choices]


def _yaml_for(key: str, text: str) -> str:
    """A config file setting dotted `key` to the unquoted YAML `text`."""
    *sections, leaf = key.split(".")
    lines = [f"{'  ' * i}{s}:" for i, s in enumerate(sections)]
    return "\n".join(lines + [f"{'  ' * len(sections)}{leaf}: {text}"]) + "\n"


@pytest.mark.parametrize("key, value", ENUM_VALUES)
def test_every_enum_value_via_set_and_yaml(tmp_path, key, value):
    """Each value of each enum option, unquoted, as `--set KEY=VALUE` and in a YAML file
    (on/off are booleans to YAML: the options that offer them take them back)."""
    assert _get(load_config(None, [f"{key}={value}"]), key) == value
    path = tmp_path / "c.yaml"
    path.write_text(_yaml_for(key, value))
    assert _get(load_config(path), key) == value
    path.write_text(_yaml_for(key, f'"{value}"'))  # quoted: a plain string
    assert _get(load_config(path), key) == value


@pytest.mark.parametrize("key", sorted(ON_OFF))
@pytest.mark.parametrize("word, value", [("off", "off"), ("no", "off"), ("false", "off"),
                                         ("on", "on"), ("yes", "on"), ("true", "on")])
def test_on_off_options_take_yaml_booleans(tmp_path, key, word, value):
    assert _get(load_config(None, [f"{key}={word}"]), key) == value
    path = tmp_path / "c.yaml"
    path.write_text(_yaml_for(key, word))
    assert _get(load_config(path), key) == value


def test_on_off_options_are_the_ones_that_offer_on_and_off():
    assert ON_OFF == {"train.amp", "annotate.reverse_complement"}


@pytest.mark.parametrize("key", sorted(set(CHOICES) - ON_OFF))
def test_other_enums_explain_a_yaml_boolean(key):
    with pytest.raises(SemisegError, match=f"{key}: expected a string, got False.*quote"):
        load_config(None, [f"{key}=off"])


@pytest.mark.parametrize("text, value", [("false", False), ("true", True), ("off", False),
                                         ("on", True), ("1", 1), ("3", 3), ("64", 64)])
def test_duration_transitions_false_true_or_a_period(tmp_path, text, value):
    cfg = load_config(None, [f"crf.duration_transitions={text}"])
    assert cfg.crf.duration_transitions == value
    assert type(cfg.crf.duration_transitions) is type(value)
    path = tmp_path / "c.yaml"
    path.write_text(_yaml_for("crf.duration_transitions", text))
    assert load_config(path).crf.duration_transitions == value


@pytest.mark.parametrize("text, message", [
    ("0", "expected false, true or a period P >= 1, got 0"),
    ("-2", "expected false, true or a period P >= 1, got -2"),
    ("abc", "expected true or false or an integer, got 'abc'"),
    ("1.5", "expected true or false or an integer, got 1.5"),
])
def test_duration_transitions_bad_values(text, message):
    with pytest.raises(SemisegError, match=f"crf.duration_transitions: {message}"):
        load_config(None, [f"crf.duration_transitions={text}"])


@pytest.mark.parametrize("period, shape", [(False, (3, 3)), (True, (4, 3, 3)),
                                           (2, (2, 3, 3))])
def test_duration_transitions_reach_the_crf(period, shape):
    from semiseg.checkpoint import build_model

    cfg = from_dict({"model": {"channels": 8, "layers": 1}, "crf": {
        "max_duration": 4, "duration_transitions": period}})
    model, _ = build_model(cfg, 4, 3)
    assert tuple(model.crf.transition.shape) == shape
