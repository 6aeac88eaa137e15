"""End to end on a slice of the yeast data: train -> annotate -> evaluate, the outputs'
validity, resume, windowed vs whole-chromosome decoding, batching of short contigs (the
Snakemake pipeline's runs are in tests/test_pipeline.py).

A tiny model (2 epochs, a few seconds) keeps this module around a minute on 2 slow
cores; the resume and interrupt cases train it on a third of the data (SMALL_BP).
The missing-track error (exit code 2, one line), the Ctrl-C case (exit 130) and evaluate
run `semiseg` in a fresh process, as a user does; the runs whose outputs are what is
checked call the same entry point (main(), argument parsing included) in this process,
which saves a start of torch per run (tests/test_pipeline.py and
tests/test_faults_runtime.py run annotate in real processes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "yeast"
TRAIN_BP = 120_000  # chrII[0:120 kb] for training
SMALL_BP = 40_000  # chrII[0:40 kb] for the resume cases
TEST_BP = 45_000  # chrI[0:45 kb] for annotation

pytest.importorskip("pyBigWig")


def _fasta_slice(src: Path, name: str, length: int) -> str:
    seq = "".join(line.strip() for line in open(src) if not line.startswith(">"))[:length]
    return f">{name}\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)) + "\n"


def _gff_slice(dst: Path, limits: dict[str, int]) -> None:
    with open(DATA / "yeast_chrI_chrII.gff3") as src, open(dst, "w") as out:
        for line in src:
            if line.startswith("#"):
                out.write(line)
                continue
            f = line.split("\t")
            if len(f) == 9 and f[0] in limits and int(f[4]) <= limits[f[0]]:
                out.write(line)


def run_cli(*args, check=True):
    """`semiseg ARGS` in a fresh process (as a user runs it)."""
    proc = subprocess.run([sys.executable, "-m", "semiseg.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"semiseg {' '.join(map(str, args))} failed "
                             f"({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def run_here(*args):
    """`semiseg ARGS` in this process (main(), as the console script calls it); fails
    unless it exits 0. For the runs whose outputs are compared, not the process."""
    from test_shipped_models import cli

    proc = cli(*args)
    if proc.returncode != 0:
        raise AssertionError(f"semiseg {' '.join(map(str, args))} failed "
                             f"({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


DEMO_LABELS = ["intergenic", "CDS+", "CDS-", "intron+", "intron-"]  # configs/demo.yaml

@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    (d / "train.fa").write_text(_fasta_slice(DATA / "chrII.fa", "chrII", TRAIN_BP))
    # the test genome: a chrI slice plus three short contigs (batched together)
    chrI = _fasta_slice(DATA / "chrI.fa", "chrI", TEST_BP)
    seq = "".join(chrI.splitlines()[1:])
    contigs = "".join(f">ctg{i}\n{seq[5000 * i + 1234: 5000 * i + 1234 + n]}\n"
                      for i, n in enumerate((3000, 1777, 2501)))
    (d / "test.fa").write_text(chrI + contigs)
    _gff_slice(d / "truth.gff3", {"chrI": TEST_BP, "chrII": TRAIN_BP})
    cfg = yaml.safe_load(open(ROOT / "configs" / "demo.yaml"))
    cfg["inputs"]["fasta"] = "train.fa"
    cfg["labels"]["annotation"] = "truth.gff3"
    cfg["windows"].update({"chroms": None, "size": 4000, "valid_fraction": 0.2})
    cfg["model"].update({"channels": 16, "layers": 2, "max_dilation": 2})
    cfg["crf"]["max_duration"] = 32
    cfg["train"].update({"epochs": 2, "batch_size": 8, "patience": 0})
    cfg["annotate"].update({"window": 20000, "context": 2000})
    (d / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    # the same model on chrII[0:40 kb], for the cases about resuming (whose outcome does
    # not depend on how much data an epoch reads)
    (d / "small.fa").write_text(_fasta_slice(DATA / "chrII.fa", "chrII", SMALL_BP))
    _gff_slice(d / "small.gff3", {"chrII": SMALL_BP})
    cfg["inputs"]["fasta"] = "small.fa"
    cfg["labels"]["annotation"] = "small.gff3"
    (d / "small.yaml").write_text(yaml.safe_dump(cfg))
    return d


@pytest.fixture(scope="module")
def trained(work):
    run_here("train", "--config", work / "tiny.yaml", "--out", work / "run", "--quiet")
    return work / "run"


@pytest.fixture(scope="module")
def annotated(work, trained):
    run_here("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
             "--out", work / "ann" / "a", "--quiet")
    return work / "ann" / "a"


def _read_bed(path):
    rows = []
    for line in open(path):
        if line.startswith(("#", "track", "browser")):
            continue
        f = line.rstrip("\n").split("\t")
        rows.append(f)
    return rows


def test_train_outputs(trained):
    for name in ("best.pt", "last.pt", "config.yaml", "metrics.tsv"):
        assert (trained / name).is_file()
    ckpt = torch.load(trained / "best.pt", map_location="cpu", weights_only=True)
    assert ckpt["labels"]["labels"][1]["name"] == "CDS+"
    assert isinstance(ckpt["model"]["emit.weight"], torch.Tensor)
    rows = (trained / "metrics.tsv").read_text().splitlines()
    head = rows[0].split("\t")
    assert head[:5] == ["epoch", "lr", "train_loss", "val_loss", "val_f1"]
    assert len(rows) == 3  # header + 2 epochs
    for row in rows[1:]:
        vals = dict(zip(head, row.split("\t")))
        for key in ("val_f1", "val_segment_f1", "val_boundary_f1", "val_f1_CDS+"):
            assert 0 <= float(vals[key]) <= 1, (key, vals[key])
    assert not list(trained.glob("*.tmp"))


def test_annotation_outputs_valid(work, annotated):
    import pyBigWig

    sizes = {"chrI": TEST_BP, "ctg0": 3000, "ctg1": 1777, "ctg2": 2501}
    names = DEMO_LABELS
    rows = _read_bed(f"{annotated}.bed")
    assert all(len(r) == 9 for r in rows)
    by_chrom = {}
    for r in rows:
        by_chrom.setdefault(r[0], []).append((int(r[1]), int(r[2]), r[3]))
    assert list(by_chrom) == list(sizes)  # FASTA order
    for chrom, segs in by_chrom.items():
        assert segs[0][0] == 0 and segs[-1][1] == sizes[chrom]  # covers the chromosome
        for (s0, e0, _), (s1, e1, _) in zip(segs, segs[1:]):
            assert s0 < e0 == s1 < e1  # sorted, contiguous, non-overlapping
        assert {n for _, _, n in segs} <= set(names)
    # GFF3 parses: 9 columns, 1-based closed coordinates inside the chromosome, parents exist
    ids = {}  # ID -> (type, Parent): GFF3 lets one feature span rows that share its ID
    lines = [ln for ln in open(f"{annotated}.gff3") if ln.strip()]
    assert lines[0].startswith("##gff-version 3")
    for ln in lines:
        if ln.startswith("#"):
            continue
        f = ln.rstrip("\n").split("\t")
        assert len(f) == 9
        assert 1 <= int(f[3]) <= int(f[4]) <= sizes[f[0]]
        attrs = dict(kv.split("=", 1) for kv in f[8].split(";") if kv)
        if "Parent" in attrs:
            assert attrs["Parent"] in ids
        if "ID" in attrs:  # a repeated ID: more rows of the same feature (CDS, codons)
            key = (f[2], attrs.get("Parent"))
            assert ids.setdefault(attrs["ID"], key) == key
            assert f[2] in ("CDS", "start_codon", "stop_codon") or ids[attrs["ID"]] is key
    # bigWigs: right chromosome lengths; label posteriors sum to 1 everywhere
    total = {c: np.zeros(n) for c, n in sizes.items()}
    for n in names:
        bw = pyBigWig.open(f"{annotated}.posterior.{n}.bw")
        assert bw.chroms() == sizes
        for c, L in sizes.items():
            v = np.asarray(bw.values(c, 0, L), dtype=float)
            assert np.isfinite(v).all() and (v >= -1e-6).all() and (v <= 1 + 1e-6).all()
            total[c] += v
        bw.close()
    for c in sizes:
        np.testing.assert_allclose(total[c], 1.0, atol=1e-3,
                                   err_msg=f"{c}: posteriors do not sum to 1")
    bw = pyBigWig.open(f"{annotated}.boundary.bw")
    assert bw.chroms() == sizes
    b = np.asarray(bw.values("chrI", 0, TEST_BP))
    assert b[0] == pytest.approx(1.0, abs=1e-4) and (b >= -1e-6).all() and (b <= 1 + 1e-6).all()
    bw.close()
    # entropy tracks: label entropy in [0, log C], boundary entropy in [0, log 2]
    for name, top in (("entropy", np.log(len(DEMO_LABELS))), ("boundary_entropy", np.log(2))):
        bw = pyBigWig.open(f"{annotated}.{name}.bw")
        assert bw.chroms() == sizes
        v = np.asarray(bw.values("chrI", 0, TEST_BP))
        assert np.isfinite(v).all() and (v >= 0).all() and (v <= top + 1e-5).all()
        bw.close()
    # BED score: round(1000 x run posterior), which never exceeds the smallest label
    # posterior of the row, or for a model without run posteriors (the reading-frame
    # model; the GFF3 header says which) round(1000 x the row's mean label posterior)
    kind = next(ln.split(": ", 1)[1].strip() for ln in lines
                if ln.startswith("# semiseg_scores: "))
    bws = {n: pyBigWig.open(f"{annotated}.posterior.{n}.bw") for n in names}
    for r in rows:
        v = np.asarray(bws[r[3]].values(r[0], int(r[1]), int(r[2])), dtype=float)
        if kind == "run_posterior":
            assert 0 <= int(r[4]) <= 1000 * v.min() + 1  # P(run exact) <= P(label anywhere)
        else:
            assert kind == "mean_label_posterior", kind
            assert abs(int(r[4]) - 1000 * v.mean()) <= 1.5  # bigWig values rounded to 1e-4
    for bw in bws.values():
        bw.close()
    gff = [ln.split("\t") for ln in lines if not ln.startswith("#")]
    scored = [f for f in gff if f[5] != "."]
    # scores are posteriors (docs/outputs.md): the reading-frame model's CDS rows carry
    # their mean label posterior, as the BED rows do (no run posteriors for this model)
    assert all(0 <= float(f[5]) <= 1 for f in scored)
    assert all(f[5] != "." for f in gff if f[2] == "CDS")
    # the summary adds up to the genome
    summ = [ln.split("\t") for ln in open(f"{annotated}.summary.tsv")
            if not ln.startswith("#")][1:]
    assert sum(int(r[2]) for r in summ) == sum(sizes.values())
    assert sum(int(r[1]) for r in summ) == len(rows)


def test_annotate_outputs_open_in_standard_tools(annotated):
    """pyranges, bedtools, gt gff3validator and pyBigWig on a real annotation."""
    from test_output_formats import check_outputs

    sizes = {"chrI": TEST_BP, "ctg0": 3000, "ctg1": 1777, "ctg2": 2501}
    check_outputs(str(annotated), sizes, DEMO_LABELS)


def test_evaluate_outputs(work, annotated):
    proc = run_cli("evaluate", "--pred", f"{annotated}.bed", "--truth", work / "truth.gff3",
                   "--scheme", work / "tiny.yaml", "--out", work / "ev", "--tolerance", "20")
    assert "CDS+" in proc.stdout and "macro" in proc.stdout
    res = json.loads((work / "ev.json").read_text())
    assert [r["label"] for r in res["labels"]] == DEMO_LABELS
    assert res["bp_evaluated"] == TEST_BP + 3000 + 1777 + 2501
    for r in res["labels"]:
        assert 0 <= r["f1"] <= 1
    assert (work / "ev.tsv").read_text().splitlines()[0].startswith("label\tbp_truth")


def test_whole_vs_windowed_decoding(work, trained, annotated):
    """Encoder windows with enough context give the same emissions as one pass, so the
    stitched annotation equals the whole-sequence one; windowed Viterbi (forced by a small
    --max-decode-steps) stays valid and agrees almost everywhere."""
    run_here("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
             "--chroms", "chrI", "--window", "6000", "--context", "1000",
             "--out", work / "ann" / "w", "--quiet")
    whole = [r[:4] for r in _read_bed(f"{annotated}.bed") if r[0] == "chrI"]
    assert [r[:4] for r in _read_bed(work / "ann" / "w.bed")] == whole
    proc = run_here("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
                    "--chroms", "chrI", "--max-decode-steps", "8000",  # 8 kb at 1 bp
                    "--out", work / "ann" / "d")
    assert "certified windows" in proc.stderr  # the gene model's default (annotate/seams.py)
    rows = _read_bed(work / "ann" / "d.bed")
    assert [r[:4] for r in rows] == whole  # certified seams: the whole-sequence answer
    assert int(rows[0][1]) == 0 and int(rows[-1][2]) == TEST_BP
    assert all(int(a[2]) == int(b[1]) for a, b in zip(rows, rows[1:]))

    def per_bp(rows):
        out = np.empty(TEST_BP, object)
        for r in rows:
            out[int(r[1]):int(r[2])] = r[3]
        return out

    agree = (per_bp(rows) == per_bp(whole)).mean()
    assert agree > 0.9


def test_annotate_samples(work, trained, annotated):
    """--samples N writes N exact posterior samples per sequence, each covering it, and
    the same seed gives the same file."""
    for name in ("s1", "s2"):
        run_here("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
                 "--chroms", "ctg1,ctg2", "--samples", "4", "--seed", "7",
                 "--out", work / "ann" / name, "--quiet")
    text = (work / "ann" / "s1.samples.bed").read_text()
    assert text == (work / "ann" / "s2.samples.bed").read_text()
    rows = _read_bed(work / "ann" / "s1.samples.bed")
    for chrom, L in (("ctg1", 1777), ("ctg2", 2501)):
        for i in range(4):
            segs = [(int(r[1]), int(r[2])) for r in rows
                    if r[0] == chrom and r[3].split(":", 1)[0] == f"sample{i}"]
            assert segs[0][0] == 0 and segs[-1][1] == L
            assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
    assert {r[3].split(":", 1)[1] for r in rows} <= set(DEMO_LABELS)


def test_short_contigs_batched_equal_single(work, trained, annotated):
    """Batched short contigs (variable lengths) give what each alone gives."""
    for c in ("ctg0", "ctg1", "ctg2"):
        run_here("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
                 "--chroms", c, "--out", work / "ann" / c, "--quiet")
        single = _read_bed(work / "ann" / f"{c}.bed")
        batched = [r for r in _read_bed(f"{annotated}.bed") if r[0] == c]
        assert [r[:4] for r in single] == [r[:4] for r in batched]
        assert [int(r[4]) for r in single] == pytest.approx([int(r[4]) for r in batched],
                                                            abs=1)


@pytest.mark.parametrize("average", [0, 0.5])
def test_resume_equals_uninterrupted(work, average):
    """On CPU, stopping after epoch 1 and resuming gives bitwise the same model (9
    training windows in batches of 4: three steps an epoch, the last one short), with
    weight averaging (train.average_epochs) as without: both the average and the
    optimiser's own weights."""
    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.loop import train

    ui.set_quiet(True)
    cfg = load_config(work / "small.yaml", ["train.epochs=2", "windows.valid_fraction=0.1",
                                           "train.batch_size=4",
                                           f"train.average_epochs={average}"])
    torch.set_num_threads(1)
    full, part = work / f"full{average}", work / f"part{average}"
    train(cfg, full)
    train(cfg, part, stop_after=1)
    first = torch.load(part / "last.pt", weights_only=True)
    assert first["epoch"] == 1
    train(cfg, part, resume=True)
    a = torch.load(full / "last.pt", weights_only=True)
    b = torch.load(part / "last.pt", weights_only=True)
    assert b["epoch"] == 2
    keys = ["model", "trained_model"] if average else ["model"]
    assert ("trained_model" in a) == bool(average)
    for key in keys:
        for k in a[key]:
            assert torch.equal(a[key][k], b[key][k]), (key, k)
    if average:  # the average is not the last step's weights
        assert any(not torch.equal(a["model"][k], a["trained_model"][k])
                   for k in a["model"] if a["model"][k].is_floating_point())
    assert a["history"][-1]["train_loss"] == b["history"][-1]["train_loss"]
    assert (full / "metrics.tsv").read_text().split("\n")[0] == \
        (part / "metrics.tsv").read_text().split("\n")[0]


def test_annotate_with_tracks_the_model_lacks(work, trained):
    proc = run_cli("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
                   "--track", f"dnase={work / 'test.fa'}", "--out", work / "bad" / "x",
                   check=False)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "trained with tracks [none]" in lines[0] and "dnase" in lines[0]
    assert not (work / "bad").exists() or not list((work / "bad").iterdir())


def test_interrupted_training_resumes(work):
    """Ctrl-C during training: one line, exit 130, no partial files; --resume finishes."""
    import signal
    import time

    out = work / "intr"
    proc = subprocess.Popen([sys.executable, "-m", "semiseg.cli", "train", "--config",
                             str(work / "small.yaml"), "--out", str(out), "--epochs", "4",
                             "--quiet"], stderr=subprocess.PIPE, text=True,
                            # a test run started in the background (`pytest &` in a script)
                            # inherits an ignored SIGINT, which Python then leaves ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not (out / "last.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    # the signal goes out as soon as epoch 1 is saved, with 3 epochs to go: exit code 0
    # here means the interrupt was ignored, which is a failure, not a reason to skip
    assert proc.returncode == 130, f"exit code {proc.returncode}: the interrupt had no effect"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "interrupted" in lines[0] and "--resume" in lines[0]
    assert not list(out.glob("*.tmp"))
    done = torch.load(out / "last.pt", weights_only=True)["epoch"]
    assert 1 <= done < 4
    run_here("train", "--config", work / "small.yaml", "--out", out, "--epochs", "4",
             "--resume", "--quiet")  # what the one line says to do
    assert torch.load(out / "last.pt", weights_only=True)["epoch"] == 4
    assert len((out / "metrics.tsv").read_text().splitlines()) == 5


def test_annotate_regions(work, trained):
    """--regions: only those regions are segmented (widened to the resolution); the rest
    of their chromosomes is `gap`; other chromosomes are not written."""
    (work / "regions.bed").write_text("chrI\t1005\t9000\nchrI\t20000\t30013\n")
    run_here("annotate", "--model", trained / "best.pt", "--fasta", work / "test.fa",
             "--regions", work / "regions.bed", "--out", work / "ann" / "r", "--quiet")
    rows = _read_bed(work / "ann" / "r.bed")
    assert {r[0] for r in rows} == {"chrI"}
    gaps = [(int(r[1]), int(r[2])) for r in rows if r[3] == "gap"]
    res = yaml.safe_load(open(work / "tiny.yaml"))["model"]["resolution"]
    lo, hi = 1005 // res * res, -(-30013 // res) * res  # widened to whole CRF steps
    assert gaps == [(0, lo), (9000, 20000), (hi, TEST_BP)]
    assert int(rows[0][1]) == 0 and int(rows[-1][2]) == TEST_BP
