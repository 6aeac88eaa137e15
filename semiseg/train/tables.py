"""The tables a new model counts from the training windows before training: the site
matrices (splice channels, site scores), the coding-content table, and, with
annotate.learn_rules, the gene rules read off the gold genes into the config.
"""

from __future__ import annotations

import torch

from .. import ui
from ..checkpoint import build_model
from ..config.schema import Config
from .data import Dataset


def new_model(cfg: Config, scheme, columns, train_ds: Dataset):
    """The config's model, initialised from train.seed, with the tables counted from the
    training windows (site matrices, coding content) where the config asks for them."""
    torch.manual_seed(cfg.train.seed)
    model, _ = build_model(cfg, len(columns), len(scheme.names))
    if (getattr(model.encoder, "splice", None) is not None
            or getattr(model.crf, "sites", None) is not None):
        count_sites(model, scheme, train_ds)
    if getattr(model.crf, "content", None) is not None:
        count_content(model, scheme, train_ds)
    return model


def with_learned_rules(cfg: Config, scheme, train_ds: Dataset, fasta=None) -> Config:
    """With annotate.learn_rules: the config with the gene rules (donor motif, branch
    rule, first ATG, long ORFs, soft-masked genes: the last from `fasta`'s case at the
    training windows, None: off) read off the training windows' gold genes
    (semiseg/genemodel/learnedrules.py) in its annotate section; the config as it is otherwise."""
    import dataclasses

    if not cfg.annotate.learn_rules:
        return cfg
    if not (cfg.crf.frames and cfg.model.resolution == 1):
        ui.log("annotate.learn_rules: only the gene model at 1 bp (crf.frames) has gene "
               "rules to learn; left as configured")
        return cfg
    from ..genemodel.frames import FrameLayout
    from ..genemodel.learnedrules import learn_rules
    from ..genome.sequence import softmasked

    lows = None if fasta is None else [softmasked(fasta.fetch(w.chrom, w.start, w.end))
                                       for w in train_ds.windows]
    r = learn_rules([x[:, :4] for x in train_ds.x], train_ds.y,
                    FrameLayout.from_scheme(scheme, exon_types=cfg.crf.exon_types), scheme,
                    lows=lows)
    branch = r.branch_penalty if cfg.crf.site_scores else 0.0  # needs the branch matrix
    ui.log("gene rules learned from the training annotation: " + r.describe())
    return dataclasses.replace(cfg, annotate=dataclasses.replace(
        cfg.annotate, donor_motif=r.donor_motif, branch_penalty=branch,
        first_atg=r.first_atg, long_orfs=r.long_orfs, max_masked_cds=r.max_masked_cds))


def _gold_layout(model, scheme):
    """The layout the training windows' gold codes index (no run tails; the model's
    exon types)."""
    from ..genemodel.frames import FrameLayout

    return FrameLayout.from_scheme(scheme, exon_types=model.crf.layout.has_exon_types)


def count_sites(model, scheme, train_ds: Dataset) -> None:
    """The site matrices of model.splice_features (donor, acceptor) and crf.site_scores
    (donor, acceptor, start, stop), counted at the training windows' gold sites
    (semiseg/genemodel/sites.py)."""
    from ..genemodel.sites import count_branch_pwm, count_site_pwms, site_windows

    layout = _gold_layout(model, scheme)
    onehots = [x[:, :4] for x in train_ds.x]
    sites = getattr(model.crf, "sites", None)
    # the head's order and windows (crf.site_order, crf.site_windows); the splice
    # channels read order 0 in the built-in windows, counted apart only where they differ
    own = (0, site_windows()) if sites is None else (sites.order, sites.windows)
    mats, n = count_site_pwms(onehots, train_ds.y, layout, order=own[0], sizes=own[1])
    users = []
    if getattr(model.encoder, "splice", None) is not None:
        plain = mats if own == (0, site_windows()) else count_site_pwms(
            onehots, train_ds.y, layout)[0]
        model.encoder.splice.set(plain["donor"], plain["acceptor"])
        users.append("the splice channels")
    if sites is not None:
        mats["branch"], seed = count_branch_pwm(onehots, train_ds.y, layout)
        model.crf.sites.set(mats)
        users.append("the site scores")
        ui.log(f"branch-point matrix from the training introns: seed {seed}" if seed else
               "no branch-point motif in the training introns: branch scores are 0")
    none = [s for s, k in n.items() if not k]
    ui.log(f"site matrices from {n['donor']} donors, {n['acceptor']} acceptors, "
           f"{n['start']} start and {n['stop']} stop codons of the training windows"
           + (f" (no {', '.join(none)}: those scores are 0 for {' and '.join(users)})"
              if none else ""))


def count_content(model, scheme, train_ds: Dataset) -> None:
    """The coding-content table of crf.content_scores, counted at the training windows'
    gold CDS and outside bases (semiseg/genemodel/content.py)."""
    from ..genemodel.content import ORDER, count_content, count_intron_content

    onehots, layout = [x[:, :4] for x in train_ds.x], _gold_layout(model, scheme)
    table, n = count_content(onehots, train_ds.y, layout)
    introns = None
    if model.crf.content.intron_cols:
        introns, ni = count_intron_content(onehots, train_ds.y, layout)
        ui.log(f"intron-content table (order {ORDER}) from {ni['intron']:,} intron bases"
               + ("" if ni["intron"] and ni["outside"] else ": too few, the scores are 0"))
    model.crf.content.set(table, introns)
    ui.log(f"coding-content table (order {ORDER}) from {n['coding']:,} coding and "
           f"{n['outside']:,} outside bases of the training windows"
           + ("" if n["coding"] and n["outside"] else ": too few, the scores are 0"))
