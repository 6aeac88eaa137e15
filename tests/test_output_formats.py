"""Every output file opens in the tools people use on it: pyranges (BED, GFF3), bedtools
(BED, browser BED, GFF3, bedGraph), `gt gff3validator` (GFF3) and pyBigWig (bigWig).

bedtools and gt are system programs: without them these tests fail under CI (the CI
variable set; .ci/run installs both) and are skipped elsewhere. `check_outputs` is also
run on the files of a real `semiseg annotate` (test_e2e.py).
"""

from __future__ import annotations

import os
import subprocess

import commands
import numpy as np
import pytest

from semiseg.genome import LabelScheme, OutputWriter, labels_to_segments, load_scheme

GENE = load_scheme("gene_structure")
TOY = LabelScheme.from_dict({
    "name": "toy",
    "labels": [{"name": "low"}, {"name": "high", "strand": "+"}, {"name": "mid"}],
})


def need(tool: str) -> str:
    """The path of a command-line tool (commands.need: a failure under CI, else a skip)."""
    return commands.need(tool, hint="apt-get install bedtools genometools; .ci/run does it")[0]


def run(*args: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stderr}"
    return proc.stdout


def _bed_rows(path) -> list[list[str]]:
    return [ln.rstrip("\n").split("\t") for ln in open(path)
            if ln.strip() and not ln.startswith(("#", "track", "browser"))]


def _gff_rows(path) -> list[list[str]]:
    return [ln.rstrip("\n").split("\t") for ln in open(path)
            if ln.strip() and not ln.startswith("#")]


# ----------------------------------------------------------------------------- per tool
def check_pyranges(prefix: str) -> None:
    import pyranges

    import semiseg

    rows = _bed_rows(f"{prefix}.bed")
    for gr in (pyranges.read_bed(f"{prefix}.bed"), semiseg.read_prediction(prefix),
               semiseg.read_prediction(f"{prefix}.bed")):
        df = gr.df.sort_values(["Chromosome", "Start"])
        want = sorted((r[0], int(r[1]), int(r[2]), r[3], int(r[4])) for r in rows)
        got = sorted(zip(df.Chromosome.astype(str), df.Start.tolist(), df.End.tolist(),
                         df.Name.tolist(), df.Score.tolist()))
        assert got == want
    feats = _gff_rows(f"{prefix}.gff3")
    for gr in (pyranges.read_gff3(f"{prefix}.gff3"), semiseg.read_prediction(f"{prefix}.gff3")):
        df = gr.df
        assert len(df) == len(feats)
        # pyranges is 0-based half-open: GFF3 start - 1, end as it is
        want = sorted((f[0], f[2], int(f[3]) - 1, int(f[4])) for f in feats)
        got = sorted(zip(df.Chromosome.astype(str), df.Feature.astype(str), df.Start.tolist(),
                         df.End.tolist()))
        assert got == want
        ids = [f[8].split("ID=")[1].split(";")[0] for f in feats if "ID=" in f[8]]
        assert sorted(df.ID.dropna().tolist()) == sorted(ids)


def check_bedtools(prefix: str, sizes: dict[str, int]) -> None:
    bt = need("bedtools")
    rows = _bed_rows(f"{prefix}.bed")
    for name in ("bed", "browser.bed"):
        out = run(bt, "sort", "-i", f"{prefix}.{name}")
        assert sorted(out.splitlines()) == sorted("\t".join(r) for r in rows)
    # every segment overlaps itself; the GFF3 features fall on segments
    hits = run(bt, "intersect", "-u", "-a", f"{prefix}.bed", "-b", f"{prefix}.browser.bed")
    assert len(hits.splitlines()) == len(rows)
    gff = run(bt, "intersect", "-u", "-a", f"{prefix}.gff3", "-b", f"{prefix}.bed")
    assert len(gff.splitlines()) == len(_gff_rows(f"{prefix}.gff3"))
    genome = os.path.join(os.path.dirname(prefix), "genome.txt")
    with open(genome, "w") as fh:
        fh.writelines(f"{c}\t{n}\n" for c, n in sizes.items())
    # the segments tile each chromosome: nothing of the genome is left uncovered
    assert run(bt, "complement", "-i", f"{prefix}.bed", "-g", genome).strip() == ""


def check_gt(prefix: str) -> None:
    gt = need("gt")
    run(gt, "gff3validator", f"{prefix}.gff3")


def check_bigwigs(prefix: str, sizes: dict[str, int], names: list[str]) -> None:
    import pyBigWig

    for series in [f"posterior.{n}" for n in names] + ["boundary"]:
        bw = pyBigWig.open(f"{prefix}.{series}.bw")
        try:
            assert bw.isBigWig()
            assert bw.chroms() == sizes
            for c, n in sizes.items():
                v = np.asarray(bw.values(c, 0, n), dtype=float)
                v = v[~np.isnan(v)]
                assert ((v >= -1e-6) & (v <= 1 + 1e-6)).all()
        finally:
            bw.close()


def check_outputs(prefix: str, sizes: dict[str, int], names: list[str]) -> None:
    """All four checks on the files of one annotation PREFIX."""
    check_pyranges(prefix)
    check_bigwigs(prefix, sizes, names)
    check_bedtools(prefix, sizes)
    check_gt(prefix)


# ----------------------------------------------------------------------------- files
def _gene_structure_outputs(prefix, chroms=("chrA", "chrB")) -> dict[str, int]:
    """A hand-made segmentation with every kind of GFF3 feature the writer makes: genes on
    both strands with UTRs and introns, an ncRNA, a lone intron, N gaps."""
    idx = {n: i for i, n in enumerate(GENE.names)}
    plan = [("intergenic", 100), ("UTR+", 20), ("CDS+", 90), ("intron+", 60), ("CDS+", 33),
            ("UTR+", 17), ("intergenic", 80), ("UTR-", 30), ("CDS-", 120), ("intron-", 40),
            ("CDS-", 60), ("intergenic", 50), ("ncRNA+", 70), ("intergenic", 30),
            ("intron-", 25), ("intergenic", 55)]
    length = sum(n for _, n in plan)
    sizes = {c: length - 7 * i for i, c in enumerate(chroms)}
    rng = np.random.default_rng(0)
    with OutputWriter(prefix, GENE, sizes, formats=("bed", "gff3", "bigwig", "bedgraph"),
                      version="0.0-test", model_hash="abc123") as w:
        for c, L in sizes.items():
            labels = np.repeat([idx[n] for n, _ in plan], [n for _, n in plan])[:L]
            post = rng.dirichlet(np.ones(len(GENE)), size=L).astype(np.float32)
            post[np.arange(L), labels] += 1
            post /= post.sum(1, keepdims=True)
            bnd = rng.random(L).astype(np.float32)
            w.add(c, labels_to_segments(labels), post, bnd, gaps=np.array([[400, 420]]))
    return sizes


def test_gene_structure_outputs_open_everywhere(tmp_path):
    prefix = str(tmp_path / "gs")
    sizes = _gene_structure_outputs(prefix)
    check_outputs(prefix, sizes, list(GENE.names))
    bt = need("bedtools")
    for n in ("CDS+", "boundary"):
        name = f"posterior.{n}" if n != "boundary" else n
        run(bt, "sort", "-i", f"{prefix}.{name}.bedGraph")


def test_bed_scheme_outputs_open_everywhere(tmp_path):
    prefix = str(tmp_path / "toy")
    sizes = {"c1": 1000, "c2": 333}
    rng = np.random.default_rng(1)
    with OutputWriter(prefix, TOY, sizes, resolution=10, version="0.0-test",
                      model_hash="abc123") as w:
        for c, L in sizes.items():
            steps = -(-L // 10)
            labels = rng.integers(0, 3, steps)
            labels[: steps // 3] = 1
            post = rng.dirichlet(np.ones(3), size=steps).astype(np.float32)
            w.add(c, labels_to_segments(labels, resolution=10, end=L), post,
                  rng.random(steps).astype(np.float32))
    check_outputs(prefix, sizes, list(TOY.names))


def test_merged_outputs_open_everywhere(tmp_path):
    from semiseg.annotate.merge import merge
    from semiseg.annotate.run import write_summary

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    sa = _gene_structure_outputs(a, chroms=("chrA",))
    sb = _gene_structure_outputs(b, chroms=("chrB",))
    meta = {"version": "0.0-test", "model_hash": "abc123", "resolution": 1}
    for p in (a, b):
        write_summary(f"{p}.summary.tsv", list(GENE.names), {}, meta)
    merge([a, b], str(tmp_path / "m"))
    check_outputs(str(tmp_path / "m"), {**sa, **sb}, list(GENE.names))


def test_bed_has_no_header_and_provenance_is_kept(tmp_path):
    prefix = str(tmp_path / "gs")
    _gene_structure_outputs(prefix)
    first = open(f"{prefix}.bed").readline()
    assert first.startswith("chrA\t0\t")
    track = open(f"{prefix}.browser.bed").readline()
    assert track.startswith("track ")
    assert ('description="semiseg 0.0-test model=abc123 scheme=gene_structure '
            'resolution=1"') in track
    gff = open(f"{prefix}.gff3").read().splitlines()
    assert gff[0] == "##gff-version 3"
    assert "# semiseg 0.0-test model=abc123 scheme=gene_structure resolution=1" in gff


def test_read_prediction_errors(tmp_path):
    import semiseg
    from semiseg.errors import SemisegError

    with pytest.raises(SemisegError, match="prediction not found"):
        semiseg.read_prediction(tmp_path / "missing")
