"""Accuracy of a segmentation against a truth annotation.

Metrics, per label:
- base level: precision, recall, F1 and Matthews correlation (label vs the rest) over
  every position that both sides label (positions masked as gaps are skipped);
- segment level: F1 of exact matches (same start and end) and of matches with >= 50%
  reciprocal overlap; a segment is a maximal run of one label;
- boundaries: F1 of segment starts/ends matched one-to-one within +-tolerance bp (the
  chromosome ends are not boundaries).
"macro" averages the labels that occur in the truth or the prediction.
- calibration of the BED score as a segment posterior (semiseg/calibration.py): rows
  binned by score / 1000 against the fraction that is exactly right.

Chromosomes evaluated: those in the prediction; their lengths are taken from `sizes`
when given, else from the furthest interval end seen in either file. The counting is in
metrics.py (shared with training's validation), the file reading in intervals.py.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from .errors import SemisegError
from .genome import GAP
from .intervals import Track, load_scheme_arg, read_segments, read_truth  # noqa: F401
from .metrics import add_segment_counts, new_segment_counts, prf, segment_f1  # noqa: F401


def _fill(length: int, track: Track, chrom: str, index: dict[str, int], fill: int):
    arr = np.full(length, fill, dtype=np.int32)
    if chrom in track.intervals:
        starts, ends, names = track.intervals[chrom]
        order = np.argsort(starts, kind="stable")
        for i in order:
            s, e = int(starts[i]), min(int(ends[i]), length)
            arr[s:e] = -1 if names[i] == GAP else index[names[i]]
    return arr



def evaluate(pred: str, truth: str, scheme=None, tolerance: int = 10,
             sizes: dict[str, int] | None = None, background: str | None = None) -> dict:
    """Compare a predicted BED to a truth BED/GFF3; returns plain data (see module doc).

    Args:
        pred: BED with the label in the name column (semiseg's PREFIX.bed).
        truth: BED (name = label) or GFF3/GTF (needs a scheme; default gene_structure).
        scheme: a LabelScheme, or None; maps truth labels, gives the background label.
        tolerance: bp within which a boundary counts as found.
        sizes: chromosome lengths; default: the furthest end in either file.
        background: label of positions neither file covers (default: the scheme's
            background; without one, uncovered positions are skipped).
    """
    from . import calibration

    p = read_segments(pred)
    scored = calibration.read_scores(pred)
    cal = calibration.new_counts()
    chroms = list(p.intervals)
    if sizes is None:
        sizes = {c: int(p.intervals[c][1].max()) for c in chroms}
    else:
        missing = [c for c in chroms if c not in sizes]
        if missing:
            raise SemisegError(f"{pred}: chromosome(s) {', '.join(missing)} not in the sizes "
                               f"given ({', '.join(sizes)})")
        sizes = {c: sizes[c] for c in chroms}
    t = read_truth(truth, scheme, sizes)
    if not any(c in t.intervals and len(t.intervals[c][0]) for c in chroms):
        raise SemisegError(
            f"no truth intervals on the predicted chromosomes ({', '.join(chroms)}); the "
            f"truth has {', '.join(sorted(t.intervals)) or 'none'}")
    if background is None and scheme is not None and scheme.background is not None:
        background = scheme.names[scheme.background]
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
    index = {n: i for i, n in enumerate(names)}
    C = len(names)
    fill = index[background] if background is not None else -1
    conf = np.zeros((C, C), np.int64)  # [truth, pred]
    seg = new_segment_counts(C)
    for chrom in chroms:
        L = sizes[chrom]
        ta = _fill(L, t, chrom, index, fill)
        pa = _fill(L, p, chrom, index, fill)
        ok = (ta >= 0) & (pa >= 0)
        conf += np.bincount(ta[ok] * C + pa[ok], minlength=C * C).reshape(C, C)
        add_segment_counts(seg, ta, pa, tolerance)
        if chrom in scored:
            calibration.add_counts(cal, ta, scored[chrom], index)
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
    from . import __version__

    return {
        "semiseg_version": __version__,
        "pred": str(pred), "truth": str(truth), "tolerance_bp": tolerance,
        "chromosomes": {c: sizes[c] for c in chroms},
        "bp_evaluated": int(total),
        "accuracy": float(np.trace(conf) / total) if total else float("nan"),
        "labels": rows, "macro": macro,
        "confusion": {"labels": names, "truth_by_pred": conf.tolist()},
        "calibration": calibration.summarise(cal),
    }


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

    table = Table(title=f"{title} ({result['bp_evaluated']:,} bp, boundary tolerance "
                        f"+-{result['tolerance_bp']} bp)")
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


def markdown_table(result: dict) -> str:
    """The same table as Markdown (for README / RESULTS)."""
    keys = ["label", "bp_truth", "precision", "recall", "f1", "mcc", "segment_f1_exact",
            "segment_f1_overlap50", "boundary_f1"]
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in result["labels"]:
        out.append("| " + " | ".join(_fmt(r[k]) for k in keys) + " |")
    m = result["macro"]
    out.append("| macro | | " + " | ".join(_fmt(m[k]) for k in keys[2:]) + " |")
    return "\n".join(out)
