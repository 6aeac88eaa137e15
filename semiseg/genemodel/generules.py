"""Sequence rules applied to a gene model's decoded labels before they are written:
genes scoring under annotate.min_gene_score dropped (genemodel/genefilter.py), then start
codons moved to the first ATG of their open reading frame (genemodel/firstatg.py), then
long intergenic ORFs called genes (genemodel/orffill.py), then genes whose CDS is more
soft-masked than annotate.max_masked_cds dropped (genefilter.py). `annotate` reads them from the
model's annotate section or the command line (gene_rules) and applies them per
chromosome (apply_rules). The donor motif (set_donor_motif) is a rule of the same kind
applied before decoding: it narrows where the gene model's introns may begin."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import SemisegError
from ..genome.iupac import check_motif
from .firstatg import extend_starts
from .genefilter import drop_masked_genes, drop_weak_genes
from .orffill import long_orfs as paint_long_orfs


class GeneRules(NamedTuple):
    """Which rules are on, and the labels they read."""
    cds: dict  # CDS label per strand ("+", "-")
    background: int
    first_atg: bool  # firstatg.extend_starts
    long_orfs: int  # orffill.long_orfs: minimum codons, 0 off
    min_gene_score: float = 0.0  # genefilter.drop_weak_genes: 0 off
    roles: tuple = ()  # the scheme's label roles and strands (genefilter.gene_spans)
    strands: tuple = ()
    max_masked_cds: float = 1.0  # genefilter.drop_masked_genes: 1 off


def gene_rules(scheme, res: int, first_atg: bool, first_atg_given: bool | None,
               orfs: int, orfs_given: int | None, min_score: float = 0.0,
               min_score_given: float | None = None, masked: float = 1.0,
               masked_given: float | None = None) -> GeneRules | None:
    """The GeneRules asked for (command line over the model's annotate section), or None
    when none is on. Asked for on the command line where the model has no codons (not a
    gene model at 1 bp): a one-line error; set in the model's config there: off (as
    annotate._set_penalty does)."""
    on = first_atg if first_atg_given is None else first_atg_given
    n = orfs if orfs_given is None else orfs_given
    m = min_score if min_score_given is None else min_score_given
    mk = masked if masked_given is None else masked_given
    if n != int(n) or n < 0:
        raise SemisegError(f"--long-orfs: expected a whole number of codons >= 0, got {n}")
    if not 0 <= m <= 1:
        raise SemisegError(f"--min-gene-score: expected a posterior between 0 and 1, got {m}")
    if not 0 <= mk <= 1:
        raise SemisegError(f"--max-masked-cds: expected a share between 0 and 1, got {mk}")
    if not (on or n or m or mk < 1):
        return None
    cds = {st: scheme.role_label("CDS", st) for st in ("+", "-")}
    cds = {st: c for st, c in cds.items() if c is not None}
    if res != 1 or not cds or scheme.background is None:
        for flag, given in (("--first-atg", first_atg_given), ("--long-orfs", orfs_given),
                            ("--min-gene-score", min_score_given),
                            ("--max-masked-cds", masked_given)):
            if given:
                raise SemisegError(f"{flag}: only a gene model at 1 bp (labels of role CDS, "
                                   "a background label) has codons to read")
        return None
    return GeneRules(cds, scheme.background, bool(on), int(n), float(m),
                     tuple(scheme.roles), tuple(scheme.strands), float(mk))


def _filters(rules: GeneRules | None) -> list[tuple[str, str, str]]:
    """The gene filters `rules` turns on: (what they leave out, the writer's count of it,
    the config key)."""
    if rules is None:
        return []
    return ([(f"scoring under {rules.min_gene_score:g}", "weak_genes",
              "annotate.min_gene_score")] if rules.min_gene_score else []) + (
        [(f"with over {rules.max_masked_cds:.1%} of their CDS soft-masked", "masked_genes",
          "annotate.max_masked_cds")] if rules.max_masked_cds < 1 else [])


def dropping(rules: GeneRules | None) -> list[str]:
    """What the gene filters of `rules` leave out, for annotate's first log line."""
    return [f"genes {what} not called" for what, _, _ in _filters(rules)]


def dropped_lines(rules: GeneRules | None, writer) -> list[str]:
    """How many genes the filters left out (the writer's counts), for the log's summary."""
    return [f"{getattr(writer, count)} gene(s) {what} not called ({key})"
            for what, count, key in _filters(rules)]


def _no_run_posterior(lab: np.ndarray, runp: np.ndarray, dropped: list) -> None:
    """The background runs that dropped genes (lo, hi, score) joined: no run posterior."""
    if dropped:
        run = np.concatenate([[0], np.cumsum(np.diff(lab) != 0)])
        hit = run[[lo for lo, _, _ in dropped]]
        runp[np.isin(run, hit)] = np.nan


def apply_rules(rules: GeneRules, lab: np.ndarray, seq: str, runp: np.ndarray,
                post: np.ndarray | None = None) -> tuple[int, int]:
    """Apply `rules` to one chromosome's labels `lab` (1 bp, in place, sequence `seq` in
    its original case, label posteriors `post` (S, C)); a gene so changed or added has no
    run posterior (runp NaN there: no BED score). Returns the number of genes dropped for
    their score and for their soft-masked CDS."""
    dropped, masked = [], []
    if rules.min_gene_score and post is not None:
        dropped = drop_weak_genes(lab, post, rules.roles, rules.strands, rules.background,
                                  rules.min_gene_score)
        _no_run_posterior(lab, runp, dropped)
    if rules.first_atg:
        for _, _, lo, hi in extend_starts(lab, seq, rules.cds, rules.background):
            runp[lo:hi] = np.nan
    if rules.long_orfs:
        for lo, hi in paint_long_orfs(lab, seq, rules.cds, rules.background,
                                      rules.long_orfs):
            runp[lo:hi] = np.nan
    if rules.max_masked_cds < 1:  # last: an ORF long_orfs painted is a gene like any
        masked = drop_masked_genes(lab, seq, sorted(rules.cds.values()), rules.roles,
                                   rules.strands, rules.background, rules.max_masked_cds)
        _no_run_posterior(lab, runp, masked)
    return len(dropped), len(masked)


def set_donor_motif(head, configured: str, given: str | None) -> None:
    """The gene head's donor motif from the command line or the checkpoint's annotate
    section (as annotate._set_penalty: ignored where configured for a model without introns)."""
    motif = configured if given is None else given
    if not motif:
        return
    if not hasattr(head, "donor_motif"):
        if given:
            raise SemisegError("--donor-motif: only the gene model (crf.frames with the "
                               "semi-CRF head) has introns")
        return
    head.donor_motif = check_motif(motif, "--donor-motif" if given is not None
                                   else "the model's annotate.donor_motif")
