"""Calibration of segment posteriors for `semiseg evaluate`.

A predicted BED row (a maximal run of one label, as semiseg annotate writes them) is
*exactly right* when the truth labels every base of it with its label and the bases just
before and after it (where they exist on the chromosome) with another label (or leave
them unlabelled). semiseg annotate writes round(1000 x P(the run is exactly right)) in the
score column (see semiseg/annotate/uncertainty.py), so the rows binned by score/1000 should be
exactly right about as often as their bin says. Rows named `gap`, and rows of BED files
with fewer than 5 columns, are left out. Note: a row whose exact posterior is unknown
(cut by an N run, or outside every decoding window's inner part) has score 0 and falls
in the lowest bin.
"""

from __future__ import annotations

import os

import numpy as np

from ..genome import GAP, bed_rows

BINS = 10


def read_scores(path: str) -> dict[str, tuple[np.ndarray, np.ndarray, list[str], np.ndarray]]:
    """{chrom: (starts, ends, names, probability = score / 1000)} of the scored BED rows."""
    out: dict[str, tuple[list, list, list, list]] = {}
    for _, f in bed_rows(path):
        if len(f) < 5 or f[3] == GAP:
            continue
        try:
            s, e, v = int(f[1]), int(f[2]), float(f[4])
        except ValueError:
            continue
        rows = out.setdefault(f[0], ([], [], [], []))
        rows[0].append(s)
        rows[1].append(e)
        rows[2].append(f[3])
        rows[3].append(min(max(v / 1000.0, 0.0), 1.0))
    return {c: (np.asarray(a, np.int64), np.asarray(b, np.int64), n, np.asarray(p))
            for c, (a, b, n, p) in out.items()}


def new_counts() -> dict[str, np.ndarray]:
    return {"n": np.zeros(BINS, np.int64), "right": np.zeros(BINS, np.int64),
            "p_sum": np.zeros(BINS)}


def add_counts(counts: dict, truth: np.ndarray, rows, index: dict[str, int]) -> None:
    """Add one chromosome: `truth` (L,) label indices (-1 unlabelled), `rows` from
    read_scores for that chromosome."""
    L = len(truth)
    starts, ends, names, prob = rows
    for s, e, name, p in zip(starts.tolist(), ends.tolist(), names, prob.tolist()):
        c = index.get(name)
        if c is None or e > L:
            continue
        right = (bool((truth[s:e] == c).all()) and (s == 0 or truth[s - 1] != c)
                 and (e == L or truth[e] != c))
        k = min(int(p * BINS), BINS - 1)
        counts["n"][k] += 1
        counts["right"][k] += right
        counts["p_sum"][k] += p


def no_scores(pred: str) -> str | None:
    """Why `pred` has no segment posteriors to calibrate (None: it has them): its GFF3
    header (semiseg/genome/origin.py) says the BED scores are something else (the mean label
    posterior, or none), or every scored row is 0 (a model without run posteriors, or a
    BED from elsewhere)."""
    from ..genome import is_gff
    from ..genome.origin import prediction_origin

    if is_gff(pred):
        return "no scores (the prediction is a GFF3/GTF, not a scored BED)"
    origin = prediction_origin(pred)
    if origin is not None and origin.scores not in (None, "run_posterior"):
        return (f"no scores (the BED scores are {origin.scores.replace('_', ' ')}s, not "
                f"segment posteriors; {origin.source})")
    rows = read_scores(pred)
    if not any(len(r[3]) and float(r[3].max()) > 0 for r in rows.values()):
        return "no scores (every BED score is 0: no segment posteriors to calibrate)"
    return None


def summarise(counts: dict, note: str | None = None) -> dict:
    """Reliability table: per bin [lo, hi): rows, mean predicted probability, observed
    fraction exactly right; and the expected calibration error (row-weighted mean of
    |observed - predicted| over the bins). With a `note` (why there are no scores, from
    `no_scores`), no table: zero segments, ECE None, and the note."""
    if note is not None:
        counts = new_counts()
    n = counts["n"]
    rows = []
    for k in range(BINS):
        rows.append({"bin_lo": k / BINS, "bin_hi": (k + 1) / BINS, "segments": int(n[k]),
                     "mean_predicted": float(counts["p_sum"][k] / n[k]) if n[k] else None,
                     "observed": float(counts["right"][k] / n[k]) if n[k] else None})
    total = int(n.sum())
    ece = (sum(abs(r["observed"] - r["mean_predicted"]) * r["segments"] for r in rows
               if r["segments"]) / total) if total else None
    return {"bins": rows, "segments": total, "exactly_right": int(counts["right"].sum()),
            "ece": ece, "note": note}


def write(cal: dict, prefix: str) -> list[str]:
    """PREFIX.calibration.tsv and the reliability plot PREFIX.calibration.png."""
    tsv, png = f"{prefix}.calibration.tsv", f"{prefix}.calibration.png"
    lines = ["bin_lo\tbin_hi\tsegments\tmean_predicted\tobserved"]
    for r in cal["bins"]:
        lines.append("\t".join("nan" if r[k] is None else (f"{r[k]:.4f}" if isinstance(r[k], float)
                                                             else str(r[k]))
                               for k in ("bin_lo", "bin_hi", "segments", "mean_predicted",
                                         "observed")))
    tmp = tsv + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, tsv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="perfect")
    pts = [(r["mean_predicted"], r["observed"], r["segments"]) for r in cal["bins"]
           if r["segments"]]
    if pts:
        x, y, _ = zip(*pts)
        ax.plot(x, y, "o-", color="C0", label="segments")
        for xi, yi, ni in pts:
            ax.annotate(str(ni), (xi, yi), textcoords="offset points", xytext=(4, -10),
                        fontsize=7)
    ece = "n/a" if cal["ece"] is None else f"{cal['ece']:.3f}"
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="predicted P(segment exactly right)",
           ylabel="observed fraction exactly right",
           title=f"Calibration ({cal['segments']} segments, ECE {ece})")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    tmp = png + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, png)
    return [tsv, png]


def render(cal: dict):
    """A rich Table of the reliability bins."""
    from rich.table import Table

    ece = "n/a" if cal["ece"] is None else f"{cal['ece']:.3f}"
    table = Table(title=f"Segment posterior calibration ({cal['segments']} segments, "
                        f"{cal['exactly_right']} exactly right, ECE {ece})")
    for head in ("predicted", "segments", "mean predicted", "observed exactly right"):
        table.add_column(head, justify="right")
    for r in cal["bins"]:
        if r["segments"]:
            table.add_row(f"[{r['bin_lo']:.1f}, {r['bin_hi']:.1f})", str(r["segments"]),
                          f"{r['mean_predicted']:.3f}", f"{r['observed']:.3f}")
    return table
