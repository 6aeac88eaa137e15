"""Site matrices and the head's site scores (semiseg/genemodel/sites.py) against string scans."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from seqs import COMP, codes_of, layout, onehot, rc

from semiseg.genemodel.sites import (
    BRANCH_FAR,
    BRANCH_NEAR,
    BRANCH_WIDTH,
    PSEUDO,
    SITES,
    SiteScores,
    count_branch_pwm,
    count_site_pwms,
)

CODONS = {("start", "+"): {"ATG"}, ("start", "-"): {"CAT"},
          ("stop", "+"): {"TAA", "TAG", "TGA"}, ("stop", "-"): {"TTA", "CTA", "TCA"}}


def site_string(seq: str, p: int, span, minus: bool) -> str:
    """The window anchored at p in the transcript's direction, '-' off the sequence."""
    before, after = span
    pad = "-" * 64
    s = pad + seq + pad
    q = p + 64
    if not minus:
        return s[q - before:q + after]
    return rc(s[q - after + 1:q + before + 1])


def pwm_score(mat: np.ndarray, window: str) -> float:
    return sum(float(mat["ACGT".index(b), i]) for i, b in enumerate(window) if b in "ACGT")


def test_counts_match_a_direct_count_for_every_site():
    """Donors and acceptors are 1-bp gold labels, start and stop codons 3-bp runs; the
    anchor is the first base in the transcript's direction (a minus codon's right end)."""
    rng = random.Random(1)
    lay = layout()
    kinds = [lay.kind_names[k] for k in lay.kind]
    code = {k: [i for i, n in enumerate(kinds) if n == k]
            for k in (f"{s}{st}" for s in SITES for st in "+-")}
    seqs, golds, want = [], [], {s: [] for s in SITES}
    for _ in range(3):
        seq = "".join(rng.choice("ACGT") for _ in range(400))
        gold = np.full(len(seq), -1, np.int64)
        free = np.ones(len(seq), bool)
        for kind, labels in code.items():
            site, strand = kind[:-1], kind[-1]
            width = 3 if site in ("start", "stop") else 1
            for _ in range(3):
                while True:  # some near the edges too; sites never touch
                    p = rng.randrange(0, len(seq) - width + 1)
                    if free[max(0, p - 1):p + width + 1].all():
                        break
                free[p:p + width] = False
                gold[p:p + width] = rng.choice(labels)  # any frame of the kind
                anchor = p if strand == "+" else p + width - 1
                want[site].append(site_string(seq, anchor, SITES[site], strand == "-"))
        seqs.append(onehot(seq))
        golds.append(gold)
    mats, n = count_site_pwms(seqs, golds, lay)
    assert n == {s: len(v) for s, v in want.items()}
    allseq = "".join("".join("ACGT"[i] for i in x.argmax(1)) for x in seqs)
    bg = [(allseq.count(b) + 1) / (len(allseq) + 4) for b in "ACGT"]
    for site, strs in want.items():
        mat = mats[site]
        assert mat.shape == (4, sum(SITES[site]))
        for i in range(mat.shape[1]):
            col = [s[i] for s in strs]
            total = sum(c in "ACGT" for c in col) + 4 * PSEUDO
            for j, b in enumerate("ACGT"):
                expect = math.log((col.count(b) + PSEUDO) / total / bg[j])
                assert abs(mat[j, i] - expect) < 1e-5, (site, i, b)


def test_a_site_never_seen_scores_zero():
    lay = layout()
    mats, n = count_site_pwms([onehot("ACGTACGTAC")], [np.full(10, -1)], lay)
    assert all(v == 0 for v in n.values())
    assert all(not m.any() for m in mats.values())


def random_head(seed: int):
    lay = layout()
    head = SiteScores(lay)
    g = np.random.default_rng(seed)
    mats = {s: g.normal(size=(4, sum(SITES[s]))).astype(np.float32) for s in SITES}
    mats["branch"] = g.normal(size=(4, BRANCH_WIDTH)).astype(np.float32)
    head.set(mats)
    with torch.no_grad():
        head.weight.copy_(torch.tensor(g.uniform(0.5, 2.0, len(SITES) + 1),
                                       dtype=torch.float32))
    return lay, head


def branch_string(seq: str, p: int, mat: np.ndarray, minus: bool) -> float:
    """The best branch-matrix score of a motif starting NEAR..FAR bases upstream of an
    acceptor at p (transcript direction); a start off the sequence counts as 0 and the
    bases off it add nothing."""
    best = -np.inf
    T = len(seq)
    for o in range(BRANCH_NEAR, BRANCH_FAR + 1):
        q = p + o if minus else p - o
        if not 0 <= q < T:
            best = max(best, 0.0)
            continue
        total = 0.0
        for j in range(BRANCH_WIDTH):
            u = q - j if minus else q + j
            if 0 <= u < T and seq[u] in "ACGT":
                b = seq[u].translate(COMP) if minus else seq[u]
                total += float(mat["ACGT".index(b), j])
        best = max(best, total)
    return best


def expected_scores(lay, head, seq: str) -> np.ndarray:
    """Per base and internal label, from string scans: weight x matrix score where a site
    of that label's kind is anchored (codons: only where that codon begins)."""
    kinds = [lay.kind_names[k] for k in lay.kind]
    out = np.zeros((len(seq), len(kinds)))
    wb = float(head.weight.detach()[len(SITES)])
    for c, kind in enumerate(kinds):
        site, strand = kind[:-1], kind[-1]
        if site not in SITES:
            continue
        if site == "acceptor":
            for p in range(len(seq)):
                out[p, c] += wb * branch_string(seq, p, head.pwm_branch.numpy(),
                                                strand == "-")
        w = float(head.weight.detach()[list(SITES).index(site)])
        mat = getattr(head, f"pwm_{site}").numpy()
        for p in range(len(seq)):
            if site in ("start", "stop"):
                codon = seq[p:p + 3] if strand == "+" else seq[max(0, p - 2):p + 1]
                if codon not in CODONS[(site, strand)]:
                    continue
            out[p, c] += w * pwm_score(mat, site_string(seq, p, SITES[site], strand == "-"))
    return out


def planted_sequence(seed: int, n: int = 150) -> str:
    r = random.Random(seed)
    parts = []
    while sum(map(len, parts)) < n:
        parts.append(r.choice(["ATG", "CAT", "TAA", "TGA", "TCA", "CTA", "GT", "AG", "N"]
                              + ["".join(r.choice("ACGT") for _ in range(5))]))
    return "".join(parts)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_match_string_scans_on_both_strands(seed):
    lay, head = random_head(seed)
    seq = planted_sequence(seed)
    got = head(codes_of(seq))[0].detach().double().numpy()
    np.testing.assert_allclose(got, expected_scores(lay, head, seq), atol=1e-4)


def test_the_branch_matrix_finds_a_planted_motif():
    """Introns carrying TACTAAC (or one mismatch of it) at varying distances before the
    acceptor: the seed is TACTAAC and the matrix spells it; too few introns: zeros."""
    rng = random.Random(4)
    lay = layout()
    kinds = [lay.kind_names[k] for k in lay.kind]
    acc = {st: kinds.index(f"acceptor{st}") for st in "+-"}
    seqs, golds = [], []
    for i in range(12):
        intron = "".join(rng.choice("AATTGC") for _ in range(120))
        motif = "TACTAAC" if i % 4 else "TACTAAT"
        o = rng.randrange(BRANCH_NEAR + 8, BRANCH_FAR)  # motif start o bases upstream
        p = len(intron) - 1  # the acceptor G
        intron = intron[:p - o] + motif + intron[p - o + 7:p - 1] + "AG"
        assert intron[p - o:p - o + 7] == motif and len(intron) == 120
        flank = "".join(rng.choice("ACGT") for _ in range(40))
        strand = "+-"[i % 2]
        seq = flank + intron + flank if strand == "+" else flank + rc(intron) + flank
        gold = np.full(len(seq), -1)
        gold[40 + p if strand == "+" else 40 + (len(intron) - 1 - p)] = acc[strand]
        seqs.append(onehot(seq))
        golds.append(gold)
    mat, seed = count_branch_pwm(seqs, golds, lay)
    assert seed == "TACTAAC"
    assert "".join("ACGT"[j] for j in mat.argmax(0)) == "TACTAAC"
    assert mat[3, 6] > mat[2, 6] + 1  # the planted variant (T) counts, G never occurs
    zero, none = count_branch_pwm(seqs[:2], golds[:2], lay)
    assert none == "" and not zero.any()


def test_a_codon_segment_collects_its_score_once():
    """The 3 bases of a start codon's segment sum to one weighted matrix score (an ATG
    cannot begin at its own second or third base); stop scores stand only where a stop
    codon begins (ATGATGA: TGA at 6 and 9)."""
    lay, head = random_head(5)
    seq = "CCAGT" + "ATGATGA" + "GGCATCC"
    got = head(codes_of(seq))[0].detach().double().numpy()
    kinds = [lay.kind_names[k] for k in lay.kind]
    w = float(head.weight.detach()[list(SITES).index("start")])
    want = w * pwm_score(head.pwm_start.numpy(), site_string(seq, 5, SITES["start"], False))
    for c in (i for i, k in enumerate(kinds) if k == "start+"):  # every frame
        assert got[5:8, c].sum() == pytest.approx(want, abs=1e-4)
    stop_p = kinds.index("stop+")
    assert set(np.flatnonzero(got[:, stop_p])) == {6, 9}


def test_reverse_complement_swaps_the_strands():
    """A site read on the reverse complement is the same window: the minus-strand scores
    of rc(seq), read backwards, are the plus-strand scores of seq (and vice versa)."""
    lay, head = random_head(7)
    seq = planted_sequence(11, 120)
    kinds = [lay.kind_names[k] for k in lay.kind]
    fwd = head(codes_of(seq))[0].detach().numpy()
    back = head(codes_of(rc(seq)))[0].detach().numpy()[::-1]
    for s in SITES:
        a, b = kinds.index(f"{s}+"), kinds.index(f"{s}-")
        assert np.abs(fwd[:, a]).sum() > 0
        np.testing.assert_allclose(back[:, b], fwd[:, a], atol=1e-4)
        np.testing.assert_allclose(back[:, a], fwd[:, b], atol=1e-4)


def test_site_scores_need_the_gene_model():
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError

    cfg = load_config("configs/demo.yaml", ["crf.site_scores=true", "crf.head=argmax",
                                            "crf.orf_length_scores=false",
                                            "crf.content_scores=false"])
    with pytest.raises(SemisegError, match="site_scores"):
        build_model(cfg, 4, 5)


def test_training_counts_the_sites_into_the_head(tmp_path):
    """On the demo's chrII the counted matrices put GT / AG at the splice bases, ATG at
    the start codon and T at a stop codon's first base; matrices and weights travel with
    the model's state."""
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.train.loop import _load_data
    from semiseg.train.tables import count_sites

    cfg = load_config("configs/demo.yaml", ["crf.site_scores=true", "model.channels=8",
                                            "model.layers=2", "model.fine_channels=8"])
    _, data, scheme, columns, train_ds, _ = _load_data(cfg)
    model, _ = build_model(cfg, len(columns), len(scheme.names))
    count_sites(model, scheme, train_ds)
    sites = model.crf.sites
    A, C, G, T = range(4)
    d, a = sites.pwm_donor.numpy(), sites.pwm_acceptor.numpy()
    s, x = sites.pwm_start.numpy(), sites.pwm_stop.numpy()
    b = SITES["donor"][0]
    assert d[:, b].argmax() == G and d[:, b + 1].argmax() == T
    b = SITES["acceptor"][0]
    assert a[:, b - 1].argmax() == A and a[:, b].argmax() == G
    b = SITES["start"][0]
    assert [s[:, b + i].argmax() for i in range(3)] == [A, T, G]
    assert x[:, SITES["stop"][0]].argmax() == T
    state = {k: v.clone() for k, v in model.state_dict().items()}
    again, _ = build_model(cfg, len(columns), len(scheme.names))
    again.load_state_dict(state)
    for name in SITES:
        assert torch.equal(getattr(again.crf.sites, f"pwm_{name}"),
                           getattr(sites, f"pwm_{name}"))


# ------------------------------------------------- weak branch points (annotate.branch_penalty)
CONSENSUS = "TACTAAC"


def weak_scan(seq: str) -> dict[str, np.ndarray]:
    """Per base t and strand: True when no 7-mer starting BRANCH_NEAR..BRANCH_FAR bases
    upstream of t in the transcript's direction (inside the sequence) matches CONSENSUS at
    6 or more bases, walked on the strings."""
    T = len(seq)
    r = rc(seq)
    out = {"+": np.zeros(T, bool), "-": np.zeros(T, bool)}
    for t in range(T):
        for st, s, u in (("+", seq, t), ("-", r, T - 1 - t)):  # u: t on that strand
            best = 0
            for v in range(u - BRANCH_FAR, u - BRANCH_NEAR + 1):
                if v < 0:
                    continue
                best = max(best, sum(a == b for a, b in zip(s[v:v + 7], CONSENSUS)))
            out[st][t] = best < 6
    return out


def test_weak_branch_marks_acceptors_without_a_near_consensus_motif():
    lay = layout()
    m = SiteScores(lay)
    pwm = np.full((4, 7), -1.0, np.float32)
    for j, b in enumerate(CONSENSUS):
        pwm["ACGT".index(b), j] = 1.5
    m.set({"branch": pwm})
    rng = random.Random(3)
    parts = []
    while sum(map(len, parts)) < 400:  # exact, one-off and two-off motifs on both strands
        motif = list(CONSENSUS)
        for _ in range(rng.choice([0, 1, 2])):
            motif[rng.randrange(7)] = rng.choice("ACGT")
        m7 = "".join(motif)
        parts.append(rng.choice([m7, rc(m7)]))
        parts.append("".join(rng.choice("ACGT") for _ in range(rng.randint(5, 60))))
    seq = "".join(parts)[:400]
    got = m.weak_branch(codes_of(seq))[0].numpy()
    want = weak_scan(seq)
    kinds = [lay.kind_names[k] for k in lay.kind]
    assert want["+"].any() and (~want["+"]).any() and want["-"].any() and (~want["-"]).any()
    for c, kind in enumerate(kinds):
        if kind in ("acceptor+", "acceptor-"):
            np.testing.assert_array_equal(got[:, c], want[kind[-1]].astype(np.float32),
                                          err_msg=kind)
        else:
            assert not got[:, c].any(), kind
    m.set({"branch": np.zeros((4, 7), np.float32)})  # no matrix counted: no evidence
    assert not m.weak_branch(codes_of(seq)).any()


def test_label_sum_is_the_masked_sum():
    """label_sum against the sum it replaces, sum over pairs of values[..., None] * mask:
    the same bits (labels named by two pairs summed in order, none: 0), the same
    gradients, None for no pairs."""
    from semiseg.genemodel.labelsum import label_sum

    g = torch.Generator().manual_seed(5)
    C = 9
    masks = [torch.zeros(C) for _ in range(3)]
    masks[0][[1, 4]] = 1
    masks[1][[4, 7, 8]] = 1
    masks[2][[0]] = 1
    vals = [torch.randn(2, 50, generator=g, dtype=torch.float64).requires_grad_(True)
            for _ in masks]
    want = sum(v[..., None] * m.double() for v, m in zip(vals, masks))
    got = label_sum([(v, torch.nonzero(m).flatten().tolist()) for v, m in zip(vals, masks)],
                    C)
    assert got.shape == (2, 50, C) and torch.equal(got, want)
    assert torch.equal(got[..., [2, 3, 5, 6]], torch.zeros(2, 50, 4, dtype=torch.float64))
    w = torch.randn(2, 50, C, generator=g, dtype=torch.float64)
    g_want = torch.autograd.grad((want * w).sum(), vals)
    g_got = torch.autograd.grad((got * w).sum(), vals)
    for a, b in zip(g_want, g_got):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    assert label_sum([], C) is None


def pair_score(mat: np.ndarray, window: str) -> float:
    """An order-1 matrix's score of a window given with the base before it in front."""
    return sum(float(mat["ACGT".index(a) * 4 + "ACGT".index(b), i])
               for i, (a, b) in enumerate(zip(window, window[1:]))
               if a in "ACGT" and b in "ACGT")


def test_first_order_counts_match_a_direct_count():
    """crf.site_order 1 (and a window of crf.site_windows): each position's base given
    the base before it in the transcript's direction (the first one given the base
    before the window), against both strands' pair frequencies; from string scans."""
    rng = random.Random(5)
    lay = layout()
    kinds = [lay.kind_names[k] for k in lay.kind]
    code = {k: [i for i, n in enumerate(kinds) if n == k] for k in ("donor+", "donor-",
                                                                   "acceptor+", "acceptor-")}
    spans = {"donor": SITES["donor"], "acceptor": (30, 5)}
    seqs, golds, want = [], [], {s: [] for s in spans}
    for _ in range(4):
        seq = "".join(rng.choice("ACGT") for _ in range(300))
        gold = np.full(len(seq), -1, np.int64)
        for kind, labels in code.items():
            site, strand = kind[:-1], kind[-1]
            for p in rng.sample(range(len(seq)), 4):
                if gold[p] == -1:
                    gold[p] = rng.choice(labels)
                    b, a = spans[site]
                    want[site].append(site_string(seq, p, (b + 1, a), strand == "-"))
        seqs.append(onehot(seq))
        golds.append(gold)
    mats, n = count_site_pwms(seqs, golds, lay, sites=tuple(spans), order=1,
                              sizes={"acceptor": (30, 5)})
    assert n == {s: len(v) for s, v in want.items()}
    pairs = np.ones((4, 4))  # +1 per cell, as the code's background
    for x in seqs:
        s = "".join("ACGT"[i] for i in x.argmax(1))
        for t in (s, rc(s)):
            for a, b in zip(t, t[1:]):
                pairs["ACGT".index(a), "ACGT".index(b)] += 1
    bg = pairs / pairs.sum(1, keepdims=True)
    for site, strs in want.items():
        mat = mats[site]
        assert mat.shape == (16, sum(spans[site]))
        for i in range(mat.shape[1]):
            col = [w[i:i + 2] for w in strs]
            for j, prev in enumerate("ACGT"):
                total = sum(1 for c in col if c[0] == prev and c[1] in "ACGT") + 4 * PSEUDO
                for k, b in enumerate("ACGT"):
                    expect = math.log((col.count(prev + b) + PSEUDO) / total / bg[j, k])
                    assert abs(mat[j * 4 + k, i] - expect) < 1e-5, (site, i, prev, b)


@pytest.mark.parametrize("seed", [0, 3])
def test_first_order_scores_match_string_scans_on_both_strands(seed):
    """The head's order-1 site scores (16-row matrices, a site window of its own size)
    against string scans: each pair (base before, base) read in the transcript's
    direction, the pairs off the sequence or with an N adding nothing."""
    lay = layout()
    windows = {"acceptor": (30, 5), "donor": (6, 10)}
    head = SiteScores(lay, order=1, windows=windows)
    g = np.random.default_rng(seed)
    spans = dict(SITES, **windows)
    mats = {s: g.normal(size=(16, sum(spans[s]))).astype(np.float32) for s in SITES}
    mats["branch"] = np.zeros((4, BRANCH_WIDTH), np.float32)
    head.set(mats)
    seq = planted_sequence(seed, 120)
    got = head(codes_of(seq))[0].detach().double().numpy()
    kinds = [lay.kind_names[k] for k in lay.kind]
    for c, kind in enumerate(kinds):
        site, strand = kind[:-1], kind[-1]
        if site not in ("donor", "acceptor"):
            continue
        w = float(head.weight.detach()[list(SITES).index(site)])
        b, a = spans[site]
        for p in range(len(seq)):
            want = w * pair_score(mats[site], site_string(seq, p, (b + 1, a), strand == "-"))
            assert abs(got[p, c] - want) < 1e-4, (kind, p)


def test_site_order_and_windows_are_checked():
    from semiseg.config.load import load_config
    from semiseg.errors import SemisegError
    from semiseg.model import _check_sites

    with pytest.raises(SemisegError, match="crf.site_order"):
        load_config(None, ["crf.site_order=2"])
    with pytest.raises(SemisegError, match=r"crf.site_order: learned is read off the"):
        _check_sites(load_config(None, ["crf.site_order=learned"]).crf)  # unresolved
    cfg = load_config(None, ["crf.site_windows={branch: [3, 4]}"])
    with pytest.raises(SemisegError, match="no site 'branch'"):
        _check_sites(cfg.crf)
    cfg = load_config(None, ["crf.site_windows={acceptor: [40, 0]}"])
    with pytest.raises(SemisegError, match="crf.site_windows.acceptor"):
        _check_sites(cfg.crf)


def test_first_order_site_matrices_from_training_travel_with_the_model():
    """crf.site_order 1 with a longer acceptor window: count_sites fills the head's
    16-row matrices from the training genes (GT at the donor: G given any base, then T
    given G; AG at the acceptor) and they come back from the model's state."""
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.train.loop import _load_data
    from semiseg.train.tables import count_sites

    cfg = load_config("configs/demo.yaml", [
        "crf.site_scores=true", "crf.site_order=1", "crf.site_windows={acceptor: [40, 4]}",
        "model.channels=8", "model.layers=2", "model.fine_channels=8"])
    _, data, scheme, columns, train_ds, _ = _load_data(cfg)
    model, _ = build_model(cfg, len(columns), len(scheme.names))
    count_sites(model, scheme, train_ds)
    sites = model.crf.sites
    A, G, T = 0, 2, 3
    d, a = sites.pwm_donor.numpy(), sites.pwm_acceptor.numpy()
    assert d.shape == (16, sum(SITES["donor"])) and a.shape == (16, 44)
    b = SITES["donor"][0]
    assert all(d[p * 4:p * 4 + 4, b].argmax() == G for p in range(4))
    assert d[G * 4:G * 4 + 4, b + 1].argmax() == T
    assert a[A * 4:A * 4 + 4, 40].argmax() == G
    again, _ = build_model(cfg, len(columns), len(scheme.names))
    again.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
    assert torch.equal(again.crf.sites.pwm_acceptor, sites.pwm_acceptor)


def test_recount_sites_keeps_the_runs_own_order_and_windows(tmp_path):
    """scripts/recount_sites.py: the shipped yeast model recounted at order 1 with a longer
    acceptor window, then that checkpoint recounted with no options: the second keeps
    the first's order and windows, so its matrices come back bitwise (a round trip;
    it used to reset them to order 1 and the built-in windows), and every other
    parameter is the model's."""
    import subprocess
    import sys
    from pathlib import Path

    from semiseg.genome import Fasta

    root = Path(__file__).resolve().parent.parent
    script = root / "scripts" / "recount_sites.py"
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    # the counts read the run's training chromosome, chrII: its first 200 kb are enough
    with Fasta(str(root / "data" / "yeast" / "chrII.fa")) as fa:
        (tmp_path / "ii.fa").write_text(">chrII\n" + fa.fetch("chrII", 0, 200_000) + "\n")
    small = ["--fasta", str(tmp_path / "ii.fa"), "--annotation",
             str(root / "data" / "yeast" / "yeast_chrI_chrII.gff3")]
    for args in (["yeast", str(one), "--order", "1", "--window", "acceptor=40,4", *small],
                 [str(one), str(two)]):
        proc = subprocess.run([sys.executable, str(script), *args], cwd=root,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    a = torch.load(one, map_location="cpu", weights_only=False)
    b = torch.load(two, map_location="cpu", weights_only=False)
    assert a["config"]["crf"]["site_windows"] == {"acceptor": [40, 4]}
    assert b["config"]["crf"]["site_windows"] == {"acceptor": [40, 4]}
    assert b["config"]["crf"]["site_order"] == 1
    assert a["model"]["crf.sites.pwm_acceptor"].shape == (16, 44)
    assert set(a["model"]) == set(b["model"])
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


def test_label_add_is_the_dense_sum():
    """label_add(scores, parts) against scores + label_sum(parts): the same bits in every
    column a pair names (two pairs on one column summed in order first), the other
    columns untouched, the same gradients in both inputs, scores itself for no pairs."""
    from semiseg.genemodel.labelsum import label_add, label_sum

    g = torch.Generator().manual_seed(7)
    C = 9
    labels = [[1, 4], [4, 7, 8], [0]]
    vals = [torch.randn(2, 50, generator=g).requires_grad_(True) for _ in labels]
    base = (torch.randn(2, 50, C, generator=g) * 5).requires_grad_(True)
    parts = list(zip(vals, labels))
    want = base + label_sum(parts, C)
    got = label_add(base, parts)
    named = [0, 1, 4, 7, 8]
    assert torch.equal(got[..., named], want[..., named])
    assert torch.equal(got[..., [2, 3, 5, 6]], base[..., [2, 3, 5, 6]])
    w = torch.randn(2, 50, C, generator=g)
    for a, b in zip(torch.autograd.grad((want * w).sum(), [base, *vals]),
                    torch.autograd.grad((got * w).sum(), [base, *vals])):
        assert torch.equal(a, b)
    assert label_add(base, []) is base
