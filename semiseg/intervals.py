"""Labelled intervals from files, for `evaluate` and `plot`: a segmentation (BED, label in
the name column) or a truth (BED, or GFF3/GTF through a label scheme), and the label
scheme that `--model` / `--scheme` name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .errors import SemisegError
from .genome import bed_rows, is_gff


@dataclass
class Track:
    """Labelled intervals per chromosome: {chrom: (starts, ends, names)}."""

    intervals: dict[str, tuple[np.ndarray, np.ndarray, list[str]]]


def read_segments(path: str) -> Track:
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


def read_truth(path: str, scheme, sizes: dict[str, int]) -> Track:
    """Truth intervals: a BED (names as they are, or via `scheme`), or a GFF3/GTF (scheme;
    default gene_structure), on the chromosomes of `sizes` (others are ignored)."""
    from .genome import load_scheme, read_annotation, sizes_with_extras

    if not os.path.isfile(path):
        raise SemisegError(f"file not found: {path}")
    if scheme is None and not is_gff(path):
        return read_segments(path)
    if scheme is None:
        scheme = load_scheme("gene_structure")
    # the truth may cover more chromosomes than were predicted: keep the predicted ones
    all_sizes, _ = sizes_with_extras(path, sizes)
    return annotation_track(read_annotation(path, scheme, all_sizes), scheme, sizes)


def annotation_track(ann, scheme, sizes: dict[str, int]) -> Track:
    """The labelled intervals of an Annotation on the chromosomes of `sizes`, as a Track
    (label names; unlabelled stretches left out)."""
    out = {}
    for chrom in sizes:
        s, e, lab = ann.intervals(chrom)
        keep = lab >= 0
        out[chrom] = (s[keep], e[keep], [scheme.names[i] for i in lab[keep]])
    return Track(out)


def load_scheme_arg(scheme: str | None):
    """A LabelScheme from a scheme name/YAML, or from a semiseg config's `labels.scheme`."""
    if scheme is None:
        return None
    from .genome import load_scheme

    if str(scheme).endswith((".yaml", ".yml")) and os.path.isfile(scheme):
        from .config import load_config, read_yaml

        # a semiseg training config has a labels section; a scheme YAML a list of labels
        if isinstance(read_yaml(scheme).get("labels"), dict):
            return load_scheme(load_config(scheme).labels.scheme)
    return load_scheme(scheme)


def scheme_from_checkpoint(path: str):
    """The LabelScheme a model was trained with."""
    from .checkpoint import checkpoint_scheme, load_checkpoint

    return checkpoint_scheme(load_checkpoint(path))


def pick_scheme(model: str | os.PathLike | None = None, scheme: str | None = None):
    """The label scheme of `--model CHECKPOINT` (it wins) or `--scheme CFG|YAML|NAME`;
    None when neither is given."""
    if model:
        return scheme_from_checkpoint(str(model))
    return load_scheme_arg(scheme)
