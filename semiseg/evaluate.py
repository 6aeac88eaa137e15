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
when given, else from the furthest interval end seen in either file.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SemisegError
from .genome import GAP, bed_rows, open_text



@dataclass
class Track:
    """Labelled intervals per chromosome: {chrom: (starts, ends, names)}."""

    intervals: dict[str, tuple[np.ndarray, np.ndarray, list[str]]]


def read_bed_labels(path: str) -> Track:
    """Intervals and names of a BED file (name column = label; needs >= 4 columns)."""
    if not os.path.isfile(path):
        raise SemisegError(f"file not found: {path}")
    data: dict[str, tuple[list, list, list]] = {}
    for n, f in bed_rows(path):
        if len(f) < 4:
            raise SemisegError(f"{path}:{n}: expected at least 4 columns "
                               "(chrom, start, end, name)")
        try:
            s, e = int(f[1]), int(f[2])
        except ValueError:
            raise SemisegError(f"{path}:{n}: start and end must be integers") from None
        if s < 0 or e <= s:
            raise SemisegError(f"{path}:{n}: invalid interval [{s}, {e})")
        starts, ends, names = data.setdefault(f[0], ([], [], []))
        starts.append(s)
        ends.append(e)
        names.append(f[3])
    if not data:
        raise SemisegError(f"{path}: no intervals")
    return Track({c: (np.asarray(s, np.int64), np.asarray(e, np.int64), nm)
                  for c, (s, e, nm) in data.items()})


def _is_gff(path: str) -> bool:
    p = str(path).lower().removesuffix(".gz")
    return p.endswith((".gff", ".gff3", ".gtf"))


def load_scheme_arg(scheme: str | None):
    """A LabelScheme from a scheme name/YAML, or from a semiseg config's `labels.scheme`."""
    if scheme is None:
        return None
    from .genome import LabelScheme, load_scheme

    if str(scheme).endswith((".yaml", ".yml")) and os.path.isfile(scheme):
        from .config import read_yaml

        data = read_yaml(scheme)
        if "labels" in data:  # a semiseg training config
            from .config import load_config

            inner = load_config(scheme).labels.scheme
            return LabelScheme.from_dict(inner) if isinstance(inner, dict) else load_scheme(inner)
    return load_scheme(scheme)


def scheme_from_checkpoint(path: str):
    """The LabelScheme a model was trained with."""
    from .genome import LabelScheme
    from .train import load_checkpoint

    return LabelScheme.from_dict(load_checkpoint(path)["labels"])


def annotation_extents(path: str) -> dict[str, int]:
    """Furthest end per chromosome name in a BED or GFF3/GTF file (names in file order).

    The genome readers require every chromosome of an annotation to be in the FASTA; a
    genome-wide annotation used with a FASTA of some chromosomes is common, so callers
    read it against the FASTA's sizes plus these extents and keep the FASTA's chromosomes.
    """
    gff = _is_gff(path)
    ext: dict[str, int] = {}
    with open_text(path) as fh:
        for line in fh:
            if line.startswith("##FASTA"):
                break
            if line.startswith(("#", "track", "browser")) or not line.strip():
                continue
            f = line.split("\t")
            col = 4 if gff else 2
            if len(f) > col:
                try:
                    ext[f[0]] = max(ext.get(f[0], 0), int(f[col]))
                except ValueError:
                    continue
    return ext


def sizes_with_extras(path: str, sizes: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """`sizes` plus the annotation's other chromosomes (at their furthest end), and the
    list of those others. If no chromosome of the annotation is in `sizes` there is
    nothing to add: the reader then reports the mismatch, listing both sides."""
    ext = annotation_extents(path)
    extras = [c for c in ext if c not in sizes]
    if len(extras) == len(ext):
        return dict(sizes), []
    out = dict(sizes)
    for c in extras:
        out[c] = ext[c]
    return out, extras


def read_truth(path: str, scheme, sizes: dict[str, int]) -> Track:
    """Truth intervals: a BED (names as they are, or via `scheme`), or a GFF3/GTF (scheme)."""
    if not os.path.isfile(path):
        raise SemisegError(f"file not found: {path}")
    if scheme is None and not _is_gff(path):
        return read_bed_labels(path)
    if scheme is None:
        from .genome import load_scheme

        scheme = load_scheme("gene_structure")
    from .genome import read_annotation

    # the truth may cover more chromosomes than were predicted: keep the predicted ones
    all_sizes, _ = sizes_with_extras(path, sizes)
    ann = read_annotation(path, scheme, all_sizes)
    out = {}
    for chrom in sizes:
        s, e, lab = ann.intervals(chrom)
        keep = lab >= 0
        out[chrom] = (s[keep], e[keep], [scheme.names[i] for i in lab[keep]])
    return Track(out)


def _fill(length: int, track: Track, chrom: str, index: dict[str, int], fill: int):
    arr = np.full(length, fill, dtype=np.int32)
    if chrom in track.intervals:
        starts, ends, names = track.intervals[chrom]
        order = np.argsort(starts, kind="stable")
        for i in order:
            s, e = int(starts[i]), min(int(ends[i]), length)
            arr[s:e] = -1 if names[i] == GAP else index[names[i]]
    return arr


def runs(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximal runs of equal values: (starts, ends, values)."""
    if arr.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    change = np.flatnonzero(arr[1:] != arr[:-1]) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [arr.size]])
    return starts, ends, arr[starts]


def _overlap_matches(ps, pe, ts, te) -> tuple[int, int]:
    """Numbers of predicted and true segments with a >= 50% reciprocal-overlap partner."""
    hit_p = np.zeros(len(ps), bool)
    hit_t = np.zeros(len(ts), bool)
    j = 0
    for i in range(len(ps)):
        while j < len(ts) and te[j] <= ps[i]:
            j += 1
        k = j
        while k < len(ts) and ts[k] < pe[i]:
            ov = min(pe[i], te[k]) - max(ps[i], ts[k])
            if 2 * ov >= pe[i] - ps[i] and 2 * ov >= te[k] - ts[k]:
                hit_p[i] = hit_t[k] = True
            k += 1
    return int(hit_p.sum()), int(hit_t.sum())


def _boundary_matches(p: np.ndarray, t: np.ndarray, tol: int) -> int:
    """One-to-one matches between sorted boundary positions within +-tol (greedy, optimal
    on a line)."""
    i = j = n = 0
    while i < len(p) and j < len(t):
        if abs(int(p[i]) - int(t[j])) <= tol:
            n, i, j = n + 1, i + 1, j + 1
        elif p[i] < t[j]:
            i += 1
        else:
            j += 1
    return n


def new_segment_counts(C: int) -> dict[str, np.ndarray]:
    """Zeroed per-label counters for `add_segment_counts`."""
    return {k: np.zeros(C, np.int64) for k in ("n_pred", "n_true", "exact", "ov_pred",
                                               "ov_true", "b_pred", "b_true", "b_hit")}


def add_segment_counts(seg: dict, truth: np.ndarray, pred: np.ndarray, tolerance: int) -> None:
    """Add the segment and boundary counts of one sequence (label arrays of equal length,
    -1 = unlabelled) to `seg`: segments, exact matches, >= 50% reciprocal-overlap matches,
    boundaries and boundaries matched within `tolerance` positions, per label."""
    L = len(truth)
    trs, tre, trv = runs(truth)
    prs, pre, prv = runs(pred)
    for c in range(len(seg["n_pred"])):
        ts, te = trs[trv == c], tre[trv == c]
        ps, pe = prs[prv == c], pre[prv == c]
        seg["n_pred"][c] += len(ps)
        seg["n_true"][c] += len(ts)
        seg["exact"][c] += len(set(zip(ps.tolist(), pe.tolist()))
                               & set(zip(ts.tolist(), te.tolist())))
        hp, ht = _overlap_matches(ps, pe, ts, te)
        seg["ov_pred"][c] += hp
        seg["ov_true"][c] += ht
        pb = np.unique(np.concatenate([ps, pe]))
        tb = np.unique(np.concatenate([ts, te]))
        pb = pb[(pb > 0) & (pb < L)]
        tb = tb[(tb > 0) & (tb < L)]
        seg["b_pred"][c] += len(pb)
        seg["b_true"][c] += len(tb)
        seg["b_hit"][c] += _boundary_matches(pb, tb, tolerance)


def segment_f1(seg: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per-label F1 of >= 50% reciprocal-overlap segment matches and of boundaries
    (nan where a label has no segments on either side)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = seg["ov_pred"] / seg["n_pred"]
        r = seg["ov_true"] / seg["n_true"]
        ov = np.where((p + r) > 0, 2 * p * r / (p + r), 0.0)
        ov = np.where((seg["n_pred"] + seg["n_true"]) > 0, ov, np.nan)
        ov = np.where((seg["n_pred"] > 0) & (seg["n_true"] > 0), ov,
                      np.where((seg["n_pred"] + seg["n_true"]) > 0, 0.0, np.nan))
        nb = seg["b_pred"] + seg["b_true"]
        bf = np.where(nb > 0, 2 * seg["b_hit"] / nb, np.nan)
    return ov, bf


def _prf(tp: float, n_pred: float, n_true: float) -> tuple[float, float, float]:
    p = tp / n_pred if n_pred else float("nan")
    r = tp / n_true if n_true else float("nan")
    f = 2 * tp / (n_pred + n_true) if (n_pred + n_true) else float("nan")
    return p, r, f


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

    p = read_bed_labels(pred)
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
        prec, rec, f1 = _prf(tp, n_pred, n_true)
        denom = math.sqrt(float(tp + fp) * float(tp + fn) * float(tn + fp) * float(tn + fn))
        mcc = (float(tp) * float(tn) - float(fp) * float(fn)) / denom if denom else float("nan")
        _, _, seg_exact = _prf(seg["exact"][c], seg["n_pred"][c], seg["n_true"][c])
        ov_p = seg["ov_pred"][c] / seg["n_pred"][c] if seg["n_pred"][c] else float("nan")
        ov_r = seg["ov_true"][c] / seg["n_true"][c] if seg["n_true"][c] else float("nan")
        seg_ov = 2 * ov_p * ov_r / (ov_p + ov_r) if (ov_p + ov_r) > 0 else (
            0.0 if seg["n_pred"][c] and seg["n_true"][c] else float("nan"))
        b_p, b_r, b_f = _prf(seg["b_hit"][c], seg["b_pred"][c], seg["b_true"][c])
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
