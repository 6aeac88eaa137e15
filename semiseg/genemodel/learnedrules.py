"""Gene rules learned from the training annotation (`annotate.learn_rules`).

The yeast demo's best settings were rules typed in by hand: introns begin GTA.G
(`annotate.donor_motif`), every acceptor has a branch point near TACTAAC upstream
(`annotate.branch_penalty: .inf`), starts sit at the first ATG of their ORF
(`annotate.first_atg`) and long intergenic ORFs are genes (`annotate.long_orfs`). Each is
a fact about one genome's annotation, and each can be read off the training genes
instead: with `learn_rules`, `semiseg train` measures each fact on the training windows'
gold structures and turns a rule on only where the annotation obeys it. The thresholds
below are the same for every genome; the log and the run's config.yaml record what was
learned and the counts behind it.

- donor motif: the intron's first DONOR_LEN bases, position by position: a position
  where at least DONOR_FIXED_SHARE of the training donors have the same base is that
  base, any other position N; trailing N are dropped, and a motif of GT alone is none.
  Needs DONOR_MIN_N donors. (Yeast chrII's 22 GT donors give GTANG: GTATGT, GTACGT,
  GTAAGT ... share positions 1-3 and 5.)
- branch rule: on (inf) when at least BRANCH_MIN_SHARE of the training acceptors have a
  7-mer within one base of the learned branch consensus BRANCH_NEAR..BRANCH_FAR bases
  upstream (the same test as sites.SiteScores.weak_branch), and at most BRANCH_MAX_DECOY
  of the other AG dinucleotides of the training windows do (the motif must separate
  real acceptors from decoys).
- first ATG: on when at least FIRST_ATG_MIN_SHARE of the training genes whose 5' end
  has a start codon next to intergenic sequence already begin at the first ATG of their
  ORF (firstatg.extend_starts would not move them). Needs RULE_MIN_N such genes.
- long ORFs: the smallest N (codons) of ORF_GRID at which at least ORF_MIN_PRECISION of
  the training windows' ORFs of >= N codons (first ATG to stop, not touching unknown
  bases) are whole single-exon genes of the annotation (CDS from end to end, intergenic
  on both sides); 0 (off) if none. Needs RULE_MIN_N such ORFs at N.
- soft-masked genes: where at least MASK_MIN_SHARE of the training sequence is lowercase
  in the FASTA (soft-masked repeats), the largest share of soft-masked CDS bases among the
  training genes wholly inside a window (intergenic on both sides); a decoded gene more
  masked than that is not called (`annotate.max_masked_cds`, genefilter.py). Off (1) on
  an unmasked FASTA, with fewer than RULE_MIN_N such genes, or where a training gene's
  CDS is wholly masked (the annotation calls genes in repeats).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..genome.codes import reverse_complement_codes

DONOR_LEN = 6
DONOR_MIN_N = 10
DONOR_FIXED_SHARE = 0.99
BRANCH_MIN_SHARE = 0.9
BRANCH_MAX_DECOY = 0.3
FIRST_ATG_MIN_SHARE = 0.9
ORF_GRID = (50, 60, 70, 80, 90, 100, 120, 150, 200, 300, 500)
ORF_MIN_PRECISION = 0.8
RULE_MIN_N = 10
MASK_MIN_SHARE = 0.01

@dataclass
class LearnedRules:
    """The four rules, in annotate's terms, and a line of evidence for each."""
    donor_motif: str
    branch_penalty: float
    first_atg: bool
    long_orfs: int
    evidence: dict
    max_masked_cds: float = 1.0

    def describe(self) -> str:
        return "; ".join(f"{k}: {v}" for k, v in self.evidence.items())


def _codes(onehot: np.ndarray) -> np.ndarray:
    """(T, 4) one-hot -> base codes A C G T = 0..3, anything else 4."""
    x = np.asarray(onehot)[:, :4]
    return np.where(x.max(1) > 0.5, x.argmax(1), 4).astype(np.int8)


def _seq(codes: np.ndarray) -> str:
    return np.frombuffer(b"ACGTN", np.uint8)[codes].tobytes().decode()


def _kinds(layout) -> list[str]:
    return [layout.kind_names[k] for k in layout.kind]


def _anchors(gold: np.ndarray, codes: list[int], minus: bool) -> np.ndarray:
    from .sites import anchors
    return anchors(gold, codes, minus) if codes else np.zeros(0, np.int64)


def learn_donor_motif(onehots, golds, layout) -> tuple[str, str]:
    """(motif, evidence) from the training donors (see the module docstring)."""
    from .sites import windows
    kinds = _kinds(layout)
    rows = []
    for x, y in zip(onehots, golds, strict=True):
        x = np.asarray(x, np.float32)[:, :4]
        for st in "+-":
            codes = [i for i, k in enumerate(kinds) if k == f"donor{st}"]
            pos = _anchors(np.asarray(y), codes, st == "-")
            if len(pos):
                rows.append(windows(x, pos, 0, DONOR_LEN, minus=st == "-"))
    if not rows:
        return "", "no training donors"
    w = np.concatenate(rows)  # (n, DONOR_LEN, 4) in the intron's direction
    w = w[w.sum(2).min(1) > 0.5]  # whole windows only
    n = len(w)
    if n < DONOR_MIN_N:
        return "", f"{n} training donors (< {DONOR_MIN_N}): no motif"
    counts = w.sum(0)  # (DONOR_LEN, 4)
    letters = ["ACGT"[int(c.argmax())] if c.max() >= DONOR_FIXED_SHARE * n else "N"
               for c in counts]
    motif = "".join(letters).rstrip("N")
    if not motif.startswith("GT"):  # the grammar's donors are GT; a motif must say so
        return "", f"{n} training donors do not all begin GT: no motif"
    if motif == "GT":
        return "", f"{n} training donors: no base beyond GT is shared (no motif)"
    covered = int(sum(all(letters[j] == "N" or w[i, j].argmax() == "ACGT".index(letters[j])
                          for j in range(len(motif))) for i in range(n)))
    return motif, f"{motif} ({covered} of {n} training donors match)"


def learn_branch_rule(onehots, golds, layout) -> tuple[float, str]:
    """(branch_penalty, evidence): inf where the learned branch motif marks the training
    acceptors and few decoy AGs, else 0 (see the module docstring)."""
    from .sites import BRANCH_FAR, BRANCH_MIN_MATCH, BRANCH_NEAR, BRANCH_WIDTH, count_branch_pwm
    _, seed = count_branch_pwm(onehots, golds, layout)
    if not seed:
        return 0.0, "no branch-point motif in the training introns: no rule"
    seed_codes = np.array(["ACGT".index(b) for b in seed])
    kinds = _kinds(layout)
    starts = BRANCH_FAR - BRANCH_NEAR + 1

    def has_branch(codes: np.ndarray, p: int) -> bool:
        """Whether a 7-mer within one base of the seed begins BRANCH_NEAR..BRANCH_FAR
        bases before acceptor base p (plus-strand coordinates of `codes`)."""
        lo = p - BRANCH_FAR
        if lo < 0:
            return False
        region = codes[lo:lo + starts + BRANCH_WIDTH - 1]
        best = max(int((region[i:i + BRANCH_WIDTH] == seed_codes).sum())
                   for i in range(starts))
        return best >= BRANCH_MIN_MATCH

    real, real_hit, decoy, decoy_hit = 0, 0, 0, 0
    rng = np.random.default_rng(0)
    for x, y in zip(onehots, golds, strict=True):
        codes = _codes(x)
        y = np.asarray(y)
        comp = reverse_complement_codes(codes)  # the minus strand, read 5'->3'
        T = len(codes)
        for st in "+-":
            acc = [i for i, k in enumerate(kinds) if k == f"acceptor{st}"]
            seq = codes if st == "+" else comp
            pos = _anchors(y, acc, st == "-")
            for p in pos.tolist():
                q = p if st == "+" else T - 1 - p
                real += 1
                real_hit += has_branch(seq, q)
            # decoys: the G of other AGs on this strand (not a training acceptor)
            g = np.flatnonzero((seq[1:] == 2) & (seq[:-1] == 0)) + 1
            real_q = set(pos.tolist()) if st == "+" else {T - 1 - p for p in pos.tolist()}
            g = np.array([q for q in g.tolist() if q not in real_q], np.int64)
            if len(g) > 50:
                g = rng.choice(g, 50, replace=False)
            for q in g.tolist():
                decoy += 1
                decoy_hit += has_branch(seq, q)
    if real < RULE_MIN_N or decoy < RULE_MIN_N:
        return 0.0, f"{real} training acceptors, {decoy} decoy AGs: too few for a rule"
    share, dshare = real_hit / real, decoy_hit / decoy
    on = share >= BRANCH_MIN_SHARE and dshare <= BRANCH_MAX_DECOY
    return (float("inf") if on else 0.0,
            f"{'on' if on else 'off'} ({seed} within one base upstream of "
            f"{real_hit}/{real} training acceptors ({share:.0%}) and of {decoy_hit}/{decoy} "
            f"intronic AGs ({dshare:.0%}))")


def _scheme_labels(gold: np.ndarray, layout) -> np.ndarray:
    lab = np.asarray(layout.scheme_label)[np.clip(gold, 0, None)]
    return np.where(np.asarray(gold) >= 0, lab, -1)


def learn_first_atg(onehots, golds, layout, scheme) -> tuple[bool, str]:
    """(first_atg, evidence): on where the training genes already start at the first
    ATG of their ORF (see the module docstring)."""
    from ..genome.codes import STARTS
    from .firstatg import extend_starts
    cds = {st: scheme.role_label("CDS", st) for st in ("+", "-")}
    cds = {st: c for st, c in cds.items() if c is not None}
    bg = scheme.background
    n_starts, moved = 0, 0
    for x, y in zip(onehots, golds, strict=True):
        seq = _seq(_codes(x))
        lab = _scheme_labels(np.asarray(y), layout)
        n = len(lab)
        change = np.flatnonzero(np.diff(lab)) + 1
        for a, b in zip(np.concatenate([[0], change]).tolist(),
                        np.concatenate([change, [n]]).tolist(), strict=True):
            c = int(lab[a])
            if c == cds.get("+") and a > 0 and lab[a - 1] == bg and seq[a:a + 3] == STARTS["+"]:
                n_starts += 1
            elif c == cds.get("-") and b < n and lab[b] == bg and seq[b - 3:b] == STARTS["-"]:
                n_starts += 1
        moved += len(extend_starts(lab.copy(), seq, cds, bg))
    if n_starts < RULE_MIN_N:
        return False, f"{n_starts} training gene starts: too few for a rule"
    share = (n_starts - moved) / n_starts
    on = share >= FIRST_ATG_MIN_SHARE
    return on, (f"{'on' if on else 'off'} ({n_starts - moved} of {n_starts} training "
                f"starts at the first ATG of their ORF, {share:.0%})")


def learn_long_orfs(onehots, golds, layout, scheme) -> tuple[int, str]:
    """(long_orfs, evidence): the smallest ORF length at which the training ORFs are
    whole single-exon genes (see the module docstring)."""
    from .orffill import plus_orfs
    cds = {st: scheme.role_label("CDS", st) for st in ("+", "-")}
    bg = scheme.background
    found = []  # (codons, is_gene)
    for x, y in zip(onehots, golds, strict=True):
        codes = _codes(x)
        lab = _scheme_labels(np.asarray(y), layout)
        n = len(lab)
        comp = reverse_complement_codes(codes).copy()
        for st, cc in (("+", codes), ("-", comp)):
            if cds.get(st) is None:
                continue
            for a, e in plus_orfs(cc, ORF_GRID[0]):
                lo, hi = (a, e) if st == "+" else (n - e, n - a)
                if (lab[max(lo - 1, 0):min(hi + 1, n)] < 0).any():
                    continue  # touches unknown bases: no evidence either way
                gene = bool((lab[lo:hi] == cds[st]).all()
                            and (lo == 0 or lab[lo - 1] == bg) and (hi == n or lab[hi] == bg))
                found.append(((e - a) // 3, gene))
    if not found:
        return 0, "no training ORFs: no rule"
    cod = np.array([f[0] for f in found])
    gene = np.array([f[1] for f in found])
    tried = []
    for n_cod in ORF_GRID:
        sel = cod >= n_cod
        if sel.sum() < RULE_MIN_N:
            break
        prec = gene[sel].mean()
        tried.append(f"{n_cod}: {int(gene[sel].sum())}/{int(sel.sum())}")
        if prec >= ORF_MIN_PRECISION:
            return n_cod, (f"{n_cod} codons ({int(gene[sel].sum())} of {int(sel.sum())} "
                           f"training ORFs of {n_cod}+ codons are whole genes)")
    return 0, ("off (ORFs that are whole genes at each length: " + ", ".join(tried[:6])
               + (" ..." if len(tried) > 6 else "") + ")")


def learn_masked_cds(lows, golds, layout, scheme) -> tuple[float, str]:
    """(max_masked_cds, evidence): the most soft-masked training gene's share, where the
    training sequence is soft-masked (see the module docstring); `lows` the windows'
    lowercase masks (bool, one per step)."""
    from .genefilter import gene_spans, masked_share
    n_low = sum(int(np.asarray(m).sum()) for m in lows)
    n_all = sum(len(m) for m in lows)
    share = n_low / max(n_all, 1)
    if share < MASK_MIN_SHARE:
        return 1.0, f"off ({share:.1%} of the training sequence soft-masked)"
    cds = sorted(c for c in (scheme.role_label("CDS", st) for st in "+-") if c is not None)
    bg = scheme.background
    roles, strands = list(scheme.roles), list(scheme.strands)
    shares = []
    for low, y in zip(lows, golds, strict=True):
        lab = _scheme_labels(np.asarray(y), layout)
        low = np.asarray(low, bool)
        for lo, hi in gene_spans(lab, roles, strands):
            if lo == 0 or hi == len(lab) or lab[lo - 1] != bg or lab[hi] != bg:
                continue  # cut by the window, or next to unknown bases
            if (lab[lo:hi] < 0).any() or not np.isin(lab[lo:hi], cds).any():
                continue
            shares.append(masked_share(lab, low, cds, lo, hi))
    if len(shares) < RULE_MIN_N:
        return 1.0, f"off ({len(shares)} whole training genes: too few for a rule)"
    top = max(shares)
    if top >= 1:
        return 1.0, (f"off (a training gene's CDS is wholly soft-masked; {share:.1%} of the "
                     "training sequence soft-masked)")
    return top, (f"{top:.1%} (the most soft-masked CDS of {len(shares)} whole training "
                 f"genes; {share:.1%} of the training sequence soft-masked)")


def learn_rules(onehots, golds, layout, scheme, lows=None) -> LearnedRules:
    """All five rules from the training windows' one-hot sequence, gold frame codes and
    lowercase masks (`lows`; None: the FASTA's case unknown, no soft-masked rule)."""
    motif, ev_d = learn_donor_motif(onehots, golds, layout)
    branch, ev_b = learn_branch_rule(onehots, golds, layout)
    first, ev_f = learn_first_atg(onehots, golds, layout, scheme)
    orfs, ev_o = learn_long_orfs(onehots, golds, layout, scheme)
    masked, ev_m = (1.0, "off (no sequence case)") if lows is None else \
        learn_masked_cds(lows, golds, layout, scheme)
    return LearnedRules(motif, branch, first, orfs,
                        {"donor motif": ev_d, "branch point": ev_b, "first ATG": ev_f,
                         "long ORFs": ev_o, "soft-masked genes": ev_m}, masked)
