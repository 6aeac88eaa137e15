"""The command line: bad input gives one clear line on stderr, exit code 2, no output files."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "semiseg.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("semiseg: error: ")
    for n in needles:
        assert n in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


def test_version_and_help():
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("semiseg ")
    proc = cli("--help")
    for cmd in ("train", "annotate", "evaluate", "demo", "merge", "plot"):
        assert cmd in proc.stdout


def test_train_bad_key(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("train:\n  epoks: 3\n")
    proc = cli("train", "--config", cfg, "--out", tmp_path / "run")
    one_line_error(proc, "unknown config key 'train.epoks'", "did you mean 'epochs'")
    assert not (tmp_path / "run").exists()


def test_train_missing_files_leave_nothing(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("inputs:\n  fasta: nowhere.fa\nlabels:\n  annotation: a.gff3\n")
    proc = cli("train", "--config", cfg, "--out", tmp_path / "run")
    one_line_error(proc, "file not found", "nowhere.fa")
    assert not (tmp_path / "run").exists()
    proc = cli("train", "--config", cfg, "--out", tmp_path / "run", "--set", "train.lr=oops")
    one_line_error(proc, "train.lr: expected a number")


def test_resume_without_a_run(tmp_path):
    proc = cli("train", "--config", ROOT / "configs" / "demo.yaml", "--out", tmp_path / "r",
               "--resume")
    one_line_error(proc, "--resume", "last.pt")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_cuda_asked_but_absent(tmp_path):
    proc = cli("train", "--config", ROOT / "configs" / "demo.yaml", "--out", tmp_path / "r",
               "--device", "cuda")
    one_line_error(proc, "cuda", "no CUDA device")
    assert not (tmp_path / "r").exists()


def test_annotate_bad_model_files(tmp_path):
    proc = cli("annotate", "--model", tmp_path / "none.pt", "--fasta",
               ROOT / "data" / "yeast" / "chrI.fa", "--out", tmp_path / "a")
    one_line_error(proc, "model checkpoint not found")

    class Evil:
        def __reduce__(self):
            return (print, ("this must never run",))

    for evil, save in ((tmp_path / "evil.pt", torch.save), (tmp_path / "evil.pkl", None)):
        payload = {"format": "semiseg.checkpoint/1", "x": Evil()}
        if save:  # a PyTorch zip whose pickle calls a function: refused by weights_only
            save(payload, evil)
        else:  # a bare pickle (not a zip): refused before it is read
            with open(evil, "wb") as fh:
                pickle.dump(payload, fh)
        proc = cli("annotate", "--model", evil, "--fasta",
                   ROOT / "data" / "yeast" / "chrI.fa", "--out", tmp_path / "a")
        one_line_error(proc, "not a readable semiseg checkpoint" if save
                       else "not a PyTorch checkpoint file")
        assert "this must never run" not in proc.stdout + proc.stderr
    proc = cli("annotate", "--model", ROOT / "data" / "yeast" / "chrI.fa", "--fasta",
               ROOT / "data" / "yeast" / "chrI.fa", "--out", tmp_path / "a")
    one_line_error(proc, "chrI.fa: not a semiseg checkpoint (not a PyTorch checkpoint file")
    torch.save({"something": torch.zeros(2)}, tmp_path / "other.pt")
    proc = cli("annotate", "--model", tmp_path / "other.pt", "--fasta",
               ROOT / "data" / "yeast" / "chrI.fa", "--out", tmp_path / "a")
    one_line_error(proc, "not a semiseg checkpoint")
    assert not list(tmp_path.glob("a.*"))


def test_annotate_bad_penalty_and_precision(tmp_path):
    model = ROOT / "semiseg" / "models" / "yeast_cds_frames.pt"
    fasta = ROOT / "data" / "yeast" / "chrI.fa"
    for flag, value in (("--signal-precision", "-0.5"), ("--signal-precision", "nan"),
                        ("--intron-penalty", "-1")):
        proc = cli("annotate", "--model", model, "--fasta", fasta, "--out", tmp_path / "a",
                   flag, value)
        one_line_error(proc, flag, "finite number >= 0")
    assert not list(tmp_path.glob("a.*"))


def test_evaluate_missing_truth(tmp_path):
    pred = tmp_path / "p.bed"
    pred.write_text("chrI\t0\t100\tCDS+\n")
    proc = cli("evaluate", "--pred", pred, "--truth", tmp_path / "t.bed")
    one_line_error(proc, "file not found")


def test_demo_without_data(tmp_path):
    proc = cli("demo", tmp_path / "out", "--data", tmp_path / "nothing", cwd=tmp_path)
    one_line_error(proc, "demo data not found")


def test_usage_error_exit_code(tmp_path):
    proc = cli("train", "--out", tmp_path / "x")  # --config missing
    assert proc.returncode == 2


def test_demo_with_the_shipped_model(tmp_path):
    """`semiseg demo` annotates chrI at 1 bp with the shipped gene model and scores it at
    the exact base: every output is written, and every predicted CDS run on a strand is
    a whole number of codons and every intron GT..AG (the reading-frame model cannot
    produce anything else) with a branch point (the demo's rule)."""
    import json

    out = tmp_path / "demo"
    proc = cli("demo", out, "--quiet", "--data", ROOT / "data" / "yeast", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("annotation.bed", "annotation.gff3", "evaluation.tsv", "example.png"):
        assert (out / name).is_file(), name
    res = json.loads((out / "evaluation.json").read_text())
    f1 = {r["label"]: r["f1"] for r in res["labels"]}
    assert min(f1["CDS+"], f1["CDS-"]) > 0.85  # measured 0.94-0.95 (benchmarks/RESULTS-log.md)
    fa = "".join((ROOT / "data" / "yeast" / "chrI.fa").read_text().splitlines()[1:]).upper()
    genes: dict[str, list[tuple[int, int, str]]] = {}
    for line in (out / "annotation.gff3").read_text().splitlines():
        f = line.split("\t")
        if len(f) == 9 and f[2] == "CDS":
            parent = dict(kv.split("=", 1) for kv in f[8].split(";"))["Parent"]
            genes.setdefault(parent, []).append((int(f[3]) - 1, int(f[4]), f[6]))
    assert genes
    comp = str.maketrans("ACGT", "TGCA")
    introns = 0
    for parts in genes.values():
        strand = parts[0][2]
        seq = "".join(fa[a:b] for a, b, _ in sorted(parts))
        if strand == "-":
            seq = seq.translate(comp)[::-1]
        assert len(seq) % 3 == 0 or sorted(parts)[0][0] == 0 or sorted(parts)[-1][1] == len(fa)
        # every intron is GT..AG read on the gene's strand (CT..AC left to right on -)
        blocks = sorted(parts)
        for (_, a1, _), (b0, _, _) in zip(blocks[:-1], blocks[1:]):
            intron = fa[a1:b0] if strand == "+" else fa[a1:b0].translate(comp)[::-1]
            assert intron[:2] == "GT" and intron[-2:] == "AG", (a1, b0, strand)
            # the demo's branch point rule: a 7-mer within one base of TACTAAC in the
            # 90 bases before the intron's end (annotate.branch_penalty: .inf)
            tail = intron[-90:]
            assert any(sum(x != y for x, y in zip(tail[i:i + 7], "TACTAAC")) <= 1
                       for i in range(len(tail) - 6)), (a1, b0, strand)
            introns += 1
    assert introns  # chrI's YAL003W and YAL001C introns are found


def test_evaluate_table_in_a_pipe_is_not_cut(tmp_path):
    """Printed to a pipe (a log file, a workflow), the evaluation table keeps whole label
    names and numbers: rich's 80-column default cut them to 'inter…' and '0.67…'."""
    truth, pred = tmp_path / "t.bed", tmp_path / "p.bed"
    truth.write_text("chrI\t0\t100\tintergenic\nchrI\t100\t400\tCDS+\nchrI\t400\t500\t"
                     "intergenic\nchrI\t500\t800\tCDS-\nchrI\t800\t1000\tintergenic\n")
    pred.write_text("chrI\t0\t103\tintergenic\nchrI\t103\t400\tCDS+\nchrI\t400\t500\t"
                    "intergenic\nchrI\t500\t800\tCDS-\nchrI\t800\t1000\tintergenic\n")
    proc = cli("evaluate", "--pred", pred, "--truth", truth, "--tolerance", "0",
               "--scheme", ROOT / "configs" / "demo.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout, proc.stdout
    rows = {ln.split("│")[1].strip(): ln for ln in proc.stdout.splitlines()
            if ln.count("│") > 3}
    assert "intergenic" in rows and "CDS+" in rows, proc.stdout
    # CDS- is right at every base: recall 1.0000 printed whole
    assert "1.0000" in rows["CDS-"], proc.stdout
