"""Genes not called for their score (semiseg/genemodel/genefilter.py, annotate
--min-gene-score): the gene spans against a regular-expression walk over each strand,
the scores against a loop over bases, and annotate's output against the GFF3 scores of
the same run without the filter."""

import re

import numpy as np
import pytest
from seqs import SHIPPED_MODEL, chrI_piece

from semiseg.errors import SemisegError
from semiseg.genemodel.genefilter import drop_masked_genes, drop_weak_genes, gene_spans
from semiseg.genome import load_scheme

SCHEME = load_scheme("gene_structure")
ROLES, STRANDS = list(SCHEME.roles), list(SCHEME.strands)


def oracle_spans(lab):
    """Genes per strand: a step is E (CDS or UTR of the strand), N (ncRNA of the
    strand), I (intron of the strand) or x; a gene is E..E over E and I, or N..N over
    N and I, leftmost-longest."""
    spans = []
    for strand in ("+", "-"):
        chars = []
        for lb in lab.tolist():
            r = ROLES[lb] if lb >= 0 else None
            if lb < 0 or STRANDS[lb] != strand:
                chars.append("x")
            else:
                chars.append({"CDS": "E", "UTR": "E", "ncRNA": "N", "intron": "I"}.get(r, "x"))
        for m in re.finditer(r"E(?:[EI]*E)?|N(?:[NI]*N)?", "".join(chars)):
            spans.append((m.start(), m.end()))
    return sorted(spans)


def random_labels(rng, n):
    """Runs of random labels (and gaps), long enough to make genes of several exons."""
    out = []
    while len(out) < n:
        lb = int(rng.integers(-1, len(ROLES)))
        if rng.random() < 0.5:  # mostly one strand's gene labels, to make real genes
            lb = int(rng.choice([SCHEME.role_label(r, "+") for r in ("CDS", "intron", "UTR")]))
        out += [lb] * int(rng.integers(1, 6))
    return np.array(out[:n], np.int64)


@pytest.mark.parametrize("seed", range(20))
def test_gene_spans_and_scores(seed):
    rng = np.random.default_rng(seed)
    lab = random_labels(rng, 300)
    spans = gene_spans(lab, ROLES, STRANDS)
    assert sorted(spans) == oracle_spans(lab)
    post = rng.dirichlet(np.ones(len(ROLES)), size=len(lab)).astype(np.float32)
    scores = [sum(float(post[t, lab[t]]) for t in range(lo, hi)) / (hi - lo)
              for lo, hi in spans]
    thr = float(np.median(scores)) if scores else 0.5
    want = lab.copy()
    for (lo, hi), s in zip(spans, scores):
        if s < thr:
            want[lo:hi] = SCHEME.background
    got = lab.copy()
    dropped = drop_weak_genes(got, post, ROLES, STRANDS, SCHEME.background, thr)
    assert got.tolist() == want.tolist()
    assert [(lo, hi) for lo, hi, _ in dropped] == [sp for sp, s in zip(spans, scores)
                                                    if s < thr]
    assert [s for _, _, s in dropped] == pytest.approx([s for s in scores if s < thr])


@pytest.mark.parametrize("seed", range(10))
def test_masked_genes_against_a_loop_over_bases(seed):
    """A gene is dropped where more than the threshold of its CDS bases (counted one by
    one) are lowercase; a sequence with no lowercase is never touched."""
    rng = np.random.default_rng(100 + seed)
    lab = random_labels(rng, 300)
    seq = "".join(rng.choice(list("ACGTacgt")) for _ in range(len(lab)))
    cds = [SCHEME.role_label("CDS", st) for st in "+-"]
    spans = gene_spans(lab, ROLES, STRANDS)
    shares = []
    for lo, hi in spans:
        n = [t for t in range(lo, hi) if lab[t] in cds]
        shares.append(sum(seq[t].islower() for t in n) / len(n) if n else 0.0)
    thr = float(np.median(shares)) if shares else 0.5
    want = lab.copy()
    for (lo, hi), s in zip(spans, shares):
        if s > thr:
            want[lo:hi] = SCHEME.background
    got = lab.copy()
    dropped = drop_masked_genes(got, seq, cds, ROLES, STRANDS, SCHEME.background, thr)
    assert got.tolist() == want.tolist()
    assert [s for _, _, s in dropped] == pytest.approx([s for s in shares if s > thr])
    same = lab.copy()
    assert drop_masked_genes(same, seq.upper(), cds, ROLES, STRANDS, SCHEME.background,
                             0.0) == []
    assert same.tolist() == lab.tolist()


def _genes(path):
    """(start, end, strand, score) of the gene rows of a GFF3."""
    out = []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 9 and f[2] == "gene":
            out.append((int(f[3]) - 1, int(f[4]), f[6], float(f[5])))
    return out


def test_annotate_min_gene_score(tmp_path):
    """The genes written with --min-gene-score T are those of the run without it whose
    GFF3 score is >= T, at the same places; the others' bases are intergenic in the
    BED. Out of [0, 1]: a one-line error."""
    from semiseg.annotate.run import annotate
    from semiseg.genemodel.generules import gene_rules

    seq, fasta = chrI_piece(tmp_path, 30000, 60000)
    off = tmp_path / "off"
    annotate(SHIPPED_MODEL, fasta, str(off), device="cpu", first_atg=False, long_orfs=0)
    genes = _genes(f"{off}.gff3")
    scores = sorted(g[3] for g in genes)
    assert len(scores) >= 4 and scores[0] < scores[-1]
    # a threshold between two written scores (3 decimals), away from either
    k = max(i for i in range(len(scores) - 1) if scores[i + 1] > scores[i])
    thr = (scores[k] + scores[k + 1]) / 2
    on = tmp_path / "on"
    annotate(SHIPPED_MODEL, fasta, str(on), device="cpu", first_atg=False, long_orfs=0,
             min_gene_score=thr)
    kept = _genes(f"{on}.gff3")
    assert [g[:3] for g in kept] == [g[:3] for g in genes if g[3] >= thr]
    assert 0 < len(kept) < len(genes)
    bed = [line.split("\t") for line in open(f"{on}.bed") if not line.startswith(("#", "track"))]
    for a, b, _, s in genes:
        if s < thr:  # every base of a dropped gene is intergenic now
            assert all(r[3] == "intergenic" for r in bed
                       if int(r[1]) < b and int(r[2]) > a), (a, b)
    with pytest.raises(SemisegError, match="--min-gene-score: expected a posterior"):
        gene_rules(SCHEME, 1, False, None, 0, None, 0.0, 1.5)
    chromatin = load_scheme({"name": "chromatin", "kind": "bed", "background": "quiet",
                             "labels": [{"name": "quiet"}, {"name": "active"}]})
    with pytest.raises(SemisegError, match="--min-gene-score: only a gene model"):
        gene_rules(chromatin, 200, False, None, 0, None, 0.0, 0.5)


def test_annotate_max_masked_cds(tmp_path):
    """The same piece with one gene's bases lowercased: with --max-masked-cds 0.5 the
    genes are those of the run without the option, less that gene, whose bases are
    intergenic; a gene a third masked stays. Out of [0, 1]: a one-line error."""
    from semiseg.annotate.run import annotate
    from semiseg.genemodel.generules import gene_rules

    seq, fasta = chrI_piece(tmp_path, 30000, 60000)
    off = tmp_path / "off"
    annotate(SHIPPED_MODEL, fasta, str(off), device="cpu", first_atg=False, long_orfs=0)
    genes = _genes(f"{off}.gff3")
    assert len(genes) >= 3
    (a, b, _, _), (c, d, _, _) = genes[0], genes[1]
    third = c + (d - c) // 3
    masked = seq[:a] + seq[a:b].lower() + seq[b:c] + seq[c:third].lower() + seq[third:]
    fasta = tmp_path / "masked.fa"
    fasta.write_text(">s\n" + masked + "\n")
    on = tmp_path / "on"
    annotate(SHIPPED_MODEL, str(fasta), str(on), device="cpu", first_atg=False, long_orfs=0,
             max_masked_cds=0.5)
    assert [g[:3] for g in _genes(f"{on}.gff3")] == [g[:3] for g in genes[1:]]
    bed = [line.split("\t") for line in open(f"{on}.bed") if not line.startswith(("#", "track"))]
    assert all(r[3] == "intergenic" for r in bed if int(r[1]) < b and int(r[2]) > a)
    with pytest.raises(SemisegError, match="--max-masked-cds: expected a share"):
        gene_rules(SCHEME, 1, False, None, 0, None, masked_given=1.5)
