"""Issue 43, input faults: bad and hostile inputs to every command, one case each.

Each case is one distinct bad input (a config, a checkpoint, a FASTA and its index, an
annotation, a prediction, a merge part, an argument) or one hostile sequence name, and
checks either a *clear error* (exit code 2, exactly one stderr line
`semiseg: error: ...` naming the culprit, no traceback, no output left behind) or a
*correct result* against an independent oracle (a round trip through the files, the
bytes of a file that must not change, sizes counted from the sequence itself).

The commands run in this process through `semiseg.cli.main` (the console script's entry
point: an exception it lets through is a traceback here too), with the shipped yeast
model and FASTAs of a few kb cut from yeast chrI. Test names say the category:
`test_error_*` (clear error) and `test_result_*` (correct result); benchmarks/
fault_suite.py counts them. Every case is marked `fault`.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.fault
pytest.importorskip("pyBigWig")

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "semiseg" / "models" / "yeast_cds_frames.pt"
DEMO_CFG = ROOT / "configs" / "demo.yaml"
CHRI = ROOT / "data" / "yeast" / "chrI.fa"

# sequence names that GFF3 must escape (or that BED takes as they are): each one record
HOSTILE = ["chr%2C,x&y", "s;e=q", "pct%41", "\u00fcni", "x>gt", "a/b|c", "100%", "c=1,2;3"]


# ----------------------------------------------------------------------------- helpers
def chrI() -> str:
    return "".join(ln.strip() for ln in lines(CHRI) if not ln.startswith(">"))


def write_fasta(path: Path, records: dict[str, str], width: int = 60) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for name, seq in records.items():
            fh.write(f">{name}\n")
            fh.writelines(seq[i:i + width] + "\n" for i in range(0, len(seq), width))
    return path


def run(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """`semiseg ARGS` through the console script's entry point, in this process:
    (exit code, stdout, stderr). An exception other than SystemExit escapes (a
    traceback: the case fails)."""
    from semiseg import cli

    monkeypatch.setattr(sys, "argv", ["semiseg", *map(str, args)])
    monkeypatch.setitem(cli._state, "debug", False)
    capsys.readouterr()
    with pytest.raises(SystemExit) as ex:
        cli.main()
    got = capsys.readouterr()
    code = ex.value.code
    return (0 if code is None else code), got.out, got.err


def clear_error(result, *needles) -> str:
    """Exit 2 and one line 'semiseg: error: ...' holding every needle; the line."""
    code, _, err = result
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("semiseg: error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def lines(path) -> list[str]:
    """The lines of a text file (UTF-8), newlines kept."""
    return Path(path).read_text(encoding="utf-8").splitlines(True)


def files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones too) -> its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def painted(rows, length: int) -> np.ndarray:
    """Per-base label names (object array, '' where nothing) from (start, end, name)."""
    out = np.full(length, "", dtype=object)
    for s, e, name in rows:
        out[s:e] = name
    return out


@pytest.fixture(scope="session")
def shipped():
    from semiseg.checkpoint import load_checkpoint

    return load_checkpoint(SHIPPED).data


@pytest.fixture(scope="session")
def scheme(shipped):
    from semiseg.checkpoint import Checkpoint

    return Checkpoint(str(SHIPPED), shipped).scheme


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    """One annotate run (the shipped model) over a FASTA whose records have the HOSTILE
    names, 5 kb each from chrI (genes in most): returns (prefix, FASTA, sizes)."""
    from semiseg import ui
    from semiseg.annotate.run import annotate

    folder = tmp_path_factory.mktemp("hostile")
    seq = chrI()
    recs = {n: seq[i * 2500:i * 2500 + 5000] for i, n in enumerate(HOSTILE)}
    fa = write_fasta(folder / "hostile.fa", recs)
    ui.set_quiet(True)
    torch.set_num_threads(1)
    annotate(str(SHIPPED), str(fa), str(folder / "h"))
    return folder / "h", fa, {n: len(s) for n, s in recs.items()}


@pytest.fixture(scope="session")
def small_fa(tmp_path_factory):
    """A 2-record FASTA (c1, c2; 3 kb of chrI each)."""
    folder = tmp_path_factory.mktemp("small")
    seq = chrI()
    return write_fasta(folder / "small.fa", {"c1": seq[:3000], "c2": seq[3000:6000]})


def fake_part(prefix: Path, chroms: dict[str, int], model_hash: str = "aaaaaaaaaaaa",
              resolution: int = 1, scheme_name: str | None = None, run_scores: bool = False):
    """An annotation output set made by the OutputWriter itself (no model): segments of
    gene_structure labels, posteriors, a summary.tsv; `run_scores` gives run posteriors
    (BED scores that are segment posteriors)."""
    from semiseg.genome import load_scheme
    from semiseg.genome.write import OutputWriter

    sc = load_scheme("gene_structure")
    if scheme_name:
        sc.name = scheme_name
    rng = np.random.default_rng(len(prefix.name))
    with OutputWriter(prefix, sc, chroms, resolution=resolution, model_hash=model_hash,
                      formats=("bed", "gff3", "bigwig")) as w:
        for c, n in chroms.items():
            cuts = np.unique(np.r_[0, np.sort(rng.choice(np.arange(100, n - 100, 50), 6,
                                                         replace=False)), n])
            lab = np.arange(len(cuts) - 1) % 3  # intergenic, CDS+, CDS-: no equal
            seg = np.stack([cuts[:-1], cuts[1:], lab], axis=1)
            t = -(-n // resolution)
            post = np.full((t, len(sc)), 0.1 / len(sc), np.float32)
            for a, b, lb in seg.tolist():
                post[a // resolution:-(-b // resolution), lb] = 0.9
            rp = (np.array([[a, b, 0.25 + 0.5 * (i % 2)] for i, (a, b, _) in
                            enumerate(seg.tolist())]) if run_scores else None)
            w.add(c, seg, post, np.zeros(t, np.float32), run_posteriors=rp)
    with open(f"{prefix}.summary.tsv", "w") as fh:
        fh.write(f"# semiseg test model {model_hash} resolution {resolution} bp\n"
                 "label\tsegments\tbp\tfraction\n")
    return prefix


# ============================================================================ configs
def _cfg(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def _bomb(size: int = 0) -> str:
    """A "billion laughs": each level lists the previous one 9 times (9^10 leaves at
    10 levels, 377 bytes); with `size`, more levels until the text has `size` bytes."""
    text = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    prev = "a"
    for i in range(1, 1000):
        if i > 9 and len(text) >= size:
            break
        c = f"l{i}"
        text += f"{c}: &{c} [" + ",".join([f"*{prev}"] * 9) + "]\n"
        prev = c
    return text


CONFIG_FILES = {
    "alias-bomb": (_bomb(), ["aliases", "line 2"]),
    "alias-bomb-1kb": (_bomb(1024), ["aliases", "line 2"]),
    "one-alias": ("train: &t\n  epochs: 1\nmodel: *t\n", ["aliases", "line 3"]),
    "list-top": ("- train\n- model\n", ["expected a mapping"]),
    "bad-yaml": ("train: [1, 2\n", ["c.yaml"]),
    "unknown-key": ("train:\n  epoks: 3\n", ["train.epoks", "epochs"]),
    "section-scalar": ("train: 5\n", ["train", "expected a mapping"]),
}


@pytest.mark.parametrize("case", list(CONFIG_FILES))
def test_error_config_file(tmp_path, monkeypatch, capsys, case):
    """A config file that is not a plain mapping of known keys: one line, no run folder;
    the alias bombs (449 and 1,067 bytes, 9^10 leaves and more if expanded) answer at once."""
    text, needles = CONFIG_FILES[case]
    cfg = _cfg(tmp_path, text)
    t0 = time.perf_counter()
    clear_error(run(monkeypatch, capsys, "train", "-c", cfg, "-o", tmp_path / "run", "-q"),
                *needles)
    assert time.perf_counter() - t0 < 5
    assert not (tmp_path / "run").exists()


CONFIG_SETS = {
    "kernel-even": ("model.kernel_size=4", ["model.kernel_size", "odd"]),
    "stem-even": ("model.stem_kernel=8", ["model.stem_kernel", "odd"]),
    "kernel-float": ("model.kernel_size=5.5", ["model.kernel_size", "integer"]),
    "lr-inf": ("train.lr=.inf", ["train.lr", "finite"]),
    "lr-minus-inf": ("train.lr=-.inf", ["train.lr", "finite"]),
    "lr-nan": ("train.lr=.nan", ["train.lr", "number"]),
    "lr-negative": ("train.lr=-1", ["train.lr", "negative"]),
    "lr-word": ("train.lr=fast", ["train.lr", "number"]),
    "lr-alias": ("train.lr=*a", ["train.lr", "number"]),
    "decay-inf": ("train.weight_decay=inf", ["train.weight_decay", "finite"]),
    "clip-inf": ("train.grad_clip=.inf", ["train.grad_clip", "finite"]),
    "warmup-inf": ("train.warmup_epochs=1e999", ["train.warmup_epochs", "finite"]),
    "valid-fraction-inf": ("windows.valid_fraction=.inf", ["windows.valid_fraction"]),
    "dropout-one": ("model.dropout=1.0", ["model.dropout"]),
    "epochs-zero": ("train.epochs=0", ["train.epochs", "positive"]),
    "amp-choice": ("train.amp=maybe", ["train.amp"]),
    "overlap-size": ("windows.overlap=999999999", ["windows.overlap"]),
    "no-equals": ("train.lr", ["--set", "KEY=VALUE"]),
}


@pytest.mark.parametrize("case", list(CONFIG_SETS))
def test_error_config_value(tmp_path, monkeypatch, capsys, case):
    """A bad value given with --set on the demo config: one line naming the key, before
    any file is read or folder made (these were tracebacks: an even kernel at the first
    batch, lr inf in the scheduler)."""
    setting, needles = CONFIG_SETS[case]
    clear_error(run(monkeypatch, capsys, "train", "-c", DEMO_CFG, "-o", tmp_path / "run",
                    "--set", setting, "-q"), *needles)
    assert not (tmp_path / "run").exists()


def test_result_branch_penalty_may_be_infinite():
    """The one float key where inf means something (a rule) still takes it."""
    from semiseg.config.load import load_config

    assert load_config(DEMO_CFG, ["annotate.branch_penalty=inf"]).annotate.branch_penalty \
        == float("inf")


@pytest.mark.parametrize("what", ["missing", "folder", "run-is-a-file"])
def test_error_train_paths(tmp_path, monkeypatch, capsys, what):
    """A config that is not there or is a folder, a run folder path that is a file."""
    afile = tmp_path / "afile"
    afile.write_text("keep")
    cfg, out = {"missing": (tmp_path / "no.yaml", tmp_path / "r"),
                "folder": (tmp_path, tmp_path / "r"),
                "run-is-a-file": (DEMO_CFG, afile)}[what]
    clear_error(run(monkeypatch, capsys, "train", "-c", cfg, "-o", out, "-q"))
    assert afile.read_text() == "keep" and not (tmp_path / "r").exists()


def test_error_scheme_yaml_alias(tmp_path):
    """A label-scheme YAML with an alias is refused like a config."""
    from semiseg.errors import SemisegError
    from semiseg.genome import load_scheme

    p = tmp_path / "s.yaml"
    p.write_text("name: x\nlabels: &l\n  - {name: a}\nmore: *l\n")
    with pytest.raises(SemisegError, match="aliases"):
        load_scheme(str(p))


# ======================================================================== checkpoints
def _flip(ckpt: dict, key: str | None = None) -> dict:
    out = dict(ckpt, model=dict(ckpt["model"]))
    key = key or sorted(k for k, v in out["model"].items() if v.is_floating_point())[5]
    w = out["model"][key].clone()
    bits = w.view(-1).view(torch.int32) if w.dtype == torch.float32 else None
    bits[0] ^= 1 << 20  # one flipped bit of the first value
    out["model"][key] = w
    return out


def _bad_checkpoint(path: Path, kind: str, shipped: dict) -> Path:
    if kind == "flipped-bit":
        torch.save(_flip(shipped), path)
    elif kind == "flipped-bit-rehashed":  # the model hash made to match: content hash
        from semiseg.model import model_hash

        bad = _flip(shipped)
        bad["model_hash"] = model_hash(bad["model"])
        torch.save(bad, path)
    elif kind == "edited-config":
        cfg = json.loads(json.dumps(shipped["config"]))
        cfg["annotate"]["intron_penalty"] = 5.0
        torch.save(dict(shipped, config=cfg), path)
    elif kind == "edited-labels":
        labels = json.loads(json.dumps(shipped["labels"]))
        labels["labels"][1]["name"], labels["labels"][2]["name"] = "CDS-", "CDS+"
        torch.save(dict(shipped, labels=labels), path)
    elif kind == "truncated":
        data = SHIPPED.read_bytes()
        path.write_bytes(data[:len(data) // 2])
    elif kind == "random-bytes":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    elif kind == "zip-not-torch":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("hello.txt", "hi")
    elif kind == "other-dict":
        torch.save({"something": torch.zeros(2)}, path)
    elif kind == "no-model":
        torch.save({k: v for k, v in shipped.items() if k != "model"}, path)
    elif kind == "folder-without-best":
        path.mkdir()
    return path


CHECKPOINTS = {
    "flipped-bit": "model hash",
    "flipped-bit-rehashed": "content hash",
    "edited-config": "content hash",
    "edited-labels": "content hash",
    "truncated": "checkpoint",
    "random-bytes": "not a semiseg checkpoint",
    "zip-not-torch": "checkpoint",
    "other-dict": "not a semiseg checkpoint",
    "no-model": "checkpoint",
    "folder-without-best": "not found",
}


@pytest.mark.parametrize("kind", list(CHECKPOINTS))
def test_error_checkpoint(tmp_path, monkeypatch, capsys, shipped, small_fa, kind):
    """A corrupted or foreign checkpoint: annotate refuses it in one line naming the
    file and writes nothing (flipped bits used to load under the old model identity)."""
    bad = _bad_checkpoint(tmp_path / "bad.pt", kind, shipped)
    out = tmp_path / "o"
    out.mkdir()
    clear_error(run(monkeypatch, capsys, "annotate", "-m", bad, "-f", small_fa, "-o",
                    out / "a", "-q"), CHECKPOINTS[kind])
    assert files(out) == {}


def test_error_ensemble_member_corrupted(tmp_path, monkeypatch, capsys, shipped, small_fa):
    """An ensemble whose second member's weights changed after it was written (its
    content hash made to match again): refused for the member's own hash."""
    from semiseg.checkpoint import content_hash, save_checkpoint, write_ensemble
    from semiseg.model import model_hash

    other = _flip(shipped)
    other["model_hash"] = model_hash(other["model"])
    other.pop("content_hash", None)
    save_checkpoint(other, tmp_path / "b.pt")
    write_ensemble([str(SHIPPED), str(tmp_path / "b.pt")], str(tmp_path / "e.pt"))
    ens = torch.load(tmp_path / "e.pt", weights_only=True)
    ens["members"][1] = _flip({"model": ens["members"][1]})["model"]
    ens["content_hash"] = content_hash({k: v for k, v in ens.items()
                                        if k != "content_hash_rule"})
    torch.save(ens, tmp_path / "e2.pt")
    clear_error(run(monkeypatch, capsys, "annotate", "-m", tmp_path / "e2.pt", "-f", small_fa,
                    "-o", tmp_path / "a", "-q"), "e2.pt", "member")
    assert not list(tmp_path.glob("a.*"))


def test_result_shipped_model_verifies(shipped):
    """The shipped model loads with both hashes checked; its identity is the one it
    always had, and recomputing both hashes independently gives the stored values."""
    import hashlib

    from semiseg.checkpoint import CONTENT_HASH, content_hash

    assert shipped["model_hash"] == "f62d5cf69181"
    assert shipped["content_hash_rule"] == CONTENT_HASH
    assert content_hash({k: v for k, v in shipped.items()
                         if k != "content_hash_rule"}) == shipped["content_hash"]
    digest = hashlib.sha256()  # model_hash by its documented rule, written out here
    for name in sorted(shipped["model"]):
        t = shipped["model"][name].contiguous()
        digest.update(name.encode() + str(tuple(t.shape)).encode() + t.numpy().tobytes())
    assert digest.hexdigest()[:12] == shipped["model_hash"]


def test_result_checkpoint_resaved_loads(tmp_path, shipped):
    """save_checkpoint re-hashes what it writes: a changed checkpoint saved the proper
    way loads, with the change."""
    from semiseg.checkpoint import load_checkpoint, save_checkpoint

    ck = dict(shipped, epoch=99)
    save_checkpoint(ck, tmp_path / "x.pt")
    assert load_checkpoint(tmp_path / "x.pt").data["epoch"] == 99


def test_error_checkpoint_runs_no_code(tmp_path, monkeypatch, capsys, small_fa):
    """A pickle that would run code when loaded: refused, and the code never runs."""
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"format": "semiseg.checkpoint/1", "x": Evil()}, tmp_path / "evil.pt")
    clear_error(run(monkeypatch, capsys, "annotate", "-m", tmp_path / "evil.pt", "-f",
                    small_fa, "-o", tmp_path / "a", "-q"), "evil.pt")
    assert not marker.exists()


# ============================================================================== FASTA
FASTAS = {
    "empty": (b"", "empty"),
    "headers-only": (b">a\n>b\n", "nothing to annotate"),
    "no-header": (b"ACGTACGT\n", "cannot read FASTA"),
    "space-in-sequence": (b">a\nACGT ACGT\n", "not a sequence letter"),
    "digit-in-sequence": (b">a\nACGT1ACGT\n", "not a sequence letter"),
    "duplicate-names": (b">a\nACGT\n>a\nACGT\n", "Duplicate"),
    "binary": (bytes(range(256)) * 4, "FASTA"),
    "plain-gzip": (gzip.compress(b">a\nACGT\n"), "bgzip"),
    "hash-name": (b">ok\nACGTACGTAC\n>#chr2\nACGTACGTAC\n", "'#chr2' (record 2"),
    "track-name": (b">track1\nACGTACGTAC\n", "'track1' (record 1"),
    "browser-name": (b">ok\nACGT\n>x\nACGT\n>browser_x\nACGTACGT\n", "'browser_x' (record 3"),
    "gt-name": (b">ok\nACGT\n>>x\nACGT\n", "'>x' (record 2"),
    "bang-name": (b">!x\nACGT\n", "'!x' (record 1"),
}


@pytest.mark.parametrize("case", list(FASTAS))
def test_error_fasta(tmp_path, monkeypatch, capsys, case):
    """A FASTA that cannot be annotated, or whose names BED cannot hold (a row
    '#chr2 ...' is a comment to every BED reader: annotate used to exit 0 with every row
    lost): one line naming the file/record, nothing written."""
    data, needle = FASTAS[case]
    fa = tmp_path / "in" / "g.fa"
    fa.parent.mkdir()
    fa.write_bytes(data)
    out = tmp_path / "o"
    out.mkdir()
    line = clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", fa, "-o",
                           out / "a", "-q"), needle)
    if case.endswith("name"):
        assert "g.fa" in line
    assert files(out) == {}


@pytest.mark.parametrize("what", ["missing", "folder"])
def test_error_fasta_path(tmp_path, monkeypatch, capsys, what):
    fa = tmp_path / "none.fa" if what == "missing" else tmp_path
    clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", fa, "-o",
                    tmp_path / "a", "-q"), "--fasta")


def test_result_bed_name_left_out_by_chroms(tmp_path, monkeypatch, capsys):
    """A name BED cannot hold is no obstacle when --chroms leaves it out."""
    seq = chrI()
    fa = write_fasta(tmp_path / "g.fa", {"ok": seq[:1500], "#bad": seq[:1500]})
    code, _, err = run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", fa, "-o",
                       tmp_path / "a", "--chroms", "ok", "-q")
    assert code == 0, err
    rows = [ln.split("\t") for ln in lines(tmp_path / "a.bed")]
    assert {r[0] for r in rows} == {"ok"} and rows[-1][2] == "1500"


# --- the .fai index
def _fai_case(tmp_path: Path, case: str):
    """(FASTA path, the records it holds now) after making an index that no longer fits
    (or a broken one) beside it, the index newer than the FASTA."""
    from semiseg.genome import Fasta

    rng = np.random.default_rng(3)
    a = "".join(rng.choice(list("ACGT"), 1000))
    b = "".join(rng.choice(list("ACGT"), 700))
    fa = tmp_path / "g.fa"
    first = {"a": a, "b": b}
    write_fasta(fa, first)
    Fasta(fa).close()  # the index, beside it
    now = {"shrunk": {"a": a, "b": b[:300]}, "grown": {"a": a, "b": b + "ACGT" * 50},
           "appended": {"a": a, "b": b, "c": "GGCC" * 20},
           "dropped": {"a": a}, "rewrapped": first, "renamed": {"x": a, "b": b},
           "other-fasta": first, "garbage": first}[case]
    write_fasta(fa, now, width=50 if case == "rewrapped" else 60)
    if case == "other-fasta":
        (tmp_path / "g.fa.fai").write_text("chrZ\t5\t6\t5\t6\n")
    elif case == "garbage":
        (tmp_path / "g.fa.fai").write_bytes(b"\x00\x01not an index\n")
    future = time.time() + 100
    os.utime(tmp_path / "g.fa.fai", (future, future))  # newer than the FASTA
    return fa, now


FAI_CASES = ["shrunk", "grown", "appended", "dropped", "rewrapped", "renamed",
             "other-fasta", "garbage"]


@pytest.mark.parametrize("case", FAI_CASES)
def test_result_stale_fai(tmp_path, monkeypatch, case):
    """An index that does not fit its FASTA, however new: the sequences read are the
    FASTA's (sizes and bases compared with what was written), and the user's index is
    left exactly as it was (a fresh one lives in the cache)."""
    from semiseg.genome import Fasta

    monkeypatch.setenv("SEMISEG_CACHE", str(tmp_path / "cache"))
    fa, now = _fai_case(tmp_path, case)
    before = (tmp_path / "g.fa.fai").read_bytes()
    with Fasta(fa) as f:
        assert f.chrom_sizes == {n: len(s) for n, s in now.items()}
        for n, s in now.items():
            assert f.fetch(n) == s
    assert (tmp_path / "g.fa.fai").read_bytes() == before
    assert len(os.listdir(tmp_path / "cache" / "fai")) == 1


def test_result_fai_that_fits_is_used_in_place(tmp_path, monkeypatch):
    """An index that fits is read where it is; nothing goes to the cache."""
    from semiseg.genome import Fasta
    from semiseg.genome.sequence import fai_matches

    monkeypatch.setenv("SEMISEG_CACHE", str(tmp_path / "cache"))
    fa = write_fasta(tmp_path / "g.fa", {"a": "ACGT" * 100, "b": "GG" * 7})
    Fasta(fa).close()
    assert fai_matches(str(fa), str(fa) + ".fai")
    with Fasta(fa) as f:
        assert f.fetch("b") == "GG" * 7
    assert not (tmp_path / "cache").exists() or not os.listdir(tmp_path / "cache" / "fai")


def test_result_read_only_folder_gets_no_index(tmp_path, monkeypatch):
    """A FASTA in a folder that cannot be written: indexed in the cache, nothing new
    beside it (was: an error asking to run samtools elsewhere)."""
    from semiseg.genome import Fasta

    ro = tmp_path / "ro"
    ro.mkdir()
    fa = write_fasta(ro / "g.fa", {"a": "ACGT" * 30})
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if os.path.abspath(p) ==
                        str(ro) else real(p, mode))
    monkeypatch.setenv("SEMISEG_CACHE", str(tmp_path / "cache"))
    with Fasta(fa) as f:
        assert f.fetch("a") == "ACGT" * 30
    assert sorted(os.listdir(ro)) == ["g.fa"]


def test_result_no_cache_writable_uses_a_temporary_index(tmp_path, monkeypatch):
    """No writable cache either: a temporary index, removed when the FASTA closes."""
    from semiseg.genome import Fasta, sequence

    fa, now = _fai_case(tmp_path, "shrunk")
    monkeypatch.setattr(sequence, "index_cache", lambda: None)
    f = Fasta(fa)
    tmp = f._files[0]._tmpdir
    assert tmp and os.path.isdir(tmp)
    assert f.fetch("b") == now["b"]
    f.close()
    assert not os.path.exists(tmp)


# ===================================================================== annotate args
def test_error_regions_outside(tmp_path, monkeypatch, capsys, small_fa):
    (tmp_path / "r.bed").write_text("c1\t0\t99999\n")
    clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,
                    "--regions", tmp_path / "r.bed", "-o", tmp_path / "a", "-q"),
                "r.bed:1", "outside c1")


def test_error_sequence_too_long_for_memory(tmp_path, monkeypatch, capsys, small_fa):
    """A sequence whose exact decode cannot fit the machine's free memory (made small
    here) has its arrays put in files (annotate/spill.py), with a line saying so; one
    that cannot fit even one posterior window in memory, or its files on the disk, is an
    error before any work, naming the longest piece and the memory, instead of an
    out-of-memory kill minutes later; nothing is written. The bound by hand for the
    yeast model on a CPU: 37 internal labels x (4 + 1 + 4) bytes + (17 channels + 4
    bases) x 4 = 417 bytes a base, and its posterior window's 53 x 37 = 1,961; 3,000
    bases: 7,134,000 bytes, of which the window's 5,883,000; files 3,000 x (417 + 64)."""
    from semiseg.annotate import memory

    monkeypatch.setattr(memory, "free_bytes", lambda: 5_882_999)  # a window a byte short
    line = clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,
                           "-o", tmp_path / "a", "-q", "--device", "cpu"),
                       "c1:1-3,000 (3,000 bp)", "one posterior window", "--max-decode-steps")
    assert "0.0 GB free" in line
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(memory, "free_bytes", lambda: 5_883_000)  # the window fits:
    monkeypatch.setattr(memory, "free_space", lambda _: 3000 * 481 * 3 // 2 - 1)
    clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,  # but
                    "-o", tmp_path / "a", "-q", "--device", "cpu"),  # not the files
                "c1:1-3,000 (3,000 bp)", "of disk in", "SEMISEG_SPILL_DIR")
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(memory, "free_space", lambda _: 3000 * 481 * 3 // 2)
    code, _, err = run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,
                       "-o", tmp_path / "b", "--device", "cpu")
    assert code == 0, err
    assert "c1:1-3,000 (3,000 bp) needs at least" in err and "go to files in" in err
    monkeypatch.setattr(memory, "free_bytes", lambda: 7_134_000 * 3 // 2)  # no line
    code, _, err = run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,
                       "-o", tmp_path / "c", "--device", "cpu")
    assert code == 0 and "needs at least" not in err, err
    assert (tmp_path / "b.bed").read_text() == (tmp_path / "c.bed").read_text()


@pytest.mark.parametrize("case", ["reversed", "unknown-chrom", "not-numbers", "missing",
                                  "empty"])
def test_error_regions_file(tmp_path, monkeypatch, capsys, small_fa, case):
    r = tmp_path / "r.bed"
    text = {"reversed": "c1\t500\t100\n", "unknown-chrom": "chrZ\t0\t10\n",
            "not-numbers": "c1\tten\t20\n", "empty": "", "missing": None}[case]
    if text is not None:
        r.write_text(text)
    clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,
                    "--regions", r, "-o", tmp_path / "a", "-q"), "r.bed")
    assert not list(tmp_path.glob("a.*"))


def test_error_output_would_replace_an_input(tmp_path, monkeypatch, capsys, small_fa):
    """--regions out/a.bed with --out out/a: PREFIX.bed would be the regions file (a user
    lost theirs so); refused before any work, the file unchanged. An input named like
    the prefix but no output of it (a.fa) is fine."""
    r = tmp_path / "a.bed"
    r.write_text("c1\t0\t900\n")
    clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa,
                    "--regions", r, "-o", tmp_path / "a", "-q"), "--regions", "a.bed",
                "another output prefix")
    assert r.read_text() == "c1\t0\t900\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bed"]
    fa = tmp_path / "b.fa"
    shutil.copy(small_fa, fa)
    (tmp_path / "b.fa.fai").unlink(missing_ok=True)
    code, _, err = run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", fa,
                       "--regions", r, "-o", tmp_path / "b", "-q")
    assert code == 0, err
    assert (tmp_path / "b.bed").is_file() and fa.read_bytes() == Path(small_fa).read_bytes()


@pytest.mark.parametrize("case", ["unknown-chrom", "track-not-trained", "prefix-folder",
                                  "prefix-under-file"])
def test_error_annotate_args(tmp_path, monkeypatch, capsys, small_fa, case):
    (tmp_path / "afile").write_text("keep")
    args = {"unknown-chrom": ["--chroms", "zz", "-o", tmp_path / "a"],
            "track-not-trained": ["--track", f"x={tmp_path / 'no.bw'}", "-o", tmp_path / "a"],
            "prefix-folder": ["-o", f"{tmp_path}/"],
            "prefix-under-file": ["-o", tmp_path / "afile" / "a"]}[case]
    needle = {"unknown-chrom": "zz", "track-not-trained": "x", "prefix-folder": "prefix",
              "prefix-under-file": "afile"}[case]
    before = files(tmp_path)
    clear_error(run(monkeypatch, capsys, "annotate", "-m", SHIPPED, "-f", small_fa, *args,
                    "-q"), needle)
    assert files(tmp_path) == before


# ===================================================== names in the output formats
@pytest.mark.parametrize("name", HOSTILE)
def test_result_hostile_name_round_trip(hostile, scheme, name):
    """Each hostile name: the GFF3 (column 1 and the IDs percent-escaped) reads back
    through semiseg's GFF3 reader to the same per-base labels as the BED (which holds
    the name as it is), and through read_prediction to the name itself."""
    import semiseg
    from semiseg.genome import read_annotation

    prefix, _, sizes = hostile
    L = sizes[name]
    bed = [ln.rstrip("\n").split("\t") for ln in lines(f"{prefix}.bed")]
    mine = [(int(r[1]), int(r[2]), r[3]) for r in bed if r[0] == name]
    assert mine and mine[0][0] == 0 and mine[-1][1] == L
    ann = read_annotation(f"{prefix}.gff3", scheme, sizes)
    s, e, lab = ann.intervals(name)
    from_gff = painted([(a, b, scheme.names[k]) for a, b, k in
                        zip(s.tolist(), e.tolist(), lab.tolist()) if k >= 0], L)
    from_gff[from_gff == ""] = scheme.names[scheme.background]
    assert (painted(mine, L) == from_gff).all()
    from semiseg.genome.escapes import gff3_seqid

    gff_lines = [ln for ln in lines(f"{prefix}.gff3")
                 if not ln.startswith("#")]
    seqids = {ln.split("\t")[0] for ln in gff_lines}
    assert gff3_seqid(name) in seqids and name not in seqids  # every one needs escapes
    gr = semiseg.read_prediction(f"{prefix}.gff3")
    df = gr.df[gr.df.Chromosome.astype(str) == name]
    assert len(df) > 0 and df.End.max() <= L
    assert all(str(i).startswith(f"{name}:") for i in df.ID.dropna())


def test_result_hostile_names_valid_gff3_and_bed(hostile):
    """The GFF3 with every hostile name passes gt gff3validator; bedtools reads every
    BED row (none taken for a header)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import commands

    prefix = hostile[0]
    gt, bt = commands.need("gt", "bedtools", hint="apt-get install genometools bedtools")
    import subprocess

    ok = subprocess.run([gt, "gff3validator", f"{prefix}.gff3"], capture_output=True,
                        text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    merged = subprocess.run([bt, "merge", "-i", f"{prefix}.bed"], capture_output=True,
                            text=True, check=True).stdout
    assert {ln.split("\t")[0] for ln in merged.splitlines()} == set(HOSTILE)


@pytest.mark.parametrize("name", ["chr%2C,x&y", "a b\tc\nd", "\u00e9\u4e2d", ">lead",
                                  "%%%", "ok.name:1|2"])
def test_result_seqid_escape_round_trip(name):
    """gff3_seqid leaves only GFF3's seqid characters and percent escapes; unquote
    gives the name back (chr%2C,x&y used to read back as chr,,x&y)."""
    from urllib.parse import unquote

    from semiseg.genome.escapes import gff3_seqid

    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                  ".:^*$@!+_?-|%")
    esc = gff3_seqid(name)
    assert set(esc) <= allowed and unquote(esc) == name


@pytest.mark.parametrize("value", ["a;b", "k=v", "x&y", "1,2", "50%", "tab\there",
                                   "new\nline", "ctl\x01"])
def test_result_attribute_escape_round_trip(value):
    """GFF3 attribute values with ; = & , % tab newline or a control character: escaped
    on writing, read back whole (a comma-split value too)."""
    from semiseg.genome.escapes import _esc
    from semiseg.genome.gff import _parse_attrs

    text = f"ID={_esc(value)};Parent={_esc(value)},{_esc('p2')}"
    assert not any(c in _esc(value) for c in ";=&,\t\n\x01")
    got = _parse_attrs(text, gtf=False)
    assert got["ID"] == value
    assert got["\0parents"] == [value, "p2"]


# ================================================================ evaluate and plot
def _other_scheme_model(tmp_path: Path, shipped: dict) -> Path:
    from semiseg.checkpoint import save_checkpoint

    labels = json.loads(json.dumps(shipped["labels"]))
    labels["name"] = "renamed"
    ck = dict(shipped, labels=labels)
    ck.pop("content_hash", None)
    save_checkpoint(ck, tmp_path / "other.pt")
    return tmp_path / "other.pt"


@pytest.mark.parametrize("case", ["scheme-builtin", "model-other-scheme",
                                  "scheme-other-yaml"])
def test_error_evaluate_scheme_mismatch(tmp_path, monkeypatch, capsys, hostile, shipped,
                                        case):
    """A --scheme or --model other than the prediction's: refused (it scored 0.65 for
    0.96 without a word)."""
    prefix = hostile[0]
    extra = {"scheme-builtin": ["--scheme", "gene_structure"],
             "model-other-scheme": ["--model", _other_scheme_model(tmp_path, shipped)],
             "scheme-other-yaml": ["--scheme", ROOT / "semiseg" / "genome" / "schemes" /
                                   "gene_structure.yaml"]}[case]
    clear_error(run(monkeypatch, capsys, "evaluate", "-p", f"{prefix}.bed", "-t",
                    f"{prefix}.gff3", *extra, "-o", tmp_path / "r", "-q"),
                "label scheme", "f62d5cf69181")
    assert not list(tmp_path.glob("r.*"))


def test_result_evaluate_takes_the_scheme_from_the_prediction(tmp_path, monkeypatch, capsys,
                                                              hostile):
    """Without --model, the scheme recorded with the prediction: the same report as with
    the model that made it (the demo without --model scored 148,904 of 230,208 bp under
    another scheme)."""
    prefix = hostile[0]
    got = []
    for extra in ([], ["--model", SHIPPED]):
        code, _, err = run(monkeypatch, capsys, "evaluate", "-p", f"{prefix}.bed", "-t",
                             f"{prefix}.gff3", *extra, "-o", tmp_path / f"r{len(extra)}",
                             "-q")
        assert code == 0, err
        got.append(json.loads((tmp_path / f"r{len(extra)}.json").read_text()))
    for key in ("labels", "macro", "bp_evaluated", "confusion"):
        assert got[0][key] == got[1][key]
    assert got[0]["bp_evaluated"] == sum(hostile[2].values())


def test_error_evaluate_labels_outside_scheme(tmp_path, monkeypatch, capsys, hostile):
    """A bare BED (no header beside it) whose labels the default scheme does not have."""
    bed = tmp_path / "bare.bed"
    rows = [ln.split("\t") for ln in lines(f"{hostile[0]}.bed")]
    bed.write_text("".join("\t".join([r[0], r[1], r[2], "exonish"] + r[4:]) for r in rows),
                   encoding="utf-8")
    clear_error(run(monkeypatch, capsys, "evaluate", "-p", bed, "-t",
                    f"{hostile[0]}.gff3", "-q"), "exonish", "gene_structure")


def test_error_evaluate_unrecorded_custom_scheme(tmp_path, monkeypatch, capsys, hostile):
    """A prediction whose header names a scheme that is not built in, without its
    definition (files from before the definition was recorded): asks for --model."""
    d = tmp_path / "p"
    d.mkdir()
    for suffix in ("bed", "gff3"):
        text = Path(f"{hostile[0]}.{suffix}").read_text(encoding="utf-8")
        text = "".join(ln for ln in text.splitlines(True)
                       if not ln.startswith("# semiseg_scheme:"))
        (d / f"h.{suffix}").write_text(text, encoding="utf-8")
    clear_error(run(monkeypatch, capsys, "evaluate", "-p", d / "h.bed", "-t",
                    f"{hostile[0]}.gff3", "-q"), "'cds'", "--model")


@pytest.mark.parametrize("case", ["zero-scores", "mean-posterior-scores"])
def test_result_no_scores_no_calibration(tmp_path, monkeypatch, capsys, hostile, case):
    """BED scores that are not segment posteriors (all 0: a BED from elsewhere; the
    shipped gene model's mean label posteriors): 'no scores' instead of an ECE (0.815
    was reported for all-0 scores)."""
    if case == "zero-scores":
        pred = tmp_path / "zero.bed"
        rows = [ln.split("\t") for ln in lines(f"{hostile[0]}.bed")]
        pred.write_text("".join("\t".join(r[:4] + ["0"] + r[5:]) for r in rows),
                        encoding="utf-8")
    else:
        pred = Path(f"{hostile[0]}.bed")
    code, out, err = run(monkeypatch, capsys, "evaluate", "-p", pred, "-t",
                         f"{hostile[0]}.gff3", "-o", tmp_path / "r", "-q")
    assert code == 0, err
    assert "calibration: no scores" in out and "ECE" not in out
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["calibration"]["segments"] == 0 and rep["calibration"]["ece"] is None
    assert not (tmp_path / "r.calibration.tsv").exists()


def test_result_run_posterior_scores_are_calibrated(tmp_path, monkeypatch, capsys):
    """BED scores that are run posteriors (recorded so in the GFF3 header) keep their
    calibration table: rows scored 250 and 750, the truth the prediction itself (every
    row exactly right), so the observed fraction is 1 in both bins (hand-computed)."""
    p = fake_part(tmp_path / "p", {"c1": 2000}, run_scores=True)
    code, _, err = run(monkeypatch, capsys, "evaluate", "-p", f"{p}.bed", "-t",
                       f"{p}.bed", "-o", tmp_path / "r", "-q")
    assert code == 0, err
    cal = json.loads((tmp_path / "r.json").read_text())["calibration"]
    bins = {round(b["bin_lo"], 1): b for b in cal["bins"] if b["segments"]}
    assert set(bins) == {0.2, 0.7} and all(b["observed"] == 1.0 for b in bins.values())
    n1, n2 = bins[0.2]["segments"], bins[0.7]["segments"]
    assert cal["ece"] == pytest.approx((0.75 * n1 + 0.25 * n2) / (n1 + n2))


TRUTHS = {
    "start-after-end": ("c1\tx\tCDS\t500\t100\t.\t+\t0\tID=a\n", "truth.gff3:1"),
    "beyond-chrom": ("c1\tx\tCDS\t100\t99999\t.\t+\t0\tID=a\n", "truth.gff3:1"),
    "not-a-number": ("c1\tx\tCDS\tten\t200\t.\t+\t0\tID=a\n", "truth.gff3:1"),
    "eight-columns": ("c1\tx\tCDS\t100\t200\t.\t+\t0\n", "9 tab-separated"),
    "bad-strand": ("c1\tx\tCDS\t100\t200\t.\t*\t0\tID=a\n", "strand"),
    "attr-not-kv": ("c1\tx\tCDS\t100\t200\t.\t+\t0\tIDa\n", "key=value"),
    "dangling-parent": ("c1\tx\tCDS\t100\t200\t.\t+\t0\tParent=nowhere\n", "nowhere"),
    "zero-start": ("c1\tx\tCDS\t0\t200\t.\t+\t0\tID=a\n", "truth.gff3:1"),
    "empty": ("", "truth.gff3"),
    "other-chroms": ("chrZ\tx\tCDS\t1\t200\t.\t+\t0\tID=a\n", "chrZ"),
}


@pytest.mark.parametrize("case", list(TRUTHS))
def test_error_evaluate_bad_truth(tmp_path, monkeypatch, capsys, case):
    """A truth GFF3 with a bad line: one line naming file and line, no report."""
    p = fake_part(tmp_path / "p", {"c1": 2000})
    text, needle = TRUTHS[case]
    (tmp_path / "truth.gff3").write_text(text)
    clear_error(run(monkeypatch, capsys, "evaluate", "-p", f"{p}.bed", "-t",
                    tmp_path / "truth.gff3", "-o", tmp_path / "r", "-q"), needle)
    assert not list(tmp_path.glob("r.*"))


@pytest.mark.parametrize("case", ["truth-missing", "pred-folder", "pred-empty",
                                  "pred-three-columns", "report-under-file"])
def test_error_evaluate_paths(tmp_path, monkeypatch, capsys, case):
    p = fake_part(tmp_path / "p", {"c1": 2000})
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "e.bed").write_text("")
    (tmp_path / "three.bed").write_text("c1\t0\t100\n")
    pred, truth, out = {
        "truth-missing": (f"{p}.bed", tmp_path / "no.gff3", tmp_path / "r"),
        "pred-folder": (tmp_path, f"{p}.gff3", tmp_path / "r"),
        "pred-empty": (tmp_path / "e.bed", f"{p}.gff3", tmp_path / "r"),
        "pred-three-columns": (tmp_path / "three.bed", f"{p}.gff3", tmp_path / "r"),
        "report-under-file": (f"{p}.bed", f"{p}.gff3", tmp_path / "afile" / "r")}[case]
    clear_error(run(monkeypatch, capsys, "evaluate", "-p", pred, "-t", truth, "-o", out,
                    "-q"))
    assert (tmp_path / "afile").read_text() == "keep" and not list(tmp_path.glob("r.*"))


PLOTS = {
    "exe-extension": (["-r", "c1:0-1000", "-o", "{t}/x.exe"], "x.exe"),
    "out-folder": (["-r", "c1:0-1000", "-o", "{t}/d.png"], "folder"),
    "out-under-file": (["-r", "c1:0-1000", "-o", "{t}/afile/x.png"], "afile"),
    "region-beyond": (["-r", "c1:5000-6000", "-o", "{t}/x.png"], "beyond the end"),
    "region-reversed": (["-r", "c1:900-100", "-o", "{t}/x.png"], "end must be after"),
    "region-malformed": (["-r", "c1-100", "-o", "{t}/x.png"], "chrom:start-end"),
    "region-unknown-chrom": (["-r", "chrZ:0-100", "-o", "{t}/x.png"], "chrZ"),
    "scheme-mismatch": (["-r", "c1:0-1000", "-o", "{t}/x.png", "--scheme",
                         "{t}/s.yaml"], "label scheme"),
    "no-posteriors": (["-r", "c1:0-1000", "-o", "{t}/x.png", "--posteriors", "{t}/no"],
                      "--posteriors"),
}


@pytest.mark.parametrize("case", list(PLOTS))
def test_error_plot(tmp_path, monkeypatch, capsys, case):
    """plot's bad arguments: one line, no image (x.exe was a traceback after drawing; a
    region beyond the chromosome drew an empty plot)."""
    p = fake_part(tmp_path / "p", {"c1": 2000})
    (tmp_path / "afile").write_text("keep")
    (tmp_path / "d.png").mkdir()
    src = (ROOT / "semiseg" / "genome" / "schemes" / "gene_structure.yaml").read_text()
    (tmp_path / "s.yaml").write_text(src.replace("name: gene_structure", "name: other", 1))
    args, needle = PLOTS[case]
    clear_error(run(monkeypatch, capsys, "plot", "-p", f"{p}.bed",
                    *[a.format(t=tmp_path) for a in args], "-q"), needle)
    assert not [f for f in tmp_path.iterdir() if f.suffix in (".png", ".exe") and
                f.is_file()]


def test_result_plot_takes_the_scheme_from_the_prediction(tmp_path, monkeypatch, capsys,
                                                          hostile):
    """plot without --model draws a prediction of a custom scheme (the recorded one)."""
    code, _, err = run(monkeypatch, capsys, "plot", "-p", f"{hostile[0]}.bed", "-r",
                       "pct%41:0-5000", "-o", tmp_path / "x.png", "-t",
                       f"{hostile[0]}.gff3", "-q")
    assert code == 0, err
    assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ============================================================================== merge
MERGES = {
    "other-model": ({"model_hash": "bbbbbbbbbbbb"}, "model"),
    "other-resolution": ({"resolution": 2}, "resolution"),
    "other-scheme": ({"scheme_name": "other"}, "label scheme"),
}


@pytest.mark.parametrize("case", list(MERGES))
def test_error_merge_mixed_runs(tmp_path, monkeypatch, capsys, case):
    """Parts of different models, schemes or resolutions: refused, naming both parts
    (merge joined them and named only the first model)."""
    a = fake_part(tmp_path / "a", {"c1": 2000})
    kw, needle = MERGES[case]
    b = fake_part(tmp_path / "b", {"c2": 2000}, **kw)
    before = files(tmp_path)
    clear_error(run(monkeypatch, capsys, "merge", a, b, "-o", tmp_path / "m", "-q"),
                needle, str(a), str(b))
    assert files(tmp_path) == before


@pytest.mark.parametrize("case", ["same-chrom", "same-part-twice", "part-missing-gff3",
                                  "out-under-file"])
def test_error_merge_parts(tmp_path, monkeypatch, capsys, case):
    """Overlapping parts (a chromosome in two: was a traceback), a part given twice, an
    incomplete part, an output prefix under a file."""
    a = fake_part(tmp_path / "a", {"c1": 2000})
    b = fake_part(tmp_path / "b", {"c1": 2000, "c2": 1500} if case == "same-chrom"
                  else {"c2": 1500})
    if case == "part-missing-gff3":
        os.remove(f"{b}.gff3")
    (tmp_path / "afile").write_text("keep")
    parts = [a, a] if case == "same-part-twice" else [a, b]
    out = tmp_path / ("afile/m" if case == "out-under-file" else "m")
    before = files(tmp_path)
    clear_error(run(monkeypatch, capsys, "merge", *parts, "-o", out, "-q"))
    assert files(tmp_path) == before


def test_result_merge_joins_disjoint_parts(tmp_path, monkeypatch, capsys):
    """Parts of one run on disjoint chromosomes: the merged BED is the parts' BEDs one
    after the other, and the merged GFF3 keeps the one origin."""
    from semiseg.genome.origin import prediction_origin

    a = fake_part(tmp_path / "a", {"c1": 2000})
    b = fake_part(tmp_path / "b", {"c2": 1500, "c3": 900})
    code, _, err = run(monkeypatch, capsys, "merge", a, b, "-o", tmp_path / "m", "-q")
    assert code == 0, err
    assert (tmp_path / "m.bed").read_text() == \
        (tmp_path / "a.bed").read_text() + (tmp_path / "b.bed").read_text()
    o = prediction_origin(str(tmp_path / "m.bed"))
    assert (o.model, o.scheme_name, o.resolution) == ("aaaaaaaaaaaa", "gene_structure", 1)


# ======================================================== option values of each command
OPTIONS = {
    "rc-maybe": (["annotate", "--reverse-complement", "maybe"], "--reverse-complement"),
    "intron-penalty-nan": (["annotate", "--intron-penalty", "nan"], "--intron-penalty"),
    "branch-penalty-negative": (["annotate", "--branch-penalty", "-1"], "--branch-penalty"),
    "donor-motif-not-iupac": (["annotate", "--donor-motif", "XYZ"], "--donor-motif"),
    "signal-precision-negative": (["annotate", "--signal-precision", "-1"],
                                  "--signal-precision"),
    "genetic-code-unknown": (["annotate", "--genetic-code", "99"], "--genetic-code"),
    "window-negative": (["annotate", "--window", "-5"], "--window"),
    "context-too-wide": (["annotate", "--context", "999999"], "--context"),
    "ensemble-of-one": (["ensemble", "{m}", "-o", "{t}/e.pt"], "at least two"),
    "ensemble-missing-member": (["ensemble", "{m}", "{t}/no.pt", "-o", "{t}/e.pt"],
                                "no.pt"),
    "shard-size-negative": (["shard", "-f", "{fa}", "-o", "{t}/sh", "--shard-size", "-5"],
                            "--shard-size"),
    "shard-size-fraction": (["shard", "-f", "{fa}", "-o", "{t}/sh", "--shard-size", "1.5"],
                            "--shard-size"),
    "shard-chrom-unknown": (["shard", "-f", "{fa}", "-o", "{t}/sh", "--chroms", "zz"], "zz"),
    "shard-bed-name": (["shard", "-f", "{t}/hash.fa", "-o", "{t}/sh"], "'#c' (record 2"),
    "demo-data-missing": (["demo", "{t}/d", "--data", "{t}/nowhere"], "nowhere"),
    "evaluate-regions-bad": (["evaluate", "-p", "{p}.bed", "-t", "{p}.gff3", "--regions",
                              "{t}/reg.bed"], "reg.bed:1"),
    "evaluate-fasta-other": (["evaluate", "-p", "{p}.bed", "-t", "{p}.gff3", "--fasta",
                              "{fa}"], "FASTA"),
}


@pytest.mark.parametrize("case", list(OPTIONS))
def test_error_option_value(tmp_path, monkeypatch, capsys, small_fa, case):
    """A bad option value of annotate, ensemble, shard, demo or evaluate: one line naming
    the option (or file), nothing written in the run's folder."""
    args, needle = OPTIONS[case]
    p = fake_part(tmp_path / "p", {"c9": 2000})
    (tmp_path / "reg.bed").write_text("c9\tten\t20\n")
    (tmp_path / "hash.fa").write_text(">ok\nACGT\n>#c\nACGT\n")
    sub = {"m": SHIPPED, "t": tmp_path, "fa": small_fa, "p": p}
    args = [a.format(**sub) for a in args]
    if args[0] == "annotate":
        args += ["-m", SHIPPED, "-f", small_fa, "-o", tmp_path / "a"]
    before = files(tmp_path)
    clear_error(run(monkeypatch, capsys, *args, "-q"), needle)
    after = files(tmp_path)  # a FASTA index built beside an input is no output
    assert {k: v for k, v in after.items() if not k.endswith(".fai")} == before


USAGE = {
    "missing-option": (["annotate", "-f", "{fa}", "-o", "{t}/a"], "--model"),
    "unknown-command": (["annotat"], "annotat"),
    "unknown-option": (["evaluate", "-p", "x.bed", "-t", "y.gff3", "--bogus"], "--bogus"),
    "window-zero": (["annotate", "-m", "{m}", "-f", "{fa}", "-o", "{t}/a", "--window", "0"],
                    "--window"),
    "decode-steps-zero": (["annotate", "-m", "{m}", "-f", "{fa}", "-o", "{t}/a",
                           "--max-decode-steps", "0"], "--max-decode-steps"),
    "tolerance-negative": (["evaluate", "-p", "x.bed", "-t", "y.gff3", "--tolerance", "-1"],
                           "--tolerance"),
}


@pytest.mark.parametrize("case", list(USAGE))
def test_error_usage(tmp_path, monkeypatch, capsys, small_fa, case):
    """Usage errors (click's) are one line too, naming the option (they were three:
    Usage, Try, Error); --window 0 silently meant the model's default before."""
    args, needle = USAGE[case]
    args = [a.format(m=SHIPPED, fa=small_fa, t=tmp_path) for a in args]
    line = clear_error(run(monkeypatch, capsys, *args), needle)
    assert "--help" in line
    assert not list(tmp_path.glob("a.*"))


def test_result_gff3_of_another_run_beside_the_bed_is_ignored(tmp_path):
    """A PREFIX.gff3 beside PREFIX.bed that holds other sequences (left from another
    run) does not give the BED its origin; the BED's own run's GFF3 does."""
    from semiseg.genome.origin import prediction_origin

    a = fake_part(tmp_path / "a", {"c1": 2000})
    b = fake_part(tmp_path / "b", {"c2": 2000}, model_hash="bbbbbbbbbbbb")
    shutil.copy(f"{a}.bed", tmp_path / "x.bed")
    shutil.copy(f"{b}.gff3", tmp_path / "x.gff3")
    assert prediction_origin(str(tmp_path / "x.bed")) is None
    assert prediction_origin(f"{a}.bed").model == "aaaaaaaaaaaa"


@pytest.mark.parametrize("case", ["shrunk", "appended"])
def test_result_stale_bgzip_index(tmp_path, monkeypatch, case):
    """A bgzip FASTA rewritten after its .fai/.gzi were made (the index older): read as
    it is now, the user's index files left as they were (a fresh pair in the cache)."""
    import pysam

    from semiseg.genome import Fasta

    monkeypatch.setenv("SEMISEG_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(5)
    a = "".join(rng.choice(list("ACGT"), 900))
    b = "".join(rng.choice(list("ACGT"), 600))
    gz = tmp_path / "g.fa.gz"

    def make(records):
        write_fasta(tmp_path / "g.fa", records)
        pysam.tabix_compress(str(tmp_path / "g.fa"), str(gz), force=True)

    make({"a": a, "b": b})
    Fasta(gz).close()
    old = {s: (tmp_path / f"g.fa.gz.{s}").read_bytes() for s in ("fai", "gzi")}
    now = {"a": a, "b": b[:200]} if case == "shrunk" else {"a": a, "b": b, "c": "ACGT" * 9}
    make(now)
    for s in ("fai", "gzi"):
        os.utime(tmp_path / f"g.fa.gz.{s}", (1, 1))  # older than the FASTA
    with Fasta(gz) as f:
        assert f.chrom_sizes == {n: len(s) for n, s in now.items()}
        assert all(f.fetch(n) == s for n, s in now.items())
    assert {s: (tmp_path / f"g.fa.gz.{s}").read_bytes() for s in ("fai", "gzi")} == old
