"""Chromatin users (issue 44): a genome given by chromosome sizes (no FASTA), a track
sheet, held-out regions, the shipped configs/chromatin.yaml on the bundled synthetic
example, inputs with no signal, summary.tsv against the rows written, and evaluate
scoring only where both sides have calls (hand-computed oracles)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semiseg.errors import SemisegError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "data" / "chromatin_example"
CONFIG = ROOT / "configs" / "chromatin.yaml"
SIZES = {"chrA": 400_000, "chrB": 200_000, "chrC": 200_000}

pytest.importorskip("pyBigWig")


def cli(*args, ok=True):
    proc = subprocess.run([sys.executable, "-m", "semiseg.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600, check=False)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture
def logged(monkeypatch):
    from semiseg import ui

    lines: list[str] = []
    monkeypatch.setattr(ui, "log", lines.append)
    return lines


# ----------------------------------------------------------------------------- track sheet
def test_track_sheet_reads_columns_by_header_or_position(tmp_path):
    from semiseg.genome.tracks import read_track_sheet

    (tmp_path / "sub").mkdir()
    for name in ("a.bw", "sub/b.bedgraph", "c.bam"):
        (tmp_path / name).write_text("x")
    sheet = tmp_path / "s.tsv"
    sheet.write_text("# marks\nname\tpath\tmapq\ttransform\n"
                     "A\ta.bw\t.\tlog1p\n\nB\tsub/b.bedgraph\n"
                     f"C\t{tmp_path / 'c.bam'}\t30\t\n")
    assert read_track_sheet(sheet) == {
        "A": {"path": str(tmp_path / "a.bw"), "transform": "log1p"},
        "B": str(tmp_path / "sub" / "b.bedgraph"),
        "C": {"path": str(tmp_path / "c.bam"), "mapq": 30}}
    plain = tmp_path / "plain.tsv"  # no header: name, path, transform, kind, ...
    plain.write_text("A\ta.bw\tarcsinh\n")
    assert read_track_sheet(plain) == {"A": {"path": str(tmp_path / "a.bw"),
                                             "transform": "arcsinh"}}


@pytest.mark.parametrize("text, message", [
    ("A\ta.bw\nA\ta.bw\n", ":2: track 'A' listed twice"),
    ("A\tmissing.bw\n", ":1: track 'A': file not found"),
    ("A a.bw\n", ":1: expected name, path"),
    ("name\tpath\tcolour\n", ":1: header columns"),
    ("A\ta.bw\tnone\tbam\tlots\n", ":1: mapq must be an integer"),
    ("# nothing\n", "no tracks"),
])
def test_track_sheet_errors_name_the_line(tmp_path, text, message):
    from semiseg.genome.tracks import read_track_sheet

    (tmp_path / "a.bw").write_text("x")
    (tmp_path / "s.tsv").write_text(text)
    with pytest.raises(SemisegError, match=message.replace("(", r"\(").replace("[", r"\[")):
        read_track_sheet(tmp_path / "s.tsv")


def test_config_track_sheet_joins_tracks(tmp_path):
    from semiseg.config.load import from_dict

    base = {"inputs": {"chrom_sizes": str(EXAMPLE / "chrom.sizes"), "sequence": False,
                       "track_sheet": str(EXAMPLE / "tracks.tsv")}}
    cfg = from_dict(base, tmp_path)
    assert list(cfg.inputs.tracks) == ["H3K4me3", "H3K27ac", "H3K36me3", "H3K27me3",
                                       "H3K4me1"]
    assert cfg.inputs.tracks["H3K4me1"] == {
        "path": str(EXAMPLE / "H3K4me1.bedgraph.gz"), "transform": "log1p"}
    assert cfg.inputs.track_sheet is None  # the resolved config lists the tracks
    twice = {"inputs": dict(base["inputs"], tracks={"H3K27ac": str(EXAMPLE / "H3K27ac.bw")})}
    with pytest.raises(SemisegError, match="H3K27ac in both inputs.tracks and"):
        from_dict(twice, tmp_path)


# ----------------------------------------------------------------------------- chrom sizes
@pytest.mark.parametrize("inputs, message", [
    ({"sequence": True}, "only for models that read no sequence"),
    ({"sequence": False, "softmask": True}, "only for models that read no sequence"),
    ({"sequence": False, "fasta": "g.fa"}, "give fasta or chrom_sizes, not both"),
])
def test_chrom_sizes_only_without_sequence(tmp_path, inputs, message):
    from semiseg.config.load import from_dict

    data = {"inputs": {"chrom_sizes": "s.sizes", "tracks": {"a": "a.bw"}, **inputs}}
    with pytest.raises(SemisegError, match=message):
        from_dict(data, tmp_path)


def test_chrom_sizes_genome_gives_the_fasta_genomes_track_features(tmp_path):
    """GenomeData on a .fai (sizes only) = GenomeData on the FASTA, track columns
    included; the sequence columns read as N; no N runs; fetch refuses."""
    from synth import write_fasta

    from semiseg.genome import Fasta, GenomeData, TrackSpec
    from semiseg.genome.windows import ChromSizes

    rng = np.random.default_rng(3)
    write_fasta(tmp_path / "g.fa", {c: "".join(rng.choice(list("ACGT"), n))
                                    for c, n in SIZES.items()})
    Fasta(tmp_path / "g.fa").close()  # writes g.fa.fai
    genome = ChromSizes(tmp_path / "g.fa.fai")
    assert genome.chrom_sizes == SIZES
    spec = [TrackSpec("K27ac", str(EXAMPLE / "H3K27ac.bw"), transform="log1p"),
            TrackSpec("K4me1", str(EXAMPLE / "H3K4me1.bedgraph.gz"))]
    with GenomeData(str(tmp_path / "g.fa"), spec, resolution=200) as a, \
            GenomeData(genome, spec, resolution=200) as b:
        a.fit_stats(["chrA"])
        b.fit_stats(["chrA"])
        xa, _ = a.load("chrB", 100_000, 150_000)
        xb, _ = b.load("chrB", 100_000, 150_000)
        assert np.array_equal(xa[:, 4:], xb[:, 4:])
        assert xb[:, 4:].std() > 0 and not xb[:, :4].any()
        assert np.allclose(xa[:, :4].sum(1), 1.0)  # the FASTA side reads bases
        assert b.fasta.n_runs("chrC").shape == (0, 2)
        with pytest.raises(SemisegError, match="chromosome sizes only"):
            b.fasta.fetch("chrA", 0, 10)
        # the checkpoint's genome record rebuilds it without a FASTA
        again = GenomeData.from_config(b.config())
        assert isinstance(again.fasta, ChromSizes) and again.chrom_sizes == SIZES


# ----------------------------------------------------------------------------- holdout
def _mask(regions, sizes):
    m = {c: np.zeros(n, bool) for c, n in sizes.items()}
    for c, s, e in regions:
        m[c][s:e] = True
    return m


def test_holdout_and_subtraction_against_masks(tmp_path):
    from semiseg.genome.windows import read_holdout, subtract_regions

    sizes = {"a": 1000, "b": 500}
    got = read_holdout(["a:100-200", "a:150-300", "b", "a:900-1,000"], sizes)
    assert got == [("a", 100, 300), ("a", 900, 1000), ("b", 0, 500)]
    bed = tmp_path / "h.bed"
    bed.write_text("track name=x\nb\t10\t20\tfoo\na\t0\t5\n")
    assert read_holdout(str(bed), sizes) == [("a", 0, 5), ("b", 10, 20)]
    rng = np.random.default_rng(0)
    for _ in range(200):
        regions = [(c, int(s), int(s + rng.integers(1, 300)))
                   for c in sizes for s in rng.integers(0, sizes[c] - 300, 3)]
        holes = [(c, int(s), int(s + rng.integers(1, 200)))
                 for c in sizes for s in rng.integers(0, sizes[c] - 200, 4)]
        want = {c: _mask(regions, sizes)[c] & ~_mask(holes, sizes)[c] for c in sizes}
        got = subtract_regions(regions, holes)
        assert all(e > s for _, s, e in got)
        for c in sizes:  # the same positions, each once unless the regions overlapped
            assert np.array_equal(_mask(got, sizes)[c], want[c])
    for spec, message in ((["z:1-2"], "chromosome z is not in the genome"),
                          (["a:5-5"], "empty or outside a"), (["a:0-2000"], "outside a"),
                          (["a:1-x"], r"windows.holdout\[0\] 'a:1-x': expected chrom:start")):
        with pytest.raises(SemisegError, match=message):
            read_holdout(spec, sizes)


def test_holdout_stays_out_of_training_validation_and_statistics(tmp_path):
    from semiseg.config.load import load_config
    from semiseg.train.data import make_windows, prepare

    cfg = load_config(CONFIG, ["windows.holdout=[chrC, 'chrA:100000-150000']",
                               "windows.valid_chroms=[]", "windows.valid_fraction=0.25"])
    data, _, _, _ = prepare(cfg)
    tr, va, chroms = make_windows(cfg, data.chrom_sizes)
    held = _mask([("chrC", 0, 200_000), ("chrA", 100_000, 150_000)], SIZES)
    used = _mask([(w.chrom, w.start, w.end) for w in tr + va], SIZES)
    assert not any((used[c] & held[c]).any() for c in SIZES)
    assert chroms == ["chrA", "chrB"]
    assert sum(w.end - w.start for w in tr + va) == 550_000  # all else is used
    # track statistics leave the held-out part out: the mean of the transformed values
    # over what is left (computed here from the bigWig directly)
    import pyBigWig

    stats = data.fit_stats(chroms, exclude=[("chrA", 100_000, 150_000)])
    bw = pyBigWig.open(str(EXAMPLE / "H3K4me3.bw"))
    vals = np.concatenate([np.asarray(bw.values("chrA", 0, 100_000)),
                           np.asarray(bw.values("chrA", 150_000, 400_000)),
                           np.asarray(bw.values("chrB", 0, 200_000))])
    bw.close()
    assert stats.mean[0] == pytest.approx(np.log1p(vals).mean(), rel=1e-9)


def test_validation_block_inside_the_holdout_moves_beside_it(monkeypatch):
    """A test region held out at a chromosome's end, where the default validation block
    (the last valid_fraction) lies: validation becomes the last valid_fraction of what
    is left outside the holdout (computed here by hand), said in the log; the other
    chromosomes, and a split the user set (valid_offset), are as before."""
    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.data import split_regions

    logs = []
    monkeypatch.setattr(ui, "log", lambda m: logs.append(str(m)))
    sizes = {"a": 4_000_000, "b": 1_000, "c": 10_000}
    hold = "windows.holdout=[a:3000000-4000000, b:100-200, c:7000-7500, c:8000-10000]"
    cfg = load_config(CONFIG, ["windows.chroms=null", "windows.valid_chroms=[]",
                               "windows.valid_fraction=0.2", hold])
    assert split_regions(cfg, sizes) and not logs  # said once, where make_windows asks
    train, valid = split_regions(cfg, sizes, log=True)
    # a: 3 Mb left, its last 600 kb; c: 7,500 bp left (0-7,000, 7,500-8,000), its last
    # 1,500 bp rounded down to the config's 200 bp steps, across both pieces; b: its own
    # block (800-1,000) lies outside the holdout
    assert train == [("a", 0, 2_400_000), ("b", 0, 100), ("b", 200, 800), ("c", 0, 6_100)]
    assert sorted(valid) == [("a", 2_400_000, 3_000_000), ("b", 800, 1_000),
                             ("c", 6_100, 7_000), ("c", 7_500, 8_000)]
    assert len(logs) == 2 and "a:2,400,000-3,000,000" in logs[0] and "holdout" in logs[0]
    assert "c:6,100-7,000, c:7,500-8,000" in logs[1]
    logs.clear()
    cfg = load_config(CONFIG, ["windows.chroms=null", "windows.valid_chroms=[]",
                               "windows.valid_fraction=0.2", "windows.valid_offset=0.8",
                               hold])
    train, valid = split_regions(cfg, sizes, log=True)
    assert [r for r in valid if r[0] == "a"] == [] and not logs


# ----------------------------------------------------------------------------- summary
def test_outside_gaps_against_a_brute_force():
    from semiseg.annotate.emit import _outside_gaps

    rng = np.random.default_rng(1)
    for _ in range(300):
        L = 200
        cuts = np.unique(np.concatenate([[0, L], rng.integers(1, L, rng.integers(0, 8))]))
        segs = np.column_stack([cuts[:-1], cuts[1:], np.zeros(len(cuts) - 1)]).astype(np.int64)
        n_gaps = int(rng.integers(0, 5))
        a = rng.integers(0, L, n_gaps)
        gaps = np.column_stack([a, np.minimum(L, a + rng.integers(1, 60, n_gaps))])
        gap = np.zeros(L, bool)
        for s, e in gaps:
            gap[s:e] = True
        pieces, bp = _outside_gaps(segs, gaps.reshape(-1, 2))
        for (s, e, _), n, b in zip(segs.tolist(), pieces.tolist(), bp.tolist()):
            inside = ~gap[s:e]
            runs = int(np.sum(np.diff(np.concatenate([[0], inside.astype(int)])) == 1))
            assert (n, b) == (runs, int(inside.sum()))


# ----------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """configs/chromatin.yaml as shipped, two epochs."""
    from semiseg import ui
    from semiseg.config.load import load_config
    from semiseg.train.loop import train

    out = tmp_path_factory.mktemp("chromatin") / "run"
    ui.set_quiet(True)
    try:
        train(load_config(CONFIG, ["train.epochs=2"]), out)
    finally:
        ui.set_quiet(False)
    return out


def _bed_counts(path):
    counts: dict[str, list[int]] = {}
    for line in Path(path).read_text().splitlines():
        f = line.split("\t")
        c = counts.setdefault(f[3], [0, 0])
        c[0] += 1
        c[1] += int(f[2]) - int(f[1])
    return counts


def _summary(path):
    rows = [ln.split("\t") for ln in Path(path).read_text().splitlines()
            if not ln.startswith("#")][1:]
    return {r[0]: [int(r[1]), int(r[2])] for r in rows}


def test_shipped_config_trains_and_annotates_without_a_fasta(trained, tmp_path):
    """Train as shipped (chrom sizes, track sheet, chrC held out), then annotate chrC
    with --chrom-sizes and --track-sheet: the summary agrees with the BED rows."""
    import yaml

    resolved = yaml.safe_load((trained / "config.yaml").read_text())
    assert resolved["inputs"]["fasta"] is None and len(resolved["inputs"]["tracks"]) == 5
    metrics = (trained / "metrics.tsv").read_text().splitlines()
    assert len(metrics) == 3  # header and two epochs
    out = tmp_path / "ann"
    cli("annotate", "--model", trained / "best.pt", "--chrom-sizes", EXAMPLE / "chrom.sizes",
        "--track-sheet", EXAMPLE / "tracks.tsv", "--chroms", "chrC", "--out", out, "--quiet")
    bed = _bed_counts(f"{out}.bed")
    assert sum(n for _, n in bed.values()) == SIZES["chrC"] and "gap" not in bed
    summary = _summary(f"{out}.summary.tsv")
    assert {k: v for k, v in summary.items() if v[0]} == bed
    inputs = json.loads(Path(f"{out}.json").read_text())["inputs"]
    assert "fasta" not in inputs
    assert inputs["chrom_sizes"]["path"] == str(EXAMPLE / "chrom.sizes")
    assert inputs["track_sheet"]["path"] == str(EXAMPLE / "tracks.tsv")
    assert sorted(inputs["tracks"]) == sorted(["H3K4me3", "H3K27ac", "H3K36me3", "H3K27me3",
                                               "H3K4me1"])


def test_annotate_input_errors(trained, tmp_path):
    """Wrong track sheets and genome arguments: one line naming the problem, exit 2 (the
    command line, once), no output files."""
    from semiseg.annotate.run import annotate

    model = str(trained / "best.pt")
    sheet = tmp_path / "two.tsv"
    sheet.write_text(f"H3K4me3\t{EXAMPLE / 'H3K4me3.bw'}\nH3K27ac\t{EXAMPLE / 'H3K27ac.bw'}\n")
    lines = (EXAMPLE / "tracks.tsv").read_text().splitlines()
    bad_transform = tmp_path / "t.tsv"
    bad_transform.write_text("\n".join([lines[0]] + [
        "\t".join([f[0], str(EXAMPLE / f[1]), "arcsinh" if i == 0 else f[2]])
        for i, f in enumerate(ln.split("\t") for ln in lines[1:])]) + "\n")
    sizes = str(EXAMPLE / "chrom.sizes")
    full = str(EXAMPLE / "tracks.tsv")
    for kwargs, message in (
            ({"track_sheet": str(sheet), "chrom_sizes": sizes},
             ("trained with tracks [H3K4me3, H3K27ac, H3K36me3, H3K27me3, H3K4me1] but "
              "[H3K4me3, H3K27ac] were given")),
            ({"track_sheet": str(bad_transform), "chrom_sizes": sizes},
             "track H3K4me3 has transform 'arcsinh' but the model was trained with 'log1p'"),
            ({"track_sheet": full, "tracks": [f"H3K27ac={EXAMPLE / 'H3K27ac.bw'}"],
              "chrom_sizes": sizes}, "track H3K27ac is also given by --track"),
            ({"track_sheet": full}, "give --fasta FILE or --chrom-sizes"),
            ({"track_sheet": full, "chrom_sizes": str(tmp_path / "no")},
             "--chrom-sizes: file not found")):
        with pytest.raises(SemisegError) as err:
            annotate(model, None, str(tmp_path / "x"), device="cpu", **kwargs)
        assert message in str(err.value)
    proc = cli("annotate", "--model", model, "--out", tmp_path / "x", "--chrom-sizes", sizes,
               "--track-sheet", sheet, ok=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("semiseg: error: the model was trained with tracks")
    assert not list(tmp_path.glob("x.*"))


def test_all_n_fasta_is_named_and_the_summary_matches_the_rows(trained, tmp_path, logged):
    """A FASTA that is all N on chrC and has an N run on chrB, given to a tracks-only
    model: annotate says so, writes chrC as one gap row, and summary.tsv counts exactly
    the labelled rows of the BED (it used to count the segments under the gap)."""
    from synth import write_fasta

    from semiseg.annotate.run import annotate

    rng = np.random.default_rng(5)
    seq_b = "".join(rng.choice(list("ACGT"), SIZES["chrB"]))
    seq_b = seq_b[:50_000] + "N" * 30_000 + seq_b[80_000:]
    write_fasta(tmp_path / "n.fa", {"chrB": seq_b, "chrC": "N" * SIZES["chrC"]})
    out = tmp_path / "ann"
    annotate(str(trained / "best.pt"), str(tmp_path / "n.fa"), str(out),
             track_sheet=str(EXAMPLE / "tracks.tsv"), device="cpu")
    assert any("all N on chrC" in ln and "--chrom-sizes" in ln for ln in logged)
    bed = [ln.split("\t") for ln in Path(f"{out}.bed").read_text().splitlines()]
    on_c = [f for f in bed if f[0] == "chrC"]
    assert [(f[1], f[2], f[3]) for f in on_c] == [("0", "200000", "gap")]
    assert ("chrB", "50000", "80000", "gap") in [tuple(f[:4]) for f in bed]
    counts = _bed_counts(f"{out}.bed")
    gap = counts.pop("gap")
    assert gap == [2, 230_000]
    summary = _summary(f"{out}.summary.tsv")
    assert {k: v for k, v in summary.items() if v[0]} == counts
    assert sum(v[1] for v in summary.values()) == SIZES["chrB"] - 30_000


def _datasets(cfg):
    from semiseg.train.data import make_datasets, make_windows, prepare

    data, annotation, scheme, columns = prepare(cfg)
    tr, va, chroms = make_windows(cfg, data.chrom_sizes)
    if data.tracks:
        data.fit_stats(chroms)
    train_ds, _ = make_datasets(cfg, data, annotation, scheme, columns, tr, va)
    return data, tr, train_ds, [data.feature_names[i] for i in columns]


def test_training_refuses_inputs_without_signal(tmp_path, logged):
    """An all-N FASTA with sequence: true and no tracks: refused (nothing to learn); the
    same FASTA for a tracks-only model: a warning that names it; tracks with values on
    some training windows only: a warning with their number."""
    from synth import write_fasta

    from semiseg.config.load import load_config
    from semiseg.train.data import check_fasta, check_signal
    from semiseg.train.loop import train

    write_fasta(tmp_path / "n.fa", {c: "N" * n for c, n in SIZES.items()})
    cfg = load_config(CONFIG, ["inputs.chrom_sizes=null", f"inputs.fasta={tmp_path}/n.fa",
                               "inputs.sequence=true", "inputs.track_sheet=null",
                               "train.epochs=1"])
    with pytest.raises(SemisegError, match=r"no input to learn from: every training window "
                                           r"has no base other than N \(chrA\)"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "best.pt").exists()
    # a tracks-only model with the same FASTA: warned
    cfg = load_config(CONFIG, ["inputs.chrom_sizes=null", f"inputs.fasta={tmp_path}/n.fa"])
    data, tr, train_ds, names = _datasets(cfg)
    check_fasta(cfg, data, tr)
    assert any("inputs.fasta is all N on chrA:" in ln and "inputs.chrom_sizes" in ln
               for ln in logged)
    check_signal(train_ds, names)  # the tracks have values: no complaint
    assert not any("training windows have" in ln for ln in logged)
    # two tracks with values on chrA's first 40 kb only (one window of ten), one on chrC
    (tmp_path / "a.bedgraph").write_text("chrA\t0\t1000\t5\nchrC\t0\t1000\t5\n")
    (tmp_path / "b.bedgraph").write_text("chrA\t20000\t21000\t5\n")
    tracks = f"{{K: {tmp_path}/a.bedgraph, L: {tmp_path}/b.bedgraph}}"
    cfg = load_config(CONFIG, ["inputs.track_sheet=null", f"inputs.tracks={tracks}"])
    _, tr, train_ds, names = _datasets(cfg)
    check_signal(train_ds, names)
    assert len(tr) == 10 and any("warning: 9 of 10 training windows have no track value "
                                 "(on chrA)" in ln for ln in logged)
    train_ds.windows, train_ds.x = train_ds.windows[1:], train_ds.x[1:]
    with pytest.raises(SemisegError, match=r"every training window has no track value "
                                           r"\(chrA\)"):
        check_signal(train_ds, names)
    # a track without any value on the training chromosomes is refused by its statistics
    cfg = load_config(CONFIG, ["inputs.track_sheet=null",
                               f"inputs.tracks={{K: {tmp_path}/a.bedgraph}}",
                               "windows.holdout=['chrA:0-40000', chrC]", "train.epochs=1"])
    with pytest.raises(SemisegError, match="track 'K' has no values on the training"):
        train(cfg, tmp_path / "run2")


# ----------------------------------------------------------------------------- evaluate
def _write(path, rows):
    Path(path).write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def onoff():
    from semiseg.genome import load_scheme

    return load_scheme({"name": "onoff", "kind": "bed", "background": "off",
                        "labels": [{"name": "off"}, {"name": "on"}]})


def _by_label(res):
    return {r["label"]: r for r in res["labels"]}


def test_evaluate_scores_only_where_the_prediction_has_calls(tmp_path, onoff):
    """Truth: "on" at [100, 200), [500, 600), [800, 900) of a 1,000-bp chromosome (the
    rest is the background, off). The prediction was annotated over [0, 400) only (gap
    rows elsewhere, as annotate --regions writes) and is right there. Hand-computed: 400
    bp scored, every F1 1 (the two truth segments beyond 400 are not missed: the old
    count gave "on" segment F1 2 * 1 / (1 + 3) = 0.5), 300 truth bp filled as off."""
    from semiseg.evaluate.run import evaluate

    truth = _write(tmp_path / "t.bed", [("c", 100, 200, "on"), ("c", 500, 600, "on"),
                                        ("c", 800, 900, "on")])
    pred = _write(tmp_path / "p.bed", [("c", 0, 100, "off"), ("c", 100, 200, "on"),
                                       ("c", 200, 400, "off"), ("c", 400, 1000, "gap")])
    res = evaluate(pred, truth, scheme=onoff)
    rows = _by_label(res)
    assert res["bp_evaluated"] == 400
    for label in ("on", "off"):
        for key in ("f1", "segment_f1_exact", "segment_f1_overlap50", "boundary_f1"):
            assert rows[label][key] == 1.0, (label, key)
    assert rows["on"]["segments_truth"] == 1
    assert res["calls"] == {"truth_filled_bp": 300, "pred_filled_bp": 0,
                            "pred_no_call_bp": 600, "truth_no_call_bp": 0}
    # the same prediction without its gap rows (a BED cut to the annotated part) and
    # the chromosome length known: the part without rows is not filled as off
    short = _write(tmp_path / "s.bed", [("c", 0, 100, "off"), ("c", 100, 200, "on"),
                                        ("c", 200, 400, "off")])
    res2 = evaluate(short, truth, scheme=onoff, sizes={"c": 1000})
    assert res2["bp_evaluated"] == 400 and _by_label(res2)["on"]["f1"] == 1.0
    assert res2["calls"]["pred_no_call_bp"] == 600
    # asked to fill the prediction: off over [400, 1000) misses 200 bp of on:
    # on F1 = 2 * 100 / (100 + 300) = 0.5; off: tp 700, pred 900, truth 700 -> 1400/1600
    res3 = evaluate(short, truth, scheme=onoff, sizes={"c": 1000}, fill_pred=True)
    assert res3["bp_evaluated"] == 1000 and res3["calls"]["pred_filled_bp"] == 600
    assert _by_label(res3)["on"]["f1"] == pytest.approx(0.5)
    assert _by_label(res3)["off"]["f1"] == pytest.approx(1400 / 1600)


def test_evaluate_hand_computed_f1_inside_the_called_part(tmp_path, onoff):
    """Truth on [100, 200); prediction on [150, 250), scored over [0, 400). Base level:
    on tp 50 of 100 and 100 -> F1 0.5; off tp 250 of 300 and 300 -> 5/6. Segments: each
    pair overlaps >= 50% both ways (F1 1), none is exact (F1 0); boundaries 100/150 and
    200/250 are 50 bp apart: F1 0 at +-10 bp, 1 at +-50."""
    from semiseg.evaluate.run import evaluate

    truth = _write(tmp_path / "t.bed", [("c", 100, 200, "on"), ("c", 600, 700, "on")])
    pred = _write(tmp_path / "p.bed", [("c", 0, 150, "off"), ("c", 150, 250, "on"),
                                       ("c", 250, 400, "off"), ("c", 400, 1000, "gap")])
    rows = _by_label(evaluate(pred, truth, scheme=onoff, tolerance=10))
    assert rows["on"]["f1"] == pytest.approx(0.5)
    assert rows["off"]["f1"] == pytest.approx(250 / 300)
    for label in ("on", "off"):
        assert rows[label]["segment_f1_overlap50"] == 1.0
        assert rows[label]["segment_f1_exact"] == 0.0
    assert rows["on"]["boundary_f1"] == 0.0
    wide = _by_label(evaluate(pred, truth, scheme=onoff, tolerance=50))
    assert wide["on"]["boundary_f1"] == 1.0


def test_evaluate_cli_says_what_it_filled(tmp_path):
    truth = _write(tmp_path / "t.bed", [("c", 100, 200, "promoter")])
    pred = _write(tmp_path / "p.bed", [("c", 0, 100, "quiescent"), ("c", 100, 200, "promoter"),
                                       ("c", 200, 400, "quiescent"), ("c", 400, 1000, "gap")])
    proc = cli("evaluate", "--pred", pred, "--truth", truth, "--scheme", CONFIG,
               "--out", tmp_path / "ev", "--quiet")
    assert "600 bp without a predicted call" in proc.stdout
    res = json.loads((tmp_path / "ev.json").read_text())
    assert res["calls"]["pred_no_call_bp"] == 600 and res["bp_evaluated"] == 400


def test_bundled_example_matches_its_generator(tmp_path):
    """data/chromatin_example is what scripts/make_chromatin_example.py writes (the text
    files byte for byte, the bigWig values exactly)."""
    import pyBigWig

    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_chromatin_example.py"),
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    for name in ("chrom.sizes", "tracks.tsv", "states.bed"):
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name
    assert (gzip.decompress((tmp_path / "H3K4me1.bedgraph.gz").read_bytes())
            == gzip.decompress((EXAMPLE / "H3K4me1.bedgraph.gz").read_bytes()))
    for mark in ("H3K4me3", "H3K27ac", "H3K36me3", "H3K27me3"):
        a = pyBigWig.open(str(tmp_path / f"{mark}.bw"))
        b = pyBigWig.open(str(EXAMPLE / f"{mark}.bw"))
        for c, n in SIZES.items():
            assert np.array_equal(a.values(c, 0, n, numpy=True), b.values(c, 0, n, numpy=True))
        a.close()
        b.close()
    assert os.path.getsize(EXAMPLE / "H3K4me3.bw") < 100_000
