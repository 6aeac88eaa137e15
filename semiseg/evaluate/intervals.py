"""Labelled intervals from files, for `evaluate` and `plot`: a segmentation (BED, label in
the name column) or a truth (BED, or GFF3/GTF through a label scheme), and the label
scheme that `--model` / `--scheme` name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import SemisegError
from ..genome import bed_rows, is_gff, load_scheme
from ..genome.origin import prediction_labels, prediction_origin, same_scheme


@dataclass
class Intervals:
    """Labelled intervals per chromosome: {chrom: (starts, ends, names)}."""

    intervals: dict[str, tuple[np.ndarray, np.ndarray, list[str]]]


def read_segments(path: str) -> Intervals:
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
    return Intervals({c: (np.asarray(s, np.int64), np.asarray(e, np.int64), nm)
                  for c, (s, e, nm) in data.items()})


def read_truth(path: str, scheme, sizes: dict[str, int]) -> Intervals:
    """Truth intervals: a BED (names as they are, or via `scheme`), or a GFF3/GTF (scheme;
    default gene_structure), on the chromosomes of `sizes` (others are ignored)."""
    from ..genome import read_annotation, sizes_with_extras

    if not os.path.isfile(path):
        raise SemisegError(f"file not found: {path}")
    if scheme is None and not is_gff(path):
        return read_segments(path)
    if scheme is None:
        scheme = load_scheme("gene_structure")
    # the truth may cover more chromosomes than were predicted: keep the predicted ones
    all_sizes, _ = sizes_with_extras(path, sizes)
    return annotation_track(read_annotation(path, scheme, all_sizes), scheme, sizes)


def annotation_track(ann, scheme, sizes: dict[str, int]) -> Intervals:
    """The labelled intervals of an Annotation on the chromosomes of `sizes`, as Intervals
    (label names; unlabelled stretches left out)."""
    out = {}
    for chrom in sizes:
        s, e, lab = ann.intervals(chrom)
        keep = lab >= 0
        out[chrom] = (s[keep], e[keep], [scheme.names[i] for i in lab[keep]])
    return Intervals(out)


def load_scheme_arg(scheme: str | None):
    """A LabelScheme from a scheme name/YAML, or from a semiseg config's `labels.scheme`."""
    if scheme is None:
        return None
    if str(scheme).endswith((".yaml", ".yml")) and os.path.isfile(scheme):
        from ..config.load import load_config, read_yaml

        # a semiseg training config has a labels section; a scheme YAML a list of labels
        if isinstance(read_yaml(scheme).get("labels"), dict):
            return load_scheme(load_config(scheme).labels.scheme)
    return load_scheme(scheme)


def scheme_from_checkpoint(path: str):
    """The LabelScheme a model was trained with."""
    from ..checkpoint import load_checkpoint

    return load_checkpoint(path).scheme


def pick_scheme(model: str | os.PathLike | None = None, scheme: str | None = None):
    """The label scheme of `--model CHECKPOINT` (it wins) or `--scheme CFG|YAML|NAME`;
    None when neither is given."""
    if model:
        return scheme_from_checkpoint(str(model))
    return load_scheme_arg(scheme)


def scheme_for(pred: str, model=None, scheme: str | None = None, truth: str | None = None):
    """The label scheme to read a prediction and its truth with: the one recorded with
    the prediction; a `--model` or `--scheme` given as well must be the same (else a
    SemisegError naming both). Without a record, the given one; without either, None
    (labels as they are), or gene_structure for a GFF3/GTF truth (as read_truth does).
    Every label of the prediction must be in the scheme."""
    pred = os.fspath(pred)
    given = pick_scheme(model, scheme)
    what = f"--model {model}" if model else f"--scheme {scheme}"
    origin = prediction_origin(pred) if os.path.isfile(pred) else None
    chosen = given
    if origin is not None:
        recorded = origin.scheme
        if recorded is None and given is None:
            from ..genome.scheme import BUILTIN_SCHEMES

            if origin.scheme_name not in BUILTIN_SCHEMES:
                raise SemisegError(
                    f"{pred} was made with label scheme {origin.scheme_name!r} (model "
                    f"{origin.model}, {origin.source}), which is not built in: give the "
                    "model that made it (--model)")
            recorded = load_scheme(origin.scheme_name)
        if given is not None:
            differs = (not same_scheme(given, recorded) if origin.scheme is not None
                       else given.name != origin.scheme_name)
            if differs:
                raise SemisegError(
                    f"{what} has label scheme {given.name!r} ({', '.join(given.names)}) but "
                    f"{pred} was made with scheme {origin.scheme_name!r} "
                    f"({', '.join(recorded.names)}; model {origin.model}): use the model "
                    "that made it, or leave --model/--scheme out")
        chosen = given if given is not None else recorded
    check = chosen
    if check is None and truth is not None:
        if is_gff(truth):
            check = load_scheme("gene_structure")  # read_truth's default
    if check is not None and os.path.isfile(pred):
        bad = [n for n in prediction_labels(pred) if n not in check.names]
        if bad:
            raise SemisegError(
                f"{pred}: label(s) {', '.join(bad[:6])} are not in the label scheme "
                f"{check.name!r} ({', '.join(check.names)}): give the model that made it "
                "(--model) or its --scheme")
    return chosen
