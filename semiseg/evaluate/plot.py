"""`semiseg plot`: a region of a segmentation drawn against the truth (matplotlib).

Rows, top to bottom: truth segments (if given), predicted segments, and the label
posteriors from PREFIX.posterior.LABEL.bw (if an annotation prefix is given), with the
boundary posterior from PREFIX.boundary.bw.
"""

from __future__ import annotations

import glob
import os

import numpy as np

from ..errors import SemisegError
from ..genome.windows import parse_region
from .intervals import read_segments, read_truth


def _region(text: str) -> tuple[str, int, int]:
    """--region chrom:start-end (genome.windows.parse_region), with a range and end > start."""
    chrom, s, e = parse_region(text.strip())
    if e < 0:
        raise SemisegError(f"--region {text!r}: expected chrom:start-end")
    if e <= s:
        raise SemisegError(f"--region {text!r}: end must be after start")
    return chrom, s, e


def _image_kinds() -> set[str]:
    """File extensions matplotlib can write (png, pdf, svg, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return set(FigureCanvasBase.get_supported_filetypes())


def _colors(names: list[str], scheme) -> dict[str, tuple]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    out = {}
    for i, n in enumerate(names):
        if scheme is not None and n in scheme.names:
            out[n] = tuple(v / 255 for v in scheme.colors[scheme.names.index(n)])
        else:
            out[n] = cmap(i % 10)
    return out


def _draw_segments(ax, intervals, chrom, start, end, colors, label, background=None):
    if background is not None:  # positions no interval covers
        ax.broken_barh([(start, end - start)], (0, 1), facecolors=colors[background])
    if chrom in intervals:
        s, e, names = intervals[chrom]
        for a, b, n in zip(s.tolist(), e.tolist(), names):
            if b <= start or a >= end or n == "gap":
                continue
            ax.broken_barh([(max(a, start), min(b, end) - max(a, start))], (0, 1),
                           facecolors=colors.get(n, (0.5, 0.5, 0.5)))
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_ylabel(label, rotation=0, ha="right", va="center")


def plot_region(pred: str, region: str, out: str, truth: str | None = None, scheme=None,
                posteriors: str | None = None) -> str:
    """Draw `region` (chrom:start-end) of the predicted BED; returns the file written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ext = os.path.splitext(out)[1].lower().lstrip(".")
    kinds = _image_kinds()
    if ext and ext not in kinds:  # no extension: PNG
        raise SemisegError(f"--out {out}: .{ext} is not an image format matplotlib writes "
                           f"({', '.join(sorted(kinds))})")
    if os.path.isdir(out):
        raise SemisegError(f"--out {out} is a folder; give the image file to write")
    chrom, start, end = _region(region)
    p = read_segments(pred)
    if chrom not in p.intervals:
        raise SemisegError(f"{pred}: no segments on {chrom} (it has "
                           f"{', '.join(list(p.intervals)[:8])})")
    size = int(p.intervals[chrom][1].max())
    if start >= size:
        raise SemisegError(f"--region {region}: starts at or beyond the end of {chrom} "
                           f"({size:,} bp in {pred})")
    end = min(end, size)
    names = list(scheme.names) if scheme is not None else []
    for n in p.intervals[chrom][2]:
        if n not in names and n != "gap":
            names.append(n)
    colors = _colors(names, scheme)
    t = read_truth(truth, scheme, {chrom: size}) if truth else None
    post = {}
    if posteriors:
        from ..genome import read_bigwig

        files = sorted(glob.glob(f"{glob.escape(posteriors)}.posterior.*.bw"))
        if not files:
            raise SemisegError(f"--posteriors: no {posteriors}.posterior.LABEL.bw files")
        for f in files:
            label = f[len(posteriors) + len(".posterior."):-len(".bw")]
            post[label] = read_bigwig(f, chrom, start, end)
        bfile = f"{posteriors}.boundary.bw"
        if os.path.isfile(bfile):
            post["__boundary__"] = read_bigwig(bfile, chrom, start, end)
    rows = (1 if t else 0) + 1 + (1 if post else 0)
    heights = ([0.6] if t else []) + [0.6] + ([2.5] if post else [])
    fig, axes = plt.subplots(rows, 1, figsize=(12, 1.0 + sum(heights)), sharex=True,
                             gridspec_kw={"height_ratios": heights})
    axes = np.atleast_1d(axes)
    i = 0
    if t:
        bg = (scheme.names[scheme.background]
              if scheme is not None and scheme.background is not None else None)
        _draw_segments(axes[i], t.intervals, chrom, start, end, colors, "truth", bg)
        i += 1
    _draw_segments(axes[i], p.intervals, chrom, start, end, colors, "semiseg")
    i += 1
    if post:
        ax = axes[i]
        x = np.arange(start, end)
        for label, v in post.items():
            if label == "__boundary__":
                ax.plot(x, np.nan_to_num(v), color="black", lw=0.6, label="boundary")
            else:
                ax.plot(x, np.nan_to_num(v), color=colors.get(label, None), lw=1.0, label=label)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel("posterior")
        ax.legend(loc="upper right", fontsize=7, ncol=len(post))
    axes[-1].set_xlim(start, end)
    axes[-1].set_xlabel(f"{chrom} (bp)")
    handles = [Patch(color=colors[n], label=n) for n in names]
    axes[0].legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.0),
                   ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout()
    root, ext = os.path.splitext(out)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = f"{root}.tmp{ext or '.png'}"
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, out)
    return out
