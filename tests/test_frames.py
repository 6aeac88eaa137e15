"""The reading-frame gene model (genemodel/frames.py, genemodel/head.py) against independent rules.

The oracle is biology written out directly: a gene read 5' to 3' starts with ATG, is a
whole number of codons after its introns are spliced out, ends with a stop codon and
has no stop codon in frame before it; partial genes at a sequence's edges keep a frame
with no in-frame stop. Every segmentation the model allows (enumerated by a depth-first
search written here, not the CRF code) must be such a gene structure.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from semiseg.genemodel.frames import (
    INTRON_ANY,
    UNKNOWN,
    FrameLayout,
    base_codes,
    merge_runs,
)
from semiseg.genemodel.gold import GoldReport, frame_gold
from semiseg.genemodel.seqmask import sequence_allowed as _sequence_allowed
from semiseg.genome import LabelScheme
from semiseg.genome.gff import Transcript

STOP = {"TAA", "TAG", "TGA"}
COMP = str.maketrans("ACGTN", "TGCAN")


def scheme(introns: bool = True, min_intron: int = 1) -> LabelScheme:
    labels = [{"name": "intergenic", "strand": "."},
              {"name": "CDS+", "role": "CDS", "strand": "+"},
              {"name": "CDS-", "role": "CDS", "strand": "-"}]
    if introns:
        labels += [{"name": "intron+", "role": "intron", "strand": "+"},
                   {"name": "intron-", "role": "intron", "strand": "-"}]
    return LabelScheme.from_dict({"name": "t", "kind": "gene_structure",
                                  "background": "intergenic", "labels": labels,
                                  "min_intron": min_intron})


def rc(s: str) -> str:
    return s.translate(COMP)[::-1]


# ------------------------------------------------------------------ the oracle
def check_gene(seq: str, segs: list[tuple[str, int, int]], left_edge: bool, right_edge: bool):
    """segs: (kind, start, end) in transcript order on a plus-strand sequence. Raises
    AssertionError when the segments are not a gene structure."""
    kinds = [k for k, _, _ in segs]
    assert "start" not in kinds[1:], "a start codon inside a gene"
    assert "stop" not in kinds[:-1], "a stop codon inside a gene"
    if not left_edge:
        assert kinds[0] == "start", "a gene that does not begin with its start codon"
    if not right_edge:
        assert kinds[-1] == "stop", "a gene that does not end with its stop codon"
    # every intron (a run of intron pieces) is GT..AG, unless cut by the sequence's edge
    i = 0
    while i < len(segs):
        if segs[i][0] != "intron":
            i += 1
            continue
        j = i
        while j + 1 < len(segs) and segs[j + 1][0] == "intron":
            j += 1
        a, b = segs[i][1], segs[j][2]
        assert (i == 0 and left_edge) or seq[a:a + 2] == "GT", f"intron {seq[a:b]} not GT.."
        assert (j == len(segs) - 1 and right_edge) or seq[b - 2:b] == "AG", \
            f"intron {seq[a:b]} not ..AG"
        i = j + 1
    spliced = "".join(seq[a:b] for k, a, b in segs if k != "intron")
    # exon of each spliced base: a codon across an intron is not checked for a stop
    # (the model does not exclude stop codons split by a splice site; docs/gene_model.md)
    exon = [i for i, (k, a, b) in enumerate(segs) if k != "intron" for _ in range(b - a)]
    joins = {i for i, (k, _, _) in enumerate(segs) if k == "intron"}

    def split(i):
        return any(j in joins for j in range(exon[i], exon[i + 2]))

    if kinds[0] == "start":
        assert segs[0][2] - segs[0][1] == 3
        phases = [0]
        assert spliced.startswith("ATG"), spliced
    else:
        phases = [0, 1, 2]
    if kinds[-1] == "stop":
        assert segs[-1][2] - segs[-1][1] == 3 and spliced[-3:] in STOP
    ok = []
    for ph in phases:
        starts = list(range(ph, len(spliced) - 2, 3))
        last_is_stop = kinds[-1] == "stop"
        if last_is_stop and (len(spliced) - ph) % 3:
            continue
        inner = starts[:-1] if last_is_stop else starts
        if any(spliced[i:i + 3] in STOP and not split(i) for i in inner):
            continue
        ok.append(ph)
    assert ok, f"no reading frame fits {spliced}"


def check_structure(seq: str, labels: list[tuple[str, str, int, int]]):
    """labels: (kind, strand, start, end) segments left to right, kind in outside/start/
    CDS/stop/intron."""
    T = len(seq)
    for strand in "+-":
        runs, cur = [], []
        for seg in labels:
            if seg[1] == strand and seg[0] != "outside":
                cur.append(seg)
            elif cur:
                runs.append(cur)
                cur = []
        if cur:
            runs.append(cur)
        for run in runs:
            a, b = run[0][2], run[-1][3]
            if strand == "+":
                check_gene(seq, [(k, s, e) for k, _, s, e in run], a == 0, b == T)
            else:  # reverse-complement: the gene read 5' to 3'
                flipped = [(k, T - e, T - s) for k, _, s, e in reversed(run)]
                check_gene(rc(seq), flipped, b == T, a == 0)


def sequence_allowed(lay, codes: np.ndarray) -> np.ndarray:
    """The mask of one sequence's base codes, as numpy."""
    return _sequence_allowed(lay, torch.as_tensor(codes)).numpy()


def allowed_segmentations(lay, seq, K):
    """Every segmentation with a finite score: depth-first over segments."""
    T = len(seq)
    al = sequence_allowed(lay, base_codes(seq)).tolist()
    tm = np.isfinite(lay.transition_mask())
    dm = np.isfinite(lay.duration_mask(K))
    bm = lay.begin_mask()
    C = len(lay)
    nxt = {(r, p): [c for c in range(C) if p is None or tm[r, p, c]]
           for r in range(3) for p in [None, *range(C)]}
    out = []

    def dfs(pos, prev, acc):
        if pos == T:
            out.append(list(acc))
            return
        for d in range(1, min(K, T - pos) + 1):
            for c in nxt[((d - 1) % 3, prev)]:
                if dm[d - 1, c] and bm[pos % 3, c] and all(al[u][c]
                                                            for u in range(pos, pos + d)):
                    acc.append((c, pos, pos + d))
                    dfs(pos + d, c, acc)
                    acc.pop()

    dfs(0, None, [])
    return out


def named(lay, seg):
    out = []
    for c, a, b in seg:
        k = lay.kind_names[lay.kind[c]]
        if k.startswith("outside:"):
            out.append(("outside", ".", a, b))
        else:  # the oracle sees intron pieces; splice sites are checked on the bases
            kind = "intron" if k[:-1] in ("donor", "acceptor") else k[:-1]
            out.append((kind, k[-1], a, b))
    return out


SEQS = ["ATGAAATAG", "CTAGGCATT", "ATGTAAGTT", "TTATGCATT", "ATGATGTAG", "ATGGTAAGA",
        "ATGTCTACAT", "TAGTAAGCTA", "TAGCTTACTA"]


def random_seq(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ACGT") for _ in range(n))


@pytest.mark.parametrize("seq", SEQS + [random_seq(i, 9) for i in range(2)])
def test_every_allowed_segmentation_is_a_gene_structure(seq):
    lay = FrameLayout.from_scheme(scheme())
    segs = allowed_segmentations(lay, seq, K=3)
    assert segs
    genes = 0
    for s in segs:
        check_structure(seq, named(lay, s))
        genes += any(lay.kind_names[lay.kind[c]].startswith("start") for c, _, _ in s)
    if seq in ("ATGAAATAG", "CTAGGCATT", "ATGATGTAG"):
        assert genes, "a complete gene is possible but none is allowed"
    if seq == "ATGATGTAG":  # ATG ATG TAG; never a start codon out of frame (TGA at 1)
        starts = {a for s in segs for c, a, _ in s
                  if lay.kind_names[lay.kind[c]] == "start+"}
        assert starts == {0}


def test_a_complete_gene_with_an_intron_is_allowed_exactly_in_frame():
    """ATG AA | intron | A TAA: spliced ATGAAATAA is a gene; with AA after the intron
    the spliced CDS is 10 bases and no labelling of these parts is allowed."""
    from semiseg.crf import log_partition

    lay = FrameLayout.from_scheme(scheme())
    kinds = np.asarray(lay.kind)

    def log_z(seq, parts):
        mask = np.zeros((len(seq), len(lay)), bool)
        for kind, a, b in parts:
            if kind == "intron+":  # donor, inside, acceptor
                mask[a] = kinds == lay.kind_of("donor+")
                mask[a + 1:b - 1] = kinds == lay.kind_of("intron+")
                mask[b - 1] = kinds == lay.kind_of("acceptor+")
                continue
            mask[a:b] = kinds == lay.kind_of(kind)
        mask &= sequence_allowed(lay, base_codes(seq))
        K = 8
        return float(log_partition(torch.zeros(1, len(seq), len(lay), dtype=torch.float64),
                                   torch.tensor(lay.transition_mask()),
                                   torch.tensor(lay.duration_mask(K)),
                                   allowed=torch.as_tensor(mask)[None], backend="torch",
                                   proj_start=torch.tensor(np.where(lay.begin_mask(), 0.0, -1e4)[
                                       np.arange(len(seq)) % 3])[None]))

    good = "ATGAAGTAAGATAA"  # intron GTAAG, 5 bp
    assert np.isfinite(log_z(good, [("start+", 0, 3), ("CDS+", 3, 5), ("intron+", 5, 10),
                                    ("CDS+", 10, 11), ("stop+", 11, 14)]))
    bad = "ATGAAGTAGAATAA"  # intron GTAG, then AA: spliced ATGAAAATAA, 10 bases
    assert np.isneginf(log_z(bad, [("start+", 0, 3), ("CDS+", 3, 5), ("intron+", 5, 9),
                                   ("CDS+", 9, 11), ("stop+", 11, 14)]))
    # and a 7 bp intron (one whole codon's worth more) is fine again
    assert np.isfinite(log_z("ATGAAGTAAAAGATAA", [
        ("start+", 0, 3), ("CDS+", 3, 5), ("intron+", 5, 12), ("CDS+", 12, 13),
        ("stop+", 13, 16)]))
    # but not when it is not GT..AG (GCAAAAG)
    assert log_z("ATGAAGCAAAAGATAA", [
        ("start+", 0, 3), ("CDS+", 3, 5), ("intron+", 5, 12), ("CDS+", 12, 13),
        ("stop+", 13, 16)]) < -1e3


def test_introns_are_at_least_min_intron_long():
    lay = FrameLayout.from_scheme(scheme(min_intron=6))
    dm = lay.duration_mask(10)
    intron = np.asarray(lay.kind) == lay.kind_of("intron+")  # 6 = donor + 4 inside + acceptor
    assert np.isneginf(dm[:3, intron]).all() and (dm[3:, intron] == 0).all()
    assert (lay.duration_mask(3)[:, intron] == 0).all()  # K < min_intron: any chain
    for k in ("donor+", "acceptor-"):
        splice = np.asarray(lay.kind) == lay.kind_of(k)
        assert (dm[0, splice] == 0).all() and np.isneginf(dm[1:, splice]).all()


def test_sequence_allowed_against_a_direct_scan():
    rng = random.Random(0)
    lay = FrameLayout.from_scheme(scheme())
    seq = "".join(rng.choice("ACGTTAGN") for _ in range(60))
    al = sequence_allowed(lay, base_codes(seq))
    # batched: each row the mask of its own sequence
    al_t = _sequence_allowed(lay, torch.as_tensor(base_codes(seq)).repeat(2, 1))
    assert al_t.shape == (2,) + al.shape and (al_t.numpy() == al[None]).all()
    T = len(seq)
    for c, name in enumerate(lay.names):
        if lay.frame[c] < 0 or name.startswith("intron"):
            assert al[:, c].all()
            continue
        kind, f = name.split("_")
        f = int(f)
        pair = {"donor+": (0, "GT"), "acceptor+": (-1, "AG"), "acceptor-": (0, "CT"),
                "donor-": (-1, "AC")}.get(kind)
        if pair is not None:  # the label's base and its neighbour inside the intron
            for t in range(T):
                a = t + pair[0]
                assert al[t, c] == (a >= 0 and seq[a:a + 2] == pair[1]), (name, t)
            continue
        for t in range(T):
            cs = t - ((t - f) % 3)
            word = seq[cs:cs + 3] if cs >= 0 else ""
            is_stop = len(word) == 3 and (word in STOP if kind.endswith("+")
                                          else rc(word) in STOP)
            if kind.startswith("start"):
                want = len(word) == 3 and word == ("ATG" if kind.endswith("+") else "CAT")
            elif kind.startswith("stop"):
                want = is_stop
            else:  # a stop triplet's last base in the gene's direction only
                want = not (is_stop and t == (cs + 2 if kind.endswith("+") else cs))
            assert al[t, c] == want, (name, t, seq[max(0, t - 3):t + 4])


def _gold(seq, transcripts, sch=None):
    lay = FrameLayout.from_scheme(sch or scheme())
    lab = np.zeros(len(seq), np.int64)
    rep = GoldReport()
    return lay, frame_gold(lay, lab, transcripts, seq, report=rep), rep


def tx(strand, *blocks):
    return Transcript(id="t", chrom="c", strand=strand, type="mRNA",
                      cds=np.array(blocks, np.int64), exons=np.zeros((0, 2), np.int64),
                      utrs=np.zeros((0, 2), np.int64))


def test_gold_codes_of_genes_on_both_strands_and_through_an_intron():
    # + gene: ATG AAG [intron 25 bp] GGT TAA at 3..; - gene: rc(ATG CCC TGA) at 60
    intron = "GT" + "C" * 21 + "AG"
    plus = "ATGAA" + intron + "GGGTTAA"  # spliced ATG AAG GGT TAA
    minus = rc("ATGCCCTGA")
    seq = "CCC" + plus + "CC" + "C" * 10 + minus + "CCCC"
    p0 = 3
    m0 = seq.index(minus)
    t1 = tx("+", (p0, p0 + 5), (p0 + 5 + len(intron), p0 + len(plus)))
    t2 = tx("-", (m0, m0 + 9))
    assert seq[p0 + 5:p0 + 7] == "GT" and seq[p0 + 3 + len(intron):p0 + 5 + len(intron)] == "AG"
    lay, codes, rep = _gold(seq, [t1, t2])
    assert rep.kept == 2 and not rep.partial
    name = [lay.names[c] if c >= 0 else c for c in codes.tolist()]
    assert name[p0:p0 + 3] == [f"start+_{p0 % 3}"] * 3 and name[p0 + 3] == f"CDS+_{p0 % 3}"
    after = p0 + 5 + len(intron)  # 'G' of the exon after the intron: codon position 2
    assert all(n == INTRON_ANY["+"] for n in name[p0 + 6:after - 1])
    assert name[after] == f"CDS+_{(after - 2) % 3}"
    # the splice bases: the frame the CDS would continue in right after each
    assert name[p0 + 5] == f"donor+_{(p0 % 3 + 1) % 3}"
    assert name[after - 1] == f"acceptor+_{(after - 2) % 3}"
    assert name[p0 + len(plus) - 3:p0 + len(plus)] == [f"stop+_{(p0 + len(plus) - 3) % 3}"] * 3
    assert name[m0:m0 + 3] == [f"stop-_{m0 % 3}"] * 3
    assert name[m0 + 6:m0 + 9] == [f"start-_{m0 % 3}"] * 3 and name[m0 + 3] == f"CDS-_{m0 % 3}"
    assert name[0] == "intergenic"
    # flipping twice is the identity; the flip is the gold of the reverse complement
    assert (lay.flip(lay.flip(codes)) == codes).all()
    back = [tx("-", *[(len(seq) - b, len(seq) - a) for a, b in t1.cds[::-1]]),
            tx("+", (len(seq) - m0 - 9, len(seq) - m0))]
    _, codes_rc, _ = _gold(rc(seq), back)
    assert (lay.flip(codes) == codes_rc).all()


def test_gold_reports_and_leaves_unknown_what_it_cannot_use():
    seq = ("CC" + "ATGAAACCC" + "CC" + "ATGTAAAAATAG" + "CC" + "ATGAAAC" + "CCCCC" + "ATGAAA"
           + "TGA" + "CC")
    i1 = 2                       # no stop codon at the end (and none after it): unknown
    i2 = i1 + 9 + 2              # in-frame stop inside
    i3 = i2 + 12 + 2             # not a multiple of 3
    i4 = i3 + 7 + 5              # GTF style: CDS rows without the stop codon after them
    ts = [tx("+", (i1, i1 + 9)), tx("+", (i2, i2 + 12)), tx("+", (i3, i3 + 7)),
          tx("+", (i4, i4 + 6))]
    lay, codes, rep = _gold(seq, ts)
    assert rep.kept == 1 and rep.stop_added == 1
    assert rep.partial == {"no stop codon": 1, "in-frame stop codon inside": 1,
                           "CDS not a multiple of 3": 1}
    assert (codes[i1:i1 + 9] == UNKNOWN).all() and (codes[i2:i2 + 12] == UNKNOWN).all()
    assert lay.names[codes[i4 + 8]].startswith("stop+")
    assert "3 left unknown" in rep.line()


def test_gold_leaves_unknown_introns_not_gt_ag_and_codons_next_to_an_intron():
    good, odd = "GT" + "C" * 21 + "AG", "GC" + "C" * 21 + "AG"
    seq = "CC" + "ATGAA" + odd + "GGGTTAA" + "CC" + "ATG" + good + "AAGTAA" + "CC"
    i1, i2 = 2, 2 + 5 + len(odd) + 7 + 2
    ts = [tx("+", (i1, i1 + 5), (i1 + 5 + len(odd), i1 + 12 + len(odd))),
          tx("+", (i2, i2 + 3), (i2 + 3 + len(good), i2 + 9 + len(good)))]
    lay, codes, rep = _gold(seq, ts)
    assert rep.kept == 0 and rep.partial == {
        "an intron not GT..AG": 1, "start or stop codon split by or next to an intron": 1}
    for t in ts:
        assert (codes[t.cds[0][0]:t.cds[-1][1]] == UNKNOWN).all()


@pytest.mark.parametrize("strand", ["+", "-"])
def test_boundary_marginals_against_enumeration(strand):
    """FrameHead.marginals' boundary track: the probability that a gene or an exon edge
    lies at t, summed over every allowed segmentation enumerated here."""
    from semiseg.genemodel.head import FrameHead

    seq = "CATGAGTAAAGAATAA"  # ATG A [GTAAAG] AA TAA
    seq = seq if strand == "+" else rc(seq)
    sch = LabelScheme.from_dict({"name": "t", "kind": "gene_structure", "min_intron": 4,
                                 "background": "intergenic", "labels": [
                                     {"name": "intergenic", "strand": "."},
                                     {"name": f"CDS{strand}", "role": "CDS", "strand": strand},
                                     {"name": f"intron{strand}", "role": "intron",
                                      "strand": strand}]})
    lay = FrameLayout.from_scheme(sch)
    K = 6
    head = FrameHead(lay, max_duration=K, start_end=False)
    torch.manual_seed(1)
    R = torch.randn(1, len(seq), len(lay.channels), dtype=torch.float64)
    for ch in ("start", "stop", "donor", "acceptor"):
        ch += strand
        R[..., lay.channels.index(ch)] += 3
    onehot = torch.zeros(1, len(seq), 4, dtype=torch.float64)
    onehot[0, torch.arange(len(seq)), torch.as_tensor(base_codes(seq)).long()] = 1
    head.double()
    with torch.no_grad():
        head.transition.normal_()
        head.duration.normal_()
    em = torch.cat([R, onehot], -1)
    _, bnd = head.marginals(em)
    # brute force: each allowed segmentation's score straight from the emission channels
    emi = lay.expand_index()
    tr = (head.transition.detach()[lay.kind][:, lay.kind].numpy()
          + lay.transition_mask())
    du = head.duration.detach()[:, lay.kind].numpy() + lay.duration_mask(K)
    T = len(seq)
    weights, events = [], []
    for segs in allowed_segmentations(lay, seq, K):
        score, prev, ev = 0.0, None, set()
        for c, a, b in segs:
            score += sum(float(R[0, u, emi[u % 3, c]]) for u in range(a, b)) + du[b - a - 1, c]
            if prev is not None:
                score += tr[(b - a - 1) % 3, prev, c]
            prev = c
            kind = lay.kind_names[lay.kind[c]][:-1]
            if (kind, lay.strand[c]) in (("start", "+"), ("stop", "-")):
                ev.add(a)
            elif (kind, lay.strand[c]) in (("stop", "+"), ("start", "-")):
                ev.add(b)
            elif kind == {"+": "donor", "-": "acceptor"}.get(lay.strand[c]):
                ev.add(a)
            elif kind in ("donor", "acceptor"):
                ev.add(b)
        weights.append(score)
        events.append(ev)
    w = np.exp(np.asarray(weights) - max(weights))
    w /= w.sum()
    want = np.array([sum(p for p, ev in zip(w, events) if t in ev) for t in range(T)])
    want[0] = 1.0
    assert np.allclose(bnd[0].numpy(), np.clip(want, 0, 1), atol=1e-8)
    assert want[1:].max() > 0.3  # the gene's edges carry real probability


def test_of_overlapping_genes_the_longest_is_kept():
    seq = "ATGTTATAACATCC"  # + ATG TTA TAA on 0..9; - rc(TTATAACAT) = ATG TTA TAA on 3..12
    lay, codes, rep = _gold(seq, [tx("+", (0, 9)), tx("-", (3, 12))])
    # equal lengths: the leftmost is kept, the other unknown beyond it
    assert [lay.names[c][:-2] for c in codes[:9]] == ["start+"] * 3 + ["CDS+"] * 3 + ["stop+"] * 3
    assert (codes[9:12] == UNKNOWN).all() and (codes[12:] >= 0).all()
    assert rep.kept == 1 and rep.partial == {"overlapping a longer gene": 1}


def test_the_yeast_annotation_is_representable():
    """Every gold window of the real chrI is a segmentation the model allows."""
    from semiseg.crf import log_partition
    from semiseg.genemodel.gold import FrameGold
    from semiseg.genome import Fasta, read_annotation
    from semiseg.genome.gff import gff_transcripts, read_gff_rows

    sch = scheme()
    fa = Fasta(["data/yeast/chrI.fa"])
    gff = "data/yeast/yeast_chrI_chrII.gff3"
    sizes = {"chrI": fa.chrom_sizes["chrI"], "chrII": 813178}
    ann = read_annotation(gff, sch, sizes)
    rows, gtf = read_gff_rows(gff, sizes)
    gold = FrameGold(FrameLayout.from_scheme(sch), ann,
                     [t for t in gff_transcripts(rows, gtf, sch) if t.chrom == "chrI"], fa)
    lay = gold.layout
    K = 16
    tm = torch.tensor(lay.transition_mask())
    dm = torch.tensor(lay.duration_mask(K))
    starts = list(range(0, sizes["chrI"] - 20000, 20011))
    masks = []
    for a in starts:
        codes = gold.labels("chrI", a, a + 20000)
        al = sequence_allowed(lay, base_codes(fa.fetch("chrI", a, a + 20000)))
        masks.append(torch.as_tensor(al & lay.gold_mask(codes)))
    allowed = torch.stack(masks)
    z = log_partition(torch.zeros(*allowed.shape, dtype=torch.float64), tm, dm,
                      allowed=allowed)
    assert torch.isfinite(z).all()
    assert gold.report.kept > 100  # chrI's usable genes are in those windows


def test_frame_head_decodes_gene_structures_only():
    from semiseg.genemodel.head import FrameHead

    rng = random.Random(3)
    seq = "".join(rng.choice("ACGT") for _ in range(400))
    lay = FrameLayout.from_scheme(scheme())
    head = FrameHead(lay, max_duration=40)
    torch.manual_seed(0)
    R = torch.randn(2, len(seq), len(lay.channels)) * 2
    R[..., lay.channels.index("start+")] += 3  # encourage genes
    R[..., lay.channels.index("start-")] += 3
    onehot = torch.zeros(2, len(seq), 4)
    codes = torch.as_tensor(base_codes(seq)).long()
    onehot[:, torch.arange(len(seq)), codes] = 1
    em = torch.cat([R, onehot], -1)
    for seg in (head.decode_internal(em, torch.tensor([400, 400])),
                head.decode_posterior_internal(em, torch.tensor([400, 400]))):
        for b in range(2):
            check_structure(seq, named(lay, [(c, s, s + d) for s, d, c in seg.segments[b]]))
    # posterior decoding: each base's expected correctness summed, at most one per base
    best = head.decode(em, torch.tensor([400, 400]))
    assert float(best.score.max()) <= 400 + 1e-3
    # one posterior pass gives what decode and marginals give separately
    seg2, post2, bnd2 = head.decode_with_marginals(em, torch.tensor([400, 300]))
    seg1 = head.decode(em, torch.tensor([400, 300]))
    assert torch.equal(seg1.labels, seg2.labels) and seg1.segments == seg2.segments
    # its segments are the internal path's, neighbours of one scheme label merged, and
    # cover each sequence's length exactly
    inner = head.decode_posterior_internal(em, torch.tensor([400, 300]))
    for b, n in enumerate((400, 300)):
        assert seg1.segments[b] == merge_runs(inner.segments[b], lay.scheme_label)
        assert sum(d for _, d, _ in seg1.segments[b]) == n
    post, bnd = head.marginals(em, torch.tensor([400, 300]))
    assert torch.equal(post, post2) and torch.equal(bnd, bnd2)
    assert torch.allclose(post[0].sum(-1), torch.ones(400), atol=1e-4)
    assert float(post[1, 300:].abs().max()) == 0.0
    assert 0 <= float(bnd.min()) and float(bnd.max()) <= 1
    gold = torch.full((2, 400), UNKNOWN)
    nll = head.nll(em, gold, torch.tensor([400, 300]))
    assert torch.allclose(nll, torch.zeros(2), atol=1e-3)  # unknown everywhere: log Z - log Z


def test_a_checkpoint_of_another_layout_is_a_clear_error():
    """A gene model saved before its labels changed (e.g. before splice-site labels)
    does not load into today's layout: one SemisegError, not a traceback."""
    from semiseg.checkpoint import build_model, load_checkpoint
    from semiseg.demo import SHIPPED_MODEL
    from semiseg.errors import SemisegError

    ckpt = load_checkpoint(SHIPPED_MODEL)
    build_model(ckpt)  # the shipped model fits
    ckpt.data["model"]["crf.start"] = torch.zeros(9)  # as in a model with 9 kinds
    with pytest.raises(SemisegError, match="retrain"):
        build_model(ckpt)


def _intron_friendly(lay, seq: str, seed: int):
    """Random float64 channels (seeded) with the splice-site channels raised so that
    introns are likely, the one-hot of `seq`, and the two as the head's emissions."""
    torch.manual_seed(seed)
    R = torch.randn(1, len(seq), len(lay.channels), dtype=torch.float64) * 2
    for ch in ("donor+", "acceptor+", "donor-", "acceptor-"):
        R[..., lay.channels.index(ch)] += 4
    onehot = torch.zeros(1, len(seq), 4, dtype=torch.float64)
    onehot[:, torch.arange(len(seq)), torch.as_tensor(base_codes(seq)).long()] = 1
    return R, onehot, torch.cat([R, onehot], -1)


def test_intron_penalty_is_a_score_taken_from_each_intron():
    """annotate.intron_penalty b: the same distribution as b taken from the emission of
    each intron's left splice base (a 1-bp segment, so once per intron), and a large b
    leaves no intron in the decoded structure."""
    from semiseg.genemodel.head import FrameHead

    rng = random.Random(5)
    seq = "".join(rng.choice("ACGT") for _ in range(300))
    lay = FrameLayout.from_scheme(scheme())
    head = FrameHead(lay, max_duration=40).double()
    R, onehot, em = _intron_friendly(lay, seq, seed=1)
    lengths = torch.tensor([300])
    b = 1.7
    R2 = R.clone()
    R2[..., lay.channels.index("donor+")] -= b  # left splice bases: donor +, acceptor -
    R2[..., lay.channels.index("acceptor-")] -= b
    want_z = head.log_partition(torch.cat([R2, onehot], -1), lengths, backend="torch")
    want_post, _ = head.marginals(torch.cat([R2, onehot], -1), lengths, backend="torch")
    plain_post, _ = head.marginals(em, lengths, backend="torch")
    head.intron_penalty = b
    got_z = head.log_partition(em, lengths, backend="torch")
    got_post, _ = head.marginals(em, lengths, backend="torch")
    assert torch.allclose(got_z, want_z, atol=1e-9)
    assert torch.allclose(got_post, want_post, atol=1e-9)
    intron = [lay.scheme_label[c] for c in range(len(lay))
              if lay.kind_names[lay.kind[c]].startswith("intron")]
    assert float(plain_post[0][:, sorted(set(intron))].sum()) > 1.0  # introns were likely
    head.intron_penalty = 1e4
    seg = head.decode_internal(em, lengths)
    names = [lay.kind_names[lay.kind[c]] for _, _, c in seg.segments[0]]
    assert not {"donor+", "acceptor-"} & set(names)  # no intron begins in the sequence
    # (one cut by the sequence's left end has no left splice base to penalise)
    first_exon = next(i for i, n in enumerate(names) if n[:-1] not in ("intron", "acceptor",
                                                                       "donor"))
    assert not [n for n in names[first_exon:] if n[:-1] in ("intron", "acceptor", "donor")]


def test_the_gene_model_needs_room_for_a_codon():
    """K < 3 cannot hold a start or stop codon segment: a one-line error, not a model
    that can never place a complete gene."""
    import pytest

    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError

    with pytest.raises(SemisegError, match="crf.max_duration.*at least 3"):
        build_model(load_config("configs/demo.yaml", ["crf.max_duration=2"]), 4, 5)
    build_model(load_config("configs/demo.yaml", ["crf.max_duration=3"]), 4, 5)


def _branch_case():
    """A 320-bp sequence of branch points, one-off ones, splice sites and random bases,
    a double FrameHead with a branch matrix of consensus TACTAAC, intron-friendly
    emissions, and the weak acceptors found by walking the string (test_sites)."""
    import sys

    sys.path.insert(0, "tests")
    from test_sites import CONSENSUS, weak_scan

    from semiseg.genemodel.head import FrameHead

    rng = random.Random(8)
    parts = []
    while sum(map(len, parts)) < 320:  # branch points, one-off ones, and splice sites
        parts.append(rng.choice([CONSENSUS, "TACTTAC", "GTTAGTA", "GTTAGTT",
                                 "".join(rng.choice("ACGT") for _ in range(30))]))
    seq = "".join(parts)[:320]
    lay = FrameLayout.from_scheme(scheme())
    head = FrameHead(lay, max_duration=40, site_scores=True).double()
    pwm = torch.full((4, 7), -1.0)
    for j, base in enumerate(CONSENSUS):
        pwm["ACGT".index(base), j] = 1.5
    head.sites.set({"branch": pwm})
    R, onehot, em = _intron_friendly(lay, seq, seed=2)
    weak = weak_scan(seq)
    assert weak["+"].any() and (~weak["+"]).any() and weak["-"].any() and (~weak["-"]).any()
    return lay, head, R, onehot, em, torch.tensor([len(seq)]), weak


def _weak_acceptors_taken(lay, R, weak, b):
    """R with b taken from the acceptor channel of each strand at its weak positions."""
    R2 = R.clone()
    for st in "+-":
        w = torch.as_tensor(weak[st])
        R2[0, w, lay.channels.index(f"acceptor{st}")] -= b
    return R2


def _acceptors(lay, seg):
    return [(s, lay.kind_names[lay.kind[c]]) for s, _, c in seg.segments[0]
            if lay.kind_names[lay.kind[c]] in ("acceptor+", "acceptor-")]


def test_branch_penalty_is_a_score_taken_from_introns_without_a_branch_point():
    """annotate.branch_penalty b: the same distribution as b taken from the acceptor
    channel wherever no 7-mer 10-80 bp upstream (transcript direction) is within one base
    of the branch consensus (walked on the string), and a large b leaves no intron ending
    at such an acceptor in the decoded structure."""
    lay, head, R, onehot, em, lengths, weak = _branch_case()
    b = 2.3
    want_z = head.log_partition(torch.cat([_weak_acceptors_taken(lay, R, weak, b), onehot],
                                          -1), lengths, backend="torch")
    plain_z = head.log_partition(em, lengths, backend="torch")
    head.branch_penalty = b
    got_z = head.log_partition(em, lengths, backend="torch")
    assert torch.allclose(got_z, want_z, atol=1e-9)
    assert float(plain_z - got_z) > 1e-3  # it took something
    head.branch_penalty = 1e4
    acceptors = _acceptors(lay, head.decode_internal(em, lengths))
    assert acceptors  # introns still decoded, at acceptors with a branch point
    for s, kind in acceptors:
        assert not weak[kind[-1]][s], (s, kind)


def test_infinite_branch_penalty_is_a_rule():
    """annotate.branch_penalty inf: no intron may end at an acceptor without a branch point
    (the allowed mask): log Z equals its limit, the model's with 1e4 taken from the
    acceptor channel at the weak positions found on the string (in float64 such paths
    add exactly nothing), it is below log Z at b = 4 (the rule removes paths a finite
    penalty keeps), and the decoded introns end at strong acceptors."""
    lay, head, R, onehot, em, lengths, weak = _branch_case()
    want_z = head.log_partition(
        torch.cat([_weak_acceptors_taken(lay, R, weak, 1e4), onehot], -1), lengths,
        backend="torch")
    head.branch_penalty = 4.0
    four_z = head.log_partition(em, lengths, backend="torch")
    head.branch_penalty = math.inf
    got_z = head.log_partition(em, lengths, backend="torch")
    assert torch.isfinite(got_z).all()
    assert torch.allclose(got_z, want_z, atol=1e-9)
    assert float(four_z - got_z) > 1e-6
    acceptors = _acceptors(lay, head.decode_internal(em, lengths))
    assert acceptors
    for s, kind in acceptors:
        assert not weak[kind[-1]][s], (s, kind)


def _chrii_gold():
    """chrII's FASTA, transcripts and FrameGold (min_intron 60)."""
    from semiseg.genemodel.gold import FrameGold
    from semiseg.genome import Fasta, read_annotation
    from semiseg.genome.gff import gff_transcripts, read_gff_rows

    sch = scheme(min_intron=60)
    fa = Fasta(["data/yeast/chrII.fa"])
    gff = "data/yeast/yeast_chrI_chrII.gff3"
    sizes = {"chrI": 230208, "chrII": fa.chrom_sizes["chrII"]}
    ann = read_annotation(gff, sch, sizes)
    rows, gtf = read_gff_rows(gff, sizes)
    tx = [t for t in gff_transcripts(rows, gtf, sch) if t.chrom == "chrII"]
    gold = FrameGold(FrameLayout.from_scheme(sch), ann, tx, fa)
    return fa, tx, gold


def _gold_log_z(fa, gold, w, K: int = 256) -> float:
    """log Z of the grammar alone (zero scores, float64), masked to window w's gold
    labels: -inf exactly when no segmentation of the window holds its gold labelling."""
    from semiseg.crf import log_partition

    lay = gold.layout
    al = sequence_allowed(lay, base_codes(fa.fetch(w.chrom, w.start, w.end)))
    allowed = torch.as_tensor(al & lay.gold_mask(gold.labels(w.chrom, w.start, w.end)))
    return float(log_partition(torch.zeros(1, *allowed.shape, dtype=torch.float64),
                               torch.tensor(lay.transition_mask()),
                               torch.tensor(lay.duration_mask(K)), allowed=allowed[None]))


def test_window_edges_are_moved_out_of_codons_and_introns():
    """A training window whose edge cuts a stop codon or an intron (chrII's own genes,
    min_intron 60, K = 256) has a gold labelling no segmentation can hold (log Z of the
    gold-masked model is -inf: training stopped with an infinite loss); after
    train.data.clear_of_rigid every such window is representable, and each window
    only shrank, by less than the piece it left."""
    from semiseg.train.data import Window, clear_of_rigid

    fa, tx, gold = _chrii_gold()
    tx = [t for t in tx if len(t.cds)]
    edges = []  # the middle of every intron, and the middle base of 12 stop codons
    for t in tx:
        cds = sorted(map(tuple, t.cds.tolist()))
        edges += [(a_end + b_start) // 2 for (_, a_end), (b_start, _) in zip(cds, cds[1:])]
    for t in tx[:12]:
        cds = t.cds.tolist()
        edges.append(max(e for _, e in cds) - 2 if t.strand == "+"
                     else min(s for s, _ in cds) + 1)
    L = fa.chrom_sizes["chrII"]
    windows = [w for p in edges for w in (Window("chrII", max(0, p - 1500), p),
                                          Window("chrII", p, min(L, p + 1500)))]
    def log_z(ws):
        return np.array([_gold_log_z(fa, gold, w) for w in ws])

    assert np.isinf(log_z(windows)).sum() >= len(edges)  # each edge breaks a window
    moved, n = clear_of_rigid(gold, windows)
    assert n >= len(edges) and len(moved) == len(windows)
    assert np.isfinite(log_z(moved)).all()
    for w, m in zip(windows, moved):
        assert w.start <= m.start < m.end <= w.end
        assert (m.start - w.start) + (w.end - m.end) < 1100  # at most one intron's worth


@pytest.mark.parametrize("min_intron", [1, 8, 9])
def test_the_decode_chains_short_segments_into_the_same_labels(min_intron):
    """The posterior decode runs with K' = chain_duration(K): the best per-base labels and
    score of a mask-only decode with K' are those with K (float64, the reference
    backend), and one step shorter than K' loses some (so the check can fail)."""
    from semiseg.crf import viterbi
    from semiseg.genemodel.frames import MISALIGNED

    lay = FrameLayout.from_scheme(scheme(min_intron=min_intron))
    K, B, T = 40, 24, 160
    K2 = lay.chain_duration(K)
    m = max(2, min_intron - 2)
    assert K2 == {1: 4, 8: 11, 9: 15}[min_intron] and K2 >= m
    tmask = torch.as_tensor(lay.transition_mask())
    proj = torch.where(torch.as_tensor(lay.begin_mask()), 0.0, MISALIGNED).double()
    proj = proj[torch.arange(T) % 3].expand(B, T, -1)
    g = torch.Generator().manual_seed(min_intron)
    post = torch.rand(B, T, len(lay), generator=g, dtype=torch.float64)
    kinds = [lay.kind_names[k] for k in lay.kind]
    post[..., [i for i, k in enumerate(kinds) if k.startswith("intron")]] *= 2.5
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)

    def decode(k):
        return viterbi(post, tmask, torch.as_tensor(lay.duration_mask(k)), lengths,
                       proj_start=proj, backend="torch")

    full, short = decode(K), decode(K2)
    assert torch.allclose(short.score, full.score, rtol=0, atol=1e-9)
    assert torch.equal(short.labels, full.labels)
    assert max(d for segs in short.segments for _, d, _ in segs) <= K2
    if K2 > 3:  # one step shorter: some intron run can no longer keep its one label
        assert bool((decode(K2 - 1).score < full.score - 1e-9).any())


def test_window_edges_may_cut_deep_inside_an_intron():
    """A window may begin or end inside an intron where both pieces keep at least the
    shortest inside segment (m = min_intron - 2 = 58 bp; chrII's 128-bp intron at
    170,679): oracle, the gold-masked log-partition of the windows on each side (their
    other edges at safe cuts) is finite at every cut safe_cuts allows around the
    intron, and -inf one base closer to either splice base, so the rule is exact."""
    from semiseg.train.data import Window

    fa, _, gold = _chrii_gold()
    cuts = gold.safe_cuts("chrII")

    def finite(w):
        return bool(np.isfinite(_gold_log_z(fa, gold, w)))

    def near(q, step):
        while not cuts[q]:
            q += step
        return q

    def both_sides(p):
        return (finite(Window("chrII", near(p - 300, -1), p)),
                finite(Window("chrII", p, near(p + 300, 1))))

    a, b = 170679, 170807  # donor base .. acceptor base + 1
    assert gold.labels("chrII", a - 1, a + 1)[0] >= 0 > gold.labels("chrII", a + 1, a + 2)[0]
    m = 58
    inner = [p for p in range(a + 1, b) if cuts[p]]
    assert inner == list(range(a + 1 + m, b - m))  # 10 cuts: the pieces keep >= m bp
    for p in [q for q in range(a - 3, b + 4) if cuts[q]]:
        assert both_sides(p) == (True, True), p
    assert both_sides(a + m) == (False, True)  # one base short on the left piece
    assert both_sides(b - m) == (True, False)  # ... and on the right


def parts_mask(lay, seq, parts) -> np.ndarray:
    """(len(seq), labels) bool: the labels of `lay` each base may take to follow `parts`
    (kind, start, end), within the sequence mask. An "intron" part is the splice labels
    at its ends and the inside between."""
    kinds = np.asarray(lay.kind)
    mask = np.zeros((len(seq), len(lay)), bool)
    for kind, a, b in parts:
        if kind.startswith("intron"):
            s = kind[-1]
            left, right = ("donor", "acceptor") if s == "+" else ("acceptor", "donor")
            mask[a] = kinds == lay.kind_of(left + s)
            mask[a + 1:b - 1] = kinds == lay.kind_of(kind)
            mask[b - 1] = kinds == lay.kind_of(right + s)
            continue
        mask[a:b] = kinds == lay.kind_of(kind)
    return mask & sequence_allowed(lay, base_codes(seq))


def _parts_log_z(seq, parts):
    """log Z (zero scores, float64) of the segmentations that follow `parts` (parts_mask)
    under the grammar: -inf where none is allowed."""
    from semiseg.crf import log_partition

    lay = FrameLayout.from_scheme(scheme())
    mask = parts_mask(lay, seq, parts)
    return float(log_partition(
        torch.zeros(1, len(seq), len(lay), dtype=torch.float64),
        torch.tensor(lay.transition_mask()), torch.tensor(lay.duration_mask(8)),
        allowed=torch.as_tensor(mask)[None], backend="torch",
        proj_start=torch.tensor(np.where(lay.begin_mask(), 0.0, -1e4)[
            np.arange(len(seq)) % 3])[None]))


def _mirror(seq, parts):
    """The same gene on the minus strand: the reverse complement, parts mirrored."""
    T = len(seq)
    return rc(seq), [(k[:-1] + "-", T - b, T - a) for k, a, b in reversed(parts)]


@pytest.mark.parametrize("strand", "+-")
def test_a_codon_split_by_an_intron_may_read_a_stop_in_the_genome(strand):
    """ATG TA|GTAAAG|C TAA: the spliced CDS is ATG TAC TAA, a gene, while the genomic
    triplet TA+G (the donor's G) reads a stop. The mask forbade CDS on all three bases of
    that triplet, so no segmentation held this gene (t5428 and t5432 of the fly
    annotation); now it is allowed, on both strands. A CDS run over a whole stop triplet
    (ATG TAG TAA) stays forbidden, and so does the same split gene with the second exon
    one base short (the spliced CDS is no longer whole codons)."""
    gene = ("ATGTAGTAAAGCTAA", [("start+", 0, 3), ("CDS+", 3, 5), ("intron+", 5, 11),
                                ("CDS+", 11, 12), ("stop+", 12, 15)])
    stop_inside = ("ATGTAGTAA", [("start+", 0, 3), ("CDS+", 3, 6), ("stop+", 6, 9)])
    short = ("ATGTAGTAAAGTAA", [("start+", 0, 3), ("CDS+", 3, 5), ("intron+", 5, 11),
                                ("stop+", 11, 14)])
    cases = [gene, stop_inside, short]
    if strand == "-":
        cases = [_mirror(*c) for c in cases]
    assert np.isfinite(_parts_log_z(*cases[0]))
    assert np.isneginf(_parts_log_z(*cases[1]))
    assert _parts_log_z(*cases[2]) < -1e3
