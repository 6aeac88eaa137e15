"""Accuracy of a segmentation against a truth annotation.

Metrics, per label:
- base level: precision, recall, F1 and Matthews correlation (label vs the rest) over
  every position that both sides label (positions masked as gaps are skipped);
- segment level: F1 of exact matches (same start and end) and of matches with >= 50%
  reciprocal overlap; a segment is a maximal run of one label;
- boundaries: F1 of segment starts/ends matched one-to-one within +-tolerance bp (the
  chromosome ends are not boundaries).
"macro" averages the labels that occur in the truth or the prediction.
- genes (truth a GFF3/GTF, gene_structure scheme): exon-level and gene-level
  sensitivity, precision and F1 of the coding exon chains (GENE_RULES below;
  semiseg/evaluate/genelevel.py reads the models, metrics.gene_level counts); stop codons
  normalised from the sequence when a FASTA is given.
- regions (a BED): only these intervals are scored, each as a sequence of its own (base
  counts, segments and boundaries inside it; its ends are no boundaries); gene models
  count when wholly inside a region. A truth transcript crossing a region's edge is
  labelled inside it as usual (give a truth restricted to whole transcripts to avoid it).
- stop codons, with a FASTA: a gene model (either side) whose CDS does not end with a
  stop codon but is followed by one gets it (genelevel.normalise_stops), for the gene
  and exon scores and in the base labels (those 3 bp become CDS where they were
  background), so a truth and a prediction that differ only in the convention (stop
  inside or just after the CDS rows) agree at every level.
- where both sides have calls only: a truth position without an interval takes the
  background label (the scheme's; none: not scored), a predicted position without a row
  or in a gap row is not scored (evaluate(fill_pred=True): background too); segments
  and boundaries are counted per stretch scored on both sides (so a truth segment where
  the prediction has no call, e.g. outside annotate --regions, is not missed); the
  result's "calls" gives the bp filled and left out.
- calibration of the BED score as a segment posterior (semiseg/evaluate/calibration.py): rows
  binned by score / 1000 against the fraction that is exactly right.

Chromosomes evaluated: those in the prediction (and in the regions, when given); their
lengths are taken from `sizes` or the FASTA when given, else from the furthest interval
end of the prediction (of either file for a GFF3/GTF prediction) or the regions. The counting is in
metrics.py (shared with training's validation), the file reading in evaluate/intervals.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from ..errors import SemisegError
from ..genome import GAP
from ..metrics import add_segment_counts, new_segment_counts, prf
from .intervals import Intervals, annotation_track, read_segments, read_truth


def _fill(length: int, track: Intervals, chrom: str, index: dict[str, int], fill: int):
    arr = np.full(length, fill, dtype=np.int32)
    if chrom in track.intervals:
        starts, ends, names = track.intervals[chrom]
        order = np.argsort(starts, kind="stable")
        for i in order:
            s, e = int(starts[i]), min(int(ends[i]), length)
            arr[s:e] = -1 if names[i] == GAP else index[names[i]]
    return arr



def read_regions_bed(path: str) -> dict[str, list[tuple[int, int]]]:
    """{chrom: merged sorted [(start, end)]} of a BED's first three columns."""
    from ..genome import bed_rows

    if not os.path.isfile(path):
        raise SemisegError(f"--regions: file not found: {path}")
    out: dict[str, list[tuple[int, int]]] = {}
    for n, f in bed_rows(path):
        if len(f) < 3:
            raise SemisegError(f"{path}:{n}: expected chrom, start, end")
        try:
            a, b = int(f[1]), int(f[2])
        except ValueError:
            raise SemisegError(f"{path}:{n}: start and end must be integers") from None
        if a < 0 or b <= a:
            raise SemisegError(f"{path}:{n}: region [{a}, {b}) is empty or negative "
                               "(BED: 0-based start, end exclusive)")
        out.setdefault(f[0], []).append((a, b))
    if not out:
        raise SemisegError(f"--regions: {path} has no regions")
    merged = {}
    for c, iv in out.items():
        m: list[list[int]] = []
        for a, b in sorted(iv):
            if m and a <= m[-1][1]:
                m[-1][1] = max(m[-1][1], b)
            else:
                m.append([a, b])
        merged[c] = [(a, b) for a, b in m]
    return merged


def evaluate(pred: str, truth: str, scheme=None, tolerance: int = 10,
             sizes: dict[str, int] | None = None, background: str | None = None,
             regions: str | dict | None = None, fasta: str | list | None = None,
             fill_pred: bool = False) -> dict:
    """Compare a predicted BED to a truth BED/GFF3; returns plain data (see module doc).

    Args:
        pred: BED with the label in the name column (semiseg's PREFIX.bed), or a GFF3/GTF
            of gene models (another gene finder's): its CDS, stop codons and the
            introns between them labelled through the scheme (`_track_from_models`;
            UTRs are not read).
        truth: BED (name = label) or GFF3/GTF (needs a scheme; default gene_structure).
        scheme: a LabelScheme, or None; maps truth labels, gives the background label.
        tolerance: bp within which a boundary counts as found.
        sizes: chromosome lengths; default: the FASTA's, else the furthest end in the
            prediction (a GFF3/GTF prediction: in either file) or in `regions`.
        background: label of truth positions the truth does not cover (default: the
            scheme's background; without one, they are not scored).
        regions: a BED path or {chrom: [(start, end)]}: score only these (module doc).
        fasta: the genome (path or paths): stop codons normalised (module doc), for the
            gene models and the base labels.
        fill_pred: also give predicted positions without a row the background (a
            prediction that lists only its non-background calls); by default they are
            not scored (the result's "calls" says how many bp were filled or left out).
    """
    from ..genome import is_gff
    from . import calibration

    pred_gff = is_gff(pred)
    fill_pred = fill_pred or pred_gff  # a gene-model file lists its genes only
    if scheme is None and (is_gff(truth) or pred_gff):
        from ..genome import load_scheme

        scheme = load_scheme("gene_structure")  # as read_truth reads a GFF: its background too
    p, ext, chroms, scored = _read_prediction(pred, pred_gff)
    cal = calibration.new_counts()
    if isinstance(regions, (str, os.PathLike)):
        regions = read_regions_bed(os.fspath(regions))
    if regions is not None:
        missing = [c for c in regions if c not in chroms]
        if missing:
            raise SemisegError(f"--regions: chromosome(s) {', '.join(missing)} not in the "
                               f"prediction {pred} ({', '.join(chroms)})")
        chroms = [c for c in chroms if c in regions]
    genome = _open_fasta(fasta, chroms, pred) if fasta is not None else None
    if genome is not None and sizes is None:
        sizes = dict(genome.chrom_sizes)
    sizes = _sizes(pred, truth, p, ext, chroms, sizes, regions)
    if pred_gff:
        p = _track_from_models(pred, scheme, sizes)
    t = read_truth(truth, scheme, sizes)
    if not any(c in t.intervals and len(t.intervals[c][0]) for c in chroms):
        raise SemisegError(
            f"no truth intervals on the predicted chromosomes ({', '.join(chroms)}); the "
            f"truth has {', '.join(sorted(t.intervals)) or 'none'}")
    if background is None and scheme is not None and scheme.background is not None:
        background = scheme.names[scheme.background]
    names = _label_names(t, p, chroms, background, scheme)
    index = {n: i for i, n in enumerate(names)}
    C = len(names)
    fill = index[background] if background is not None else -1
    conf = np.zeros((C, C), np.int64)  # [truth, pred]
    seg = new_segment_counts(C)
    # only positions where both sides have a call are scored: a truth position without an
    # interval takes the background (the scheme's rule for unlabelled positions); a
    # predicted one without a row, or in a gap row, is not scored (unless fill_pred)
    calls = {"truth_filled_bp": 0, "pred_filled_bp": 0, "pred_no_call_bp": 0,
             "truth_no_call_bp": 0}
    try:  # gene models first: with a FASTA their stop codons are normalised at every level
        genes, stops = _gene_scores(pred, truth, p, scheme, chroms, sizes, regions, genome,
                                    pred_gff)
    finally:
        if genome is not None:
            genome.close()
    for chrom in chroms:
        _score_chrom(chrom, sizes[chrom], t, p, index, fill, fill_pred, stops,
                     regions[chrom] if regions is not None else [(0, sizes[chrom])],
                     tolerance, conf, seg, calls, scored.get(chrom), cal)
    total = conf.sum()
    rows, macro = _label_rows(conf, seg, names)
    from .. import __version__

    return {
        "semiseg_version": __version__,
        "pred": str(pred), "truth": str(truth), "tolerance_bp": tolerance,
        "chromosomes": {c: sizes[c] for c in chroms},
        "regions": (None if regions is None else
                    {c: [list(r) for r in regions[c]] for c in chroms}),
        "bp_evaluated": int(total),
        "calls": calls,
        "accuracy": float(np.trace(conf) / total) if total else float("nan"),
        "labels": rows, "macro": macro,
        "confusion": {"labels": names, "truth_by_pred": conf.tolist()},
        "calibration": calibration.summarise(cal, calibration.no_scores(pred)),
        "genes": genes,
    }


def _read_prediction(pred: str, pred_gff: bool):
    """(segments Intervals or None for gene models, their extents or None, chromosomes,
    BED scores per chromosome) of a prediction."""
    if pred_gff:
        from ..genome import annotation_extents

        if not os.path.isfile(pred):
            raise SemisegError(f"file not found: {pred}")
        ext = annotation_extents(pred)
        if not ext:
            raise SemisegError(f"{pred}: no features")
        return None, ext, list(ext), {}
    from . import calibration

    p = read_segments(pred)
    return p, None, list(p.intervals), calibration.read_scores(pred)


def _open_fasta(fasta, chroms: list[str], pred: str):
    """The genome for stop codons; every chromosome of the prediction must be in it."""
    from ..genome.sequence import Fasta

    genome = Fasta(fasta)
    missing = [c for c in chroms if c not in genome.chrom_sizes]
    if missing:
        genome.close()
        raise SemisegError(f"--fasta: chromosome(s) {', '.join(missing)} of {pred} are "
                           f"not in the FASTA ({', '.join(list(genome.chrom_sizes)[:8])})")
    return genome


def _sizes(pred: str, truth: str, p, ext, chroms: list[str], sizes, regions) -> dict[str, int]:
    """The lengths of the chromosomes scored: `sizes` (checked) or, without it, the
    furthest end in the prediction (a GFF3/GTF prediction, `ext`: in either file) or the
    regions."""
    if sizes is None:
        if ext is not None:
            from ..genome import annotation_extents

            t_ext = annotation_extents(truth) if os.path.isfile(truth) else {}
            sizes = {c: max(ext[c], t_ext.get(c, 0)) for c in chroms}
        else:
            sizes = {c: int(p.intervals[c][1].max()) for c in chroms}
        for c, iv in (regions or {}).items():
            if c in sizes:
                sizes[c] = max(sizes[c], iv[-1][1])
        return sizes
    missing = [c for c in chroms if c not in sizes]
    if missing:
        raise SemisegError(f"{pred}: chromosome(s) {', '.join(missing)} not in the sizes "
                           f"given ({', '.join(sizes)})")
    sizes = {c: sizes[c] for c in chroms}
    for c, iv in (regions or {}).items():
        if c in sizes and iv[-1][1] > sizes[c]:
            raise SemisegError(f"--regions: region {c}:{iv[-1][0]}-{iv[-1][1]} runs past "
                               f"the end of {c} ({sizes[c]:,} bp)")
    return sizes


def _label_names(t: Intervals, p: Intervals, chroms: list[str], background: str | None,
                 scheme) -> list[str]:
    """The labels scored: those of either side (gaps aside) and the background, in the
    scheme's order first."""
    names: list[str] = []
    for track in (t, p):
        for c in chroms:
            for n in (track.intervals.get(c, (None, None, []))[2]):
                if n != GAP and n not in names:
                    names.append(n)
    if background is not None and background not in names:
        names.append(background)
    if scheme is not None:  # scheme order first, then anything else
        names = [n for n in scheme.names if n in names] + [n for n in names
                                                          if n not in scheme.names]
    return names


def _score_chrom(chrom: str, L: int, t: Intervals, p: Intervals, index: dict[str, int], fill: int,
                 fill_pred: bool, stops: dict, spans, tolerance: int, conf: np.ndarray,
                 seg: dict, calls: dict, scores, cal: dict) -> None:
    """Add one chromosome's counts (confusion, segments and boundaries, filled bp,
    calibration) over `spans`, each scored as a sequence of its own."""
    from . import calibration

    C = len(conf)
    ta_all = _fill(L, t, chrom, index, -2)
    pa_all = _fill(L, p, chrom, index, -2)
    t_fill, p_fill = ta_all == -2, pa_all == -2
    ta_all[t_fill] = fill
    pa_all[p_fill] = fill if fill_pred else -1
    # a stop codon that a side keeps just after its CDS is CDS there too (background
    # positions only)
    for arr, side in ((ta_all, "truth"), (pa_all, "pred")):
        for c, a, b, name in stops[side]:
            if c == chrom and name in index:
                part = arr[a:b]
                part[part == fill] = index[name]
    # with regions, each region is scored as a sequence of its own (its ends are no
    # boundaries; truth segments outside it are not counted)
    for lo, hi in spans:
        ta, pa = ta_all[lo:hi], pa_all[lo:hi]
        ok = (ta >= 0) & (pa >= 0)
        conf += np.bincount(ta[ok] * C + pa[ok], minlength=C * C).reshape(C, C)
        calls["truth_filled_bp"] += int((t_fill[lo:hi] & ok).sum())
        calls["pred_filled_bp"] += int((p_fill[lo:hi] & ok).sum())
        calls["pred_no_call_bp"] += int((pa < 0).sum())
        calls["truth_no_call_bp"] += int(((ta < 0) & (pa >= 0)).sum())
        # segments and boundaries per stretch scored on both sides (a stretch's ends
        # are no boundaries; a truth segment where the prediction has no call is not
        # missed)
        edges = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
        for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
            add_segment_counts(seg, ta[a:b], pa[a:b], tolerance)
        if scores is not None:
            st, en, nm, pr = scores
            sel = (st >= lo) & (en <= hi)
            calibration.add_counts(cal, ta, (st[sel] - lo, en[sel] - lo,
                                             [n for n, k in zip(nm, sel) if k], pr[sel]),
                                   index)


def _label_rows(conf: np.ndarray, seg: dict, names: list[str]) -> tuple[list[dict], dict]:
    """Per-label rows (base, segment and boundary scores) and their macro averages."""
    total = conf.sum()
    rows = []
    for c, name in enumerate(names):
        tp = conf[c, c]
        n_pred, n_true = conf[:, c].sum(), conf[c, :].sum()
        fp, fn = n_pred - tp, n_true - tp
        tn = total - tp - fp - fn
        prec, rec, f1 = prf(tp, n_pred, n_true)
        denom = math.sqrt(float(tp + fp) * float(tp + fn) * float(tn + fp) * float(tn + fn))
        mcc = (float(tp) * float(tn) - float(fp) * float(fn)) / denom if denom else float("nan")
        _, _, seg_exact = prf(seg["exact"][c], seg["n_pred"][c], seg["n_true"][c])
        ov_p = seg["ov_pred"][c] / seg["n_pred"][c] if seg["n_pred"][c] else float("nan")
        ov_r = seg["ov_true"][c] / seg["n_true"][c] if seg["n_true"][c] else float("nan")
        seg_ov = 2 * ov_p * ov_r / (ov_p + ov_r) if (ov_p + ov_r) > 0 else (
            0.0 if seg["n_pred"][c] and seg["n_true"][c] else float("nan"))
        b_p, b_r, b_f = prf(seg["b_hit"][c], seg["b_pred"][c], seg["b_true"][c])
        rows.append({
            "label": name, "bp_truth": int(n_true), "bp_pred": int(n_pred),
            "precision": prec, "recall": rec, "f1": f1, "mcc": mcc,
            "segments_truth": int(seg["n_true"][c]), "segments_pred": int(seg["n_pred"][c]),
            "segment_f1_exact": seg_exact, "segment_f1_overlap50": seg_ov,
            "boundary_precision": b_p, "boundary_recall": b_r, "boundary_f1": b_f,
        })
    macro = {}
    for key in ("precision", "recall", "f1", "mcc", "segment_f1_exact",
                "segment_f1_overlap50", "boundary_f1"):
        vals = [r[key] for r in rows if (r["bp_truth"] or r["bp_pred"]) and not math.isnan(r[key])]
        macro[key] = float(np.mean(vals)) if vals else float("nan")
    return rows, macro


def _track_from_models(path: str, scheme, sizes: dict[str, int]) -> Intervals:
    """The labels of a GFF3/GTF prediction: its coding structures only (CDS and stop_codon
    rows per transcript, genelevel.read_gene_models; gaps between them >= the scheme's
    min_intron are introns, shorter ones CDS), painted by the scheme's priority."""
    from ..genome.labels import Annotation

    if scheme.kind != "gene_structure":
        raise SemisegError(f"{path}: a GFF3/GTF prediction is read as gene models, which "
                           f"needs a gene-structure label scheme (not {scheme.name!r}); "
                           "give a BED of labels instead")
    from . import genelevel

    iv: dict[str, list[tuple[int, int, int]]] = {}
    for g in genelevel.read_gene_models(path, sizes):
        if g.end > sizes[g.chrom]:
            raise SemisegError(f"{path}: transcript {g.id} ends at {g.end:,}, past the end "
                               f"of {g.chrom} ({sizes[g.chrom]:,} bp)")
        cds, intron = scheme.role_label("CDS", g.strand), scheme.role_label("intron", g.strand)
        rows = iv.setdefault(g.chrom, [])
        rows += [(s, e, cds) for s, e in g.cds]
        for (_, e0), (s1, _) in zip(g.cds[:-1], g.cds[1:]):
            lab = intron if s1 - e0 >= scheme.min_intron else cds
            if lab is not None:
                rows.append((e0, s1, lab))
    ann = Annotation({c: tuple(np.array(v, np.int64).reshape(-1, 3).T) for c, v in iv.items()},
                     scheme, sizes)
    return annotation_track(ann, scheme, sizes)


GENE_RULES = (
    "Gene models = the CDS (and stop_codon) rows of each transcript (GFF3 Parent / GTF "
    "transcript_id), or of each run of CDS/UTR/intron segments of one strand in a BED. "
    "Exon level: distinct coding exons, right when both ends and the strand are. Gene "
    "level: a predicted model is right when its whole CDS chain is that of a truth "
    "transcript (any isoform, counted once); precision over predicted models, sensitivity "
    "over truth loci (transcripts on one strand whose CDS overlap are one locus; found "
    "when one of its transcripts is predicted exactly). With regions: models wholly "
    "inside a region only.")


def _gene_scores(pred, truth, p, scheme, chroms, sizes, regions, genome, pred_gff):
    """Exon- and gene-level scores (metrics.gene_level) when the truth is a GFF3/GTF read
    through a gene_structure scheme (None otherwise), and the stop codons that the
    normalisation added ({"truth"|"pred": [(chrom, start, end, CDS label name)]}, empty
    without a FASTA), for the base-level labels."""
    from ..genome import is_gff, load_scheme
    from ..metrics import gene_level, stop_variants
    from . import genelevel

    stops: dict[str, list] = {"truth": [], "pred": []}
    sc = scheme if scheme is not None else load_scheme("gene_structure")
    if not is_gff(truth) or sc.kind != "gene_structure":
        return None, stops
    t_models = genelevel.read_gene_models(truth, chroms)
    if pred_gff:
        p_models = genelevel.read_gene_models(pred, chroms)
    else:
        p_models = genelevel.models_from_segments(
            {c: p.intervals[c] for c in chroms if c in p.intervals}, sc)
    n_t, n_p = len(t_models), len(p_models)
    extended = None
    if genome is not None:
        norm = {}
        for side, models in (("truth", t_models), ("pred", p_models)):
            norm[side], _ = genelevel.normalise_stops(models, genome.fetch, sizes)
            for old, new in zip(models, norm[side]):
                if old.cds != new.cds:
                    a, b = ((old.end, new.end) if old.strand == "+" else
                            (new.start, old.start))
                    stops[side].append((old.chrom, a, b,
                                        sc.names[sc.role_label("CDS", old.strand)]))
        t_models, p_models = norm["truth"], norm["pred"]
    t_models = genelevel.inside(t_models, regions)
    p_models = genelevel.inside(p_models, regions)
    if genome is not None:
        n_te, n_pe = len(stops["truth"]), len(stops["pred"])
        extended = {"truth": n_te, "pred": n_pe}
        variants = None
        rule = ("normalised from the sequence: a stop codon just after the CDS joins it "
                f"({n_te} truth, {n_pe} predicted models on the chromosomes scored extended by 3 "
                "bp)")
    else:
        variants = stop_variants
        rule = ("not normalised (no --fasta): a model's 3' end may lie 3 bp either way "
                "(stop codon inside or just after the CDS)")
    out = gene_level([g.key for g in t_models], [g.key for g in p_models], variants)
    out["stop_codons"] = rule
    out["stop_extended"] = extended
    out["outside_regions"] = {"truth": n_t - len(t_models), "pred": n_p - len(p_models)}
    out["rules"] = GENE_RULES
    return out, stops


COLUMNS = ["label", "bp_truth", "bp_pred", "precision", "recall", "f1", "mcc",
           "segments_truth", "segments_pred", "segment_f1_exact", "segment_f1_overlap50",
           "boundary_precision", "boundary_recall", "boundary_f1"]


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4f}"
    return str(v)


def write_report(result: dict, prefix: str) -> list[str]:
    """PREFIX.tsv (one row per label, then "macro") and PREFIX.json; atomic. With a
    calibration (scored BED rows): PREFIX.calibration.tsv and PREFIX.calibration.png."""
    tsv, js = f"{prefix}.tsv", f"{prefix}.json"
    Path(tsv).parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(COLUMNS)]
    for r in result["labels"]:
        lines.append("\t".join(_fmt(r[k]) for k in COLUMNS))
    m = result["macro"]
    lines.append("\t".join(_fmt(m.get(k, "")) if k in m else ("macro" if k == "label" else "")
                           for k in COLUMNS))
    for path, text in ((tsv, "\n".join(lines) + "\n"),
                       (js, json.dumps(_json_safe(result), indent=2) + "\n")):
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    cal = result.get("calibration")
    if cal and cal["segments"]:
        from . import calibration

        return [tsv, js] + calibration.write(cal, prefix)
    return [tsv, js]


def _json_safe(obj):
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_json_safe(v) for v in obj]
    return obj


def render_table(result: dict, title: str = "Accuracy"):
    """A rich Table of the main metrics."""
    from rich.table import Table

    calls = result.get("calls") or {}
    left = [f"{calls[k]:,} bp {what}" for k, what in (
        ("pred_no_call_bp", "without a predicted call"),
        ("truth_no_call_bp", "without a truth label"),
        ("truth_filled_bp", "of truth filled as background"),
        ("pred_filled_bp", "of prediction filled as background")) if calls.get(k)]
    table = Table(title=f"{title} ({result['bp_evaluated']:,} bp, boundary tolerance "
                        f"+-{result['tolerance_bp']} bp)"
                  + (f"\nscored where both sides have calls: {'; '.join(left)}"
                     if left else ""))
    cols = [("label", "label"), ("bp_truth", "bp truth"), ("precision", "precision"),
            ("recall", "recall"), ("f1", "F1"), ("mcc", "MCC"),
            ("segment_f1_exact", "seg F1 exact"), ("segment_f1_overlap50", "seg F1 50%"),
            ("boundary_f1", "boundary F1")]
    for key, head in cols:
        table.add_column(head, justify="left" if key == "label" else "right")
    for r in result["labels"]:
        table.add_row(*[f"{r[k]:,}" if k == "bp_truth" else _fmt(r[k]) for k, _ in cols])
    m = result["macro"]
    table.add_row("macro", "", *[_fmt(m[k]) for k, _ in cols[2:]])
    return table


def render_gene_table(result: dict):
    """A rich Table of the exon- and gene-level scores (None without them)."""
    g = result.get("genes")
    if not g:
        return None
    from rich.table import Table

    table = Table(title=f"Exons and genes ({g['truth_models']:,} truth transcripts in "
                        f"{g['truth_loci']:,} loci, {g['pred_models']:,} predicted; stop "
                        f"codons {g['stop_codons'].split(':')[0]})")
    for head in ("level", "truth", "predicted", "truth found", "predicted right",
                 "sensitivity", "precision", "F1"):
        table.add_column(head, justify="left" if head == "level" else "right")
    e, n = g["exon"], g["gene"]
    table.add_row("exon (exact CDS exon)", f"{e['truth']:,}", f"{e['pred']:,}",
                  f"{e['truth_found']:,}", f"{e['pred_right']:,}", _fmt(e["sensitivity"]),
                  _fmt(e["precision"]), _fmt(e["f1"]))
    table.add_row("gene (exact CDS chain)", f"{n['truth_loci']:,} loci", f"{n['pred']:,}",
                  f"{n['loci_found']:,}", f"{n['pred_right']:,}", _fmt(n["sensitivity"]),
                  _fmt(n["precision"]), _fmt(n["f1"]))
    return table
