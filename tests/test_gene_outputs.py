"""What a gene-finder user expects from annotate (issue 44): proteins and CDS FASTA,
GFF3 with shared CDS IDs and start/stop codon rows, a stranded BED, BED scores,
provenance with checksums, bigWig zoom levels. Oracles: hand-written codon tables and
the SGD annotation of yeast chrI, gt gff3validator, the bigWig header bytes, sha256
computed here."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from semiseg.errors import SemisegError
from semiseg.genome.codes import genetic_code, reverse_complement, translate
from semiseg.genome.geneseq import gene_seq

ROOT = os.path.join(os.path.dirname(__file__), "..")
MODEL = os.path.join(ROOT, "semiseg", "models", "yeast_cds_frames.pt")
START = 41800  # chrI:41800-45400 holds PEX22 (+, CDS 42178-42720) and ACS1 (-, 42882-45023)
END = 45400

# the standard code written out by amino acid (a textbook table, not codes.py's NCBI
# string): the oracle of the translations below
_BY_AA = {"F": "TTT TTC", "L": "TTA TTG CTT CTC CTA CTG", "I": "ATT ATC ATA", "M": "ATG",
          "V": "GTT GTC GTA GTG", "S": "TCT TCC TCA TCG AGT AGC", "P": "CCT CCC CCA CCG",
          "T": "ACT ACC ACA ACG", "A": "GCT GCC GCA GCG", "Y": "TAT TAC", "*": "TAA TAG TGA",
          "H": "CAT CAC", "Q": "CAA CAG", "N": "AAT AAC", "K": "AAA AAG", "D": "GAT GAC",
          "E": "GAA GAG", "C": "TGT TGC", "W": "TGG", "R": "CGT CGC CGA CGG AGA AGG",
          "G": "GGT GGC GGA GGG"}
HAND = {codon: aa for aa, codons in _BY_AA.items() for codon in codons.split()}


def test_codon_tables_by_hand():
    std = genetic_code(1)
    assert len(HAND) == 64 and std.table == HAND
    assert std.stops == ("TAA", "TAG", "TGA")
    for codon, aa in HAND.items():
        assert std.table[codon] == aa
    # vertebrate mitochondrial: TGA is W, AGA/AGG stop, ATA is M
    mito = genetic_code(2)
    assert (mito.table["TGA"], mito.table["AGA"], mito.table["AGG"], mito.table["ATA"]) == \
        ("W", "*", "*", "M")
    assert sorted(mito.stops) == ["AGA", "AGG", "TAA", "TAG"]
    # ciliate: TAA and TAG are Q, only TGA stops
    assert genetic_code(6).stops == ("TGA",) and genetic_code(6).table["TAA"] == "Q"
    assert genetic_code(4).table["TGA"] == "W" and genetic_code(5).table["AGA"] == "S"
    assert genetic_code(11).table == std.table and "GTG" in genetic_code(11).starts
    # the amino acid counts of the standard code (Ser, Leu, Arg 6 codons each)
    counts = {aa: list(std.table.values()).count(aa) for aa in "SLRM*W"}
    assert counts == {"S": 6, "L": 6, "R": 6, "M": 1, "*": 3, "W": 1}
    with pytest.raises(SemisegError, match="--genetic-code"):
        genetic_code(7)


def test_translate_and_reverse_complement():
    assert translate("ATGTTTAAAGGGTAA") == "MFKG*"
    assert translate("ATGTGATAA", 2) == "MW*"
    assert translate("GTGAAATAA", 11) == "MK*"  # an alternative start read as M
    assert translate("GTGAAATAA", 1) == "VK*"  # GTG does not start in table 1
    assert translate("ATGNNNTA") == "MX"  # N codon X, trailing bases ignored
    assert reverse_complement("ACGTNacgtRY") == "RYacgtNACGT"


def test_split_start_and_stop_codons():
    """A minus-strand gene whose start and stop codons each span an intron: the codon
    rows come in pieces (genome order), the protein reads through the splice."""
    # 5'-ATG|AAA|TGG|TAA-3' as two exons on the minus strand, intron inside ATG and TAA
    mrna = "ATGAAATGGTAA"
    exon1, exon2 = mrna[:2], mrna[2:10]  # AT | GAAATGGT, then A on a third exon
    exon3 = mrna[10:]
    intron = "GTAAGTTTTTTTTTTTTTTTTTAG"
    plus = exon1 + intron + exon2 + intron + exon3  # the transcript on its own strand
    seq = "CC" + reverse_complement(plus) + "GG"
    n = len(plus)
    # exons in genome order (minus strand: the 3' exon first)
    e3 = (2, 2 + len(exon3))
    e2 = (e3[1] + len(intron), e3[1] + len(intron) + len(exon2))
    e1 = (e2[1] + len(intron), e2[1] + len(intron) + len(exon1))
    assert e1[1] == 2 + n
    g = gene_seq(seq, [e3, e2, e1], "-", (False, False), genetic_code(1))
    assert g.cds == mrna and g.protein == "MKW" and g.partial == "no"
    assert g.start_codon == [(e2[1] - 1, e2[1]), e1]  # G (exon 2) + AT (exon 1)
    assert g.stop_codon == [e3, (e2[0], e2[0] + 1)]  # A (exon 3) + TA (exon 2)
    for pieces, codon in ((g.start_codon, "ATG"), (g.stop_codon, "TAA")):
        assert reverse_complement("".join(seq[a:b] for a, b in pieces)) == codon
    # cut at its 5' end (right, on the minus strand): partial 5', read from the 3' end
    g = gene_seq(seq, [e3, e2, e1], "-", (False, True), genetic_code(1))
    assert g.partial == "5'" and g.start_codon == [] and g.protein == "MKW"[-len(g.protein):]


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    import semiseg.annotate.run as A
    from semiseg import ui
    from semiseg.genome import Fasta

    tmp = tmp_path_factory.mktemp("genes")
    with Fasta(os.path.join(ROOT, "data", "yeast", "chrI.fa")) as fa:
        seq = fa.fetch("chrI", START, END)
    fasta = tmp / "piece.fa"
    fasta.write_text(f">piece\n{seq}\n")
    ui.set_quiet(True)
    try:
        files = A.annotate(MODEL, str(fasta), str(tmp / "out"), device="cpu")
    finally:
        ui.set_quiet(False)
    return tmp, seq, files


def _sgd_cds(gene: str) -> list[tuple[int, int, str]]:
    """The SGD CDS rows of `gene` on chrI, in piece coordinates (0-based, half-open)."""
    out = []
    with open(os.path.join(ROOT, "data", "yeast", "yeast_chrI_chrII.gff3")) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if len(f) == 9 and f[0] == "chrI" and f[2] == "CDS" and f"Parent={gene};" in f[8]:
                out.append((int(f[3]) - 1 - START, int(f[4]) - START, f[6]))
    return out


def _lines(path) -> list[str]:
    with open(path) as fh:
        return fh.readlines()


def _fasta(path) -> dict[str, tuple[str, str]]:
    recs, name = {}, None
    for line in _lines(path):
        if line.startswith(">"):
            name, _, desc = line[1:].strip().partition(" ")
            recs[name] = [desc, ""]
        else:
            recs[name][1] += line.strip()
    return {k: (d, s) for k, (d, s) in recs.items()}


def _gff(path):
    return [ln.rstrip("\n").split("\t") for ln in _lines(path) if not ln.startswith("#")]


def _attrs(col9: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in col9.split(";"))


@pytest.mark.slow  # one annotate of 3.6 kb, shared (10-16 s on 2 loaded cores)
def test_proteins_match_the_sgd_genes(annotated):
    """The two SGD genes of the piece are predicted; their proteins, translated here from
    the SGD CDS with a hand-written codon dict, equal PREFIX.proteins.fa's (stop dropped),
    start with M and have no internal stop; the CDS FASTA is the spliced CDS."""
    tmp, seq, _ = annotated
    prots, cds = _fasta(tmp / "out.proteins.fa"), _fasta(tmp / "out.cds.fa")
    assert prots.keys() == cds.keys()
    gff = _gff(tmp / "out.gff3")
    mrna = {_attrs(r[8])["ID"]: (int(r[3]) - 1, int(r[4]), r[6]) for r in gff if r[2] == "mRNA"}
    assert set(prots) == set(mrna)  # FASTA IDs are the GFF3 mRNA IDs
    by_span = {v: k for k, v in mrna.items()}
    std = HAND  # the textbook table
    for gene, length in (("YAL055W", 180), ("YAL054C", 713)):  # PEX22, ACS1 (SGD lengths)
        (a, b, strand), = _sgd_cds(gene)
        tid = by_span[(a, b, strand)]
        dna = seq[a:b].upper() if strand == "+" else reverse_complement(seq[a:b].upper())
        want = "".join(std[dna[i:i + 3]] for i in range(0, len(dna), 3))
        assert want[0] == "M" and want[-1] == "*" and "*" not in want[:-1]
        desc, protein = prots[tid]
        assert protein == want[:-1] and len(protein) == length
        assert "partial=no" in desc and "internal_stops=0" in desc
        assert cds[tid][1] == dna
    for tid, (desc, protein) in prots.items():
        if "partial=no" in desc:
            assert protein.startswith("M") and "*" not in protein, tid
    # a gene the GFF3 calls partial (it runs off the piece) is partial in the FASTA
    partial = {_attrs(r[8])["ID"] for r in gff if r[2] == "mRNA" and "partial=true" in r[8]}
    assert partial  # the piece's right end cuts a gene
    for tid in partial:
        assert "partial=no" not in prots[tid][0], tid


@pytest.mark.slow  # one annotate of 3.6 kb, shared (10-16 s on 2 loaded cores)
def test_gff3_hierarchy_codons_and_validator(annotated):
    from commands import need

    tmp, seq, _ = annotated
    gt, = need("gt", hint="apt-get install genometools")
    r = subprocess.run([gt, "gff3validator", str(tmp / "out.gff3")], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 0, r.stderr
    # and every type a Sequence Ontology term (start_codon, stop_codon, ...), where gt
    # has its SO file
    r = subprocess.run([gt, "gff3validator", "-typecheck", "so", str(tmp / "out.gff3")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0 or "so.obo" in r.stderr.lower(), r.stderr
    rows = _gff(tmp / "out.gff3")
    types = {_attrs(r[8])["ID"]: r[2] for r in rows}
    cds_ids = {}
    for r in rows:
        at = _attrs(r[8])
        if r[2] in ("exon", "CDS", "start_codon", "stop_codon"):
            assert types[at["Parent"]] == "mRNA"
        if r[2] == "mRNA":
            assert types[at["Parent"]] == "gene"
        if r[2] == "CDS":
            cds_ids.setdefault(at["Parent"], set()).add(at["ID"])
        if r[2] in ("start_codon", "stop_codon"):  # the codon under the row, read here
            dna = seq[int(r[3]) - 1:int(r[4])].upper()
            dna = dna if r[6] == "+" else reverse_complement(dna)
            assert dna in (("ATG",) if r[2] == "start_codon" else ("TAA", "TAG", "TGA"))
    assert cds_ids and all(len(v) == 1 for v in cds_ids.values())  # one CDS ID each
    # read back as labels (evaluate's path), the GFF3 gives the BED's labels: the new
    # rows (start_codon, stop_codon) change nothing there
    import torch

    from semiseg.checkpoint import Checkpoint
    from semiseg.genome import read_annotation

    scheme = Checkpoint(MODEL, torch.load(MODEL, map_location="cpu", weights_only=False)).scheme
    back = read_annotation(tmp / "out.gff3", scheme, {"piece": len(seq)}).labels("piece")
    want = np.full(len(seq), -1)
    for ln in _lines(tmp / "out.bed"):
        f = ln.split("\t")
        want[int(f[1]):int(f[2])] = scheme.names.index(f[3])
    np.testing.assert_array_equal(back, want)
    # the model's CDS includes the stop codon: each stop_codon row lies in a CDS row
    cds_rows = [(int(r[3]), int(r[4])) for r in rows if r[2] == "CDS"]
    for r in rows:
        if r[2] == "stop_codon":
            assert any(a <= int(r[3]) and int(r[4]) <= b for a, b in cds_rows)


@pytest.mark.slow  # one annotate of 3.6 kb, shared (10-16 s on 2 loaded cores)
def test_stranded_bed_and_scores(annotated):
    import pyranges

    tmp, _, _ = annotated
    bed = [ln.split("\t") for ln in _lines(tmp / "out.bed")]
    stranded = [ln.split("\t") for ln in _lines(tmp / "out.stranded.bed")]
    gr = pyranges.read_bed(str(tmp / "out.stranded.bed"))
    assert gr.stranded and set(gr.df.Strand.astype(str)) == {"+", "-"}
    # each unstranded row twice (+, -), the others once; per strand no overlap
    want = sorted([r[:5] + [s] + r[6:] for r in bed for s in ("+-" if r[5] == "." else r[5])])
    assert sorted(stranded) == want
    for s in "+-":
        rows = sorted((int(r[1]), int(r[2])) for r in stranded if r[5] == s)
        assert all(b <= c for (_, b), (c, _) in itertools.pairwise(rows))
    # the gene model has no run posteriors: the score is 1000 x the mean posterior of the
    # row's label, read back here from the posterior bigWig
    import pyBigWig

    scores = [int(r[4]) for r in bed]
    assert max(scores) > 0
    for r in bed[:6]:
        bw = pyBigWig.open(str(tmp / f"out.posterior.{r[3]}.bw"))
        mean = float(np.mean(bw.values("piece", int(r[1]), int(r[2]))))
        bw.close()
        assert abs(int(r[4]) - round(1000 * mean)) <= 1, r


@pytest.mark.slow  # one annotate of 3.6 kb, shared (10-16 s on 2 loaded cores)
def test_provenance_sidecar_and_headers(annotated):
    tmp, _, files = annotated
    doc = json.loads((tmp / "out.json").read_text())
    for key in ("command", "date", "semiseg_version", "model_hash", "scheme", "resolution",
                "options", "options_in_effect", "inputs", "genetic_code", "files"):
        assert key in doc, key
    fasta_sha = hashlib.sha256((tmp / "piece.fa").read_bytes()).hexdigest()
    with open(MODEL, "rb") as fh:
        model_sha = hashlib.sha256(fh.read()).hexdigest()
    assert doc["inputs"]["fasta"]["sha256"] == fasta_sha
    assert doc["inputs"]["model"]["sha256"] == model_sha
    assert doc["options"]["genetic_code"] == 1 and doc["genetic_code"]["number"] == 1
    assert set(doc["files"]) == {os.path.basename(f) for f in files} - {"out.json"}
    gff_head = [ln for ln in _lines(tmp / "out.gff3") if ln.startswith("#")]
    assert any(fasta_sha in ln for ln in gff_head) and any(model_sha in ln for ln in gff_head)
    browser = (tmp / "out.browser.bed").read_text()
    assert browser.startswith("track ") and fasta_sha in browser


def _zoom_levels(path) -> int:
    with open(path, "rb") as fh:
        head = fh.read(8)
    assert struct.unpack_from("<I", head, 0)[0] == 0x888FFC26  # bigWig magic
    return struct.unpack_from("<H", head, 6)[0]


@pytest.mark.slow  # one annotate of 3.6 kb, shared (10-16 s on 2 loaded cores)
def test_bigwig_zoom_levels_from_the_header(annotated, tmp_path):
    """>= 5 zoom levels (header bytes 6-7); the coarsest summarises the whole
    chromosome: pyBigWig's zoom-based mean over it equals the mean of the values."""
    import pyBigWig

    from semiseg.genome import OutputWriter
    from semiseg.genome.labels import load_scheme

    tmp, _, _ = annotated
    for f in os.listdir(tmp):
        if f.endswith(".bw"):
            assert _zoom_levels(tmp / f) >= 5, f
    # a writer file on two chromosomes: zoom summaries against the values
    scheme = load_scheme("gene_structure")
    sizes = {"a": 300_000, "b": 70_001}
    rng = np.random.default_rng(1)
    with OutputWriter(tmp_path / "z", scheme, sizes, formats=("bigwig",),
                      signal_precision=1e-2) as w:
        for c, n in sizes.items():
            post = np.repeat(rng.dirichlet(np.ones(len(scheme)), n // 50 + 1), 50, 0)[:n]
            w.add(c, np.array([[0, n, 0]]), post.astype(np.float32))
    path = tmp_path / f"z.posterior.{scheme.names[0]}.bw"
    assert _zoom_levels(path) >= 5
    bw = pyBigWig.open(str(path))
    for c, n in sizes.items():
        v = np.asarray(bw.values(c, 0, n))
        for a, b in ((0, n), (0, 65536)):
            b = min(b, n)
            assert bw.stats(c, a, b, type="mean")[0] == pytest.approx(v[a:b].mean(), rel=1e-5)
            assert bw.stats(c, a, b, type="max")[0] == pytest.approx(v[a:b].max(), rel=1e-6)
    bw.close()


def test_genetic_code_flag_changes_the_proteins(tmp_path):
    """--genetic-code reaches the proteins: the writer with table 2 translates TGA as W."""
    from semiseg.genome import OutputWriter
    from semiseg.genome.labels import load_scheme

    scheme = load_scheme("gene_structure")
    idx = {n: i for i, n in enumerate(scheme.names)}
    gene = "ATG" + "TGA" + "AAA" + "TAA"
    seq = "C" * 20 + gene + "C" * 20
    lab = np.full(len(seq), idx["intergenic"])
    lab[20:20 + len(gene)] = idx["CDS+"]
    from semiseg.genome import labels_to_segments

    for code, want in ((1, "M*K"), (2, "MWK")):
        prefix = tmp_path / f"g{code}"
        with OutputWriter(prefix, scheme, {"s": len(seq)}, formats=("gff3",),
                          proteins=True, genetic_code=code) as w:
            w.add("s", labels_to_segments(lab), sequence=seq)
        desc, protein = _fasta(f"{prefix}.proteins.fa")["s:gene1.t1"]
        assert protein == want
        assert f"genetic_code={code}" in desc
        assert ("internal_stops=1" in desc) == (code == 1)


@pytest.mark.parametrize("res,precision", [(1, 1e-2), (3, 0.0)])
def test_every_zoom_summary_against_the_values(tmp_path, res, precision):
    """Every summary of every zoom level (mean, min, max over its bin, read through
    pyBigWig's zoom-based stats) equals the values' own, on chromosomes with a gap, one
    shorter than a bin and odd lengths. The levels chosen from the summaries gathered
    while writing (ZoomBins) are those a read-back of the finished file chooses."""
    import pyBigWig

    from semiseg.genome import OutputWriter
    from semiseg.genome.labels import load_scheme
    from semiseg.genome.zooms import add_zoom_levels

    scheme = load_scheme("gene_structure")
    sizes = {"a": 9_001, "b": 7, "c": 6_000}
    rng = np.random.default_rng(res)
    with OutputWriter(tmp_path / "z", scheme, sizes, formats=("bigwig",), resolution=res,
                      signal_precision=precision) as w:
        for c, n in sizes.items():
            t = -(-n // res)
            post = np.repeat(rng.dirichlet(np.ones(len(scheme)), t // 20 + 1), 20, 0)[:t]
            w.add(c, np.array([[0, n, 0]]), post.astype(np.float32),
                  rng.random(t).astype(np.float32),
                  gaps=np.array([[1000, 2500]]) if c == "c" else None)
    for series in ("boundary", f"posterior.{scheme.names[1]}"):
        path = tmp_path / f"z.{series}.bw"
        levels = []
        bw = pyBigWig.open(str(path))
        with open(path, "rb") as fh:  # the zoom table: (level, 0, data, index) at 0x40
            fh.seek(0x40)
            n_levels = _zoom_levels(path)
            levels = [struct.unpack("<IIQQ", fh.read(24))[0] for _ in range(n_levels)]
        assert n_levels >= 5 and all(b == 4 * a for a, b in itertools.pairwise(levels))
        assert levels[-1] >= max(sizes.values()) > levels[-2]  # the last: whole chromosomes
        for c, n in sizes.items():
            v = np.asarray(bw.values(c, 0, n))
            for z in levels:
                for a in range(0, n, z):
                    x = v[a:a + z]
                    x = x[~np.isnan(x)]
                    if len(x):
                        for typ, f in (("mean", np.mean), ("min", np.min), ("max", np.max)):
                            got = bw.stats(c, a, min(n, a + z), type=typ)[0]
                            assert got == pytest.approx(f(x), rel=1e-5, abs=1e-7), \
                                (series, c, z, a, typ)
        bw.close()
        copy = tmp_path / "copy.bw"
        shutil.copy(path, copy)
        assert add_zoom_levels(copy, sizes, res) == levels


def test_merged_bigwigs_keep_full_zoom_levels(tmp_path):
    """semiseg merge (the pipeline's gather step) rewrites the merged bigWigs' zoom
    levels too: >= 5 (header bytes), the coarsest summarising whole chromosomes."""
    import pyBigWig

    from semiseg.annotate.merge import merge
    from semiseg.annotate.run import write_summary
    from semiseg.genome import OutputWriter
    from semiseg.genome.labels import load_scheme

    scheme = load_scheme("gene_structure")
    rng = np.random.default_rng(2)
    parts = []
    for name, n in (("A", 50_000), ("B", 20_000)):
        prefix = str(tmp_path / name)
        with OutputWriter(prefix, scheme, {name: n}, formats=("bed", "gff3", "bigwig"),
                          signal_precision=1e-2) as w:
            post = np.repeat(rng.dirichlet(np.ones(len(scheme)), n // 30 + 1), 30, 0)[:n]
            w.add(name, np.array([[0, n, 0]]), post.astype(np.float32),
                  rng.random(n).astype(np.float32))
        write_summary(f"{prefix}.summary.tsv", list(scheme.names), {},
                      {"version": "t", "model_hash": "h", "resolution": 1})
        parts.append(prefix)
    merge(parts, str(tmp_path / "m"))
    for series in ("boundary", f"posterior.{scheme.names[0]}"):
        path = tmp_path / f"m.{series}.bw"
        assert _zoom_levels(path) >= 5, series
        bw = pyBigWig.open(str(path))
        for c, n in (("A", 50_000), ("B", 20_000)):
            v = np.asarray(bw.values(c, 0, n))
            assert bw.stats(c, 0, n)[0] == pytest.approx(v.mean(), rel=1e-5)
        bw.close()


def test_bad_genetic_code_is_one_line_before_any_work(tmp_path):
    """--genetic-code 7 (no NCBI table 7): exit 2, one line naming the flag, no files."""
    import sys

    fasta = tmp_path / "x.fa"
    fasta.write_text(">x\nACGT\n")
    r = subprocess.run([sys.executable, "-m", "semiseg.cli", "annotate", "--model", MODEL,
                        "--fasta", str(fasta), "--out", str(tmp_path / "o"),
                        "--genetic-code", "7", "--device", "cpu"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 2
    assert "semiseg: error: --genetic-code:" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.fa"]


def test_every_table_differs_from_the_standard_code_as_ncbi_lists():
    """Each table's differences from the standard code, as NCBI's genetic-code page
    lists them ("Differences from the Standard Code")."""
    want = {2: {"AGA": "*", "AGG": "*", "ATA": "M", "TGA": "W"},
            3: {"ATA": "M", "CTT": "T", "CTC": "T", "CTA": "T", "CTG": "T", "TGA": "W"},
            4: {"TGA": "W"},
            5: {"AGA": "S", "AGG": "S", "ATA": "M", "TGA": "W"},
            6: {"TAA": "Q", "TAG": "Q"},
            9: {"AAA": "N", "AGA": "S", "AGG": "S", "TGA": "W"},
            10: {"TGA": "C"},
            11: {},
            12: {"CTG": "S"}}
    for n, diff in want.items():
        table = genetic_code(n).table
        assert {c: a for c, a in table.items() if HAND[c] != a} == diff, n


def test_zoom_bins_in_batches_against_the_bases(monkeypatch):
    """ZoomBins summarises runs in batches (the finest level chosen from the first
    batch's mean run width): cut into batches of 7 runs or taken in one, the finest bins
    equal sums, min and max over the runs' bases."""
    from semiseg.genome import zooms

    rng = np.random.default_rng(3)
    sizes = {"a": 5_000, "b": 333, "c": 2_000}
    runs = []
    for tid, n in enumerate(sizes.values()):
        cuts = np.unique(np.concatenate([[0, n], rng.integers(1, n, 40)]))
        runs.append((tid, cuts[:-1], cuts[1:], rng.random(len(cuts) - 1)))
    per_base = [np.repeat(v, e - s) for _, s, e, v in runs]
    for flush in (7, 1 << 20):
        monkeypatch.setattr(zooms.ZoomBins, "FLUSH", flush)
        zb = zooms.ZoomBins(sizes)
        for tid, s, e, v in runs:
            for i in range(0, len(s), 5):  # added in pieces, as the writer does
                zb.add(tid, s[i:i + 5], e[i:i + 5], v[i:i + 5])
        count, lo, hi, total, squares = zb.stats()
        z = zb.z
        assert z in zooms.level_sizes(max(sizes.values()), 1)
        at = [np.arange(0, len(x), z) for x in per_base]
        for got, f in ((count, lambda x, i: np.diff(np.append(i, len(x)))),
                       (lo, np.minimum.reduceat), (hi, np.maximum.reduceat),
                       (total, np.add.reduceat), (squares, lambda x, i: np.add.reduceat(x * x, i))):
            want = np.concatenate([f(x, i) for x, i in zip(per_base, at)])
            np.testing.assert_allclose(got, want, err_msg=f"flush {flush}")


def test_provenance_of_a_run_folder_and_a_shipped_name(tmp_path):
    """--model as a run folder or a shipped model's name: the provenance names and hashes
    the checkpoint file read (FOLDER/best.pt; the shipped file)."""
    from semiseg.annotate import provenance

    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(MODEL, folder / "best.pt")
    with open(MODEL, "rb") as fh:
        want = hashlib.sha256(fh.read()).hexdigest()
    for given, path in ((str(folder), str(folder / "best.pt")), ("yeast", MODEL)):
        prov = provenance.collect({}, version="t", model=given, model_hash="h", fasta=None,
                                  tracks={}, regions=None, scheme="s", resolution=1,
                                  genetic_code=genetic_code(1))
        assert prov["inputs"]["model"]["sha256"] == want
        assert os.path.samefile(prov["inputs"]["model"]["path"], path)
        json.dumps(prov)  # JSON-able


def test_a_stop_codon_across_a_splice_junction_is_counted(tmp_path):
    """A gene whose codon split by an intron reads TAA (T | intron | AA): its protein
    has the '*' and the writer lists the transcript (annotate warns with that list); a
    gene whose split codon is no stop is not listed."""
    from semiseg.genome import OutputWriter, labels_to_segments
    from semiseg.genome.labels import load_scheme

    scheme = load_scheme("gene_structure")
    idx = {n: i for i, n in enumerate(scheme.names)}
    intron = "GT" + "C" * 20 + "AG"
    for second, want, listed in (("AA", "M*KK", True), ("CA", "MSKK", False)):
        exon1, exon2 = "ATGT", second + "AAAAAGTAA"  # ATG T|AA AAA AAG TAA
        seq = "C" * 20 + exon1 + intron + exon2 + "C" * 20
        lab = np.full(len(seq), idx["intergenic"])
        a = 20
        lab[a:a + 4] = idx["CDS+"]
        lab[a + 4:a + 4 + len(intron)] = idx["intron+"]
        b = a + 4 + len(intron)
        lab[b:b + len(exon2)] = idx["CDS+"]
        prefix = tmp_path / f"g{second}"
        with OutputWriter(prefix, scheme, {"s": len(seq)}, formats=("gff3",),
                          proteins=True) as w:
            w.add("s", labels_to_segments(lab), sequence=seq)
        desc, protein = _fasta(f"{prefix}.proteins.fa")["s:gene1.t1"]
        assert protein == want
        assert w.internal_stop_genes == (["s:gene1.t1"] if listed else [])
