"""What made a prediction, read back from its files: the model hash, the label scheme
(its name and, from files written since issue 43, its full definition), the resolution
and what the BED score column holds.

annotate's OutputWriter writes them into the GFF3 header (``# semiseg VERSION
model=HASH scheme=NAME resolution=R``, ``# semiseg_scheme: JSON``, ``# semiseg_scores:
KIND``) and the browser BED's track line (the first of them). PREFIX.bed itself stays
plain BED9 with no header (pyranges and other readers take a first line for column
names), so for a ``PREFIX.bed`` the headers are read from ``PREFIX.gff3`` or
``PREFIX.browser.bed`` beside it.

`evaluate` and `plot` take the label scheme from here (evaluate/intervals.scheme_for): a
`--model` or `--scheme` that differs from the prediction's is refused, as is a
prediction whose labels are not in the scheme; `merge` refuses parts of different
origins.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from ..errors import SemisegError

_LINE = re.compile(r"semiseg (\S+) model=(\S+) scheme=(.*?) resolution=(\d+)")
_SUFFIXES = (".browser.bed", ".stranded.bed", ".samples.bed", ".bed", ".gff3", ".gff")


@dataclass
class Origin:
    """A prediction's origin as recorded in `source` (None fields: not recorded)."""

    source: str
    version: str
    model: str
    scheme_name: str
    resolution: int
    scheme: object = None  # LabelScheme, from '# semiseg_scheme:'
    scores: str | None = None  # run_posterior, mean_label_posterior, none, mixed
    seqs: frozenset = frozenset()  # the GFF3's ##sequence-region names

    def key(self) -> tuple:
        return (self.model, self.scheme_name, self.resolution,
                None if self.scheme is None else _canonical(self.scheme))


def _canonical(scheme) -> str:
    return json.dumps(scheme.to_dict(), sort_keys=True)


def same_scheme(a, b) -> bool:
    """Whether two LabelSchemes are the same (name, labels, roles, colours, mapping)."""
    return _canonical(a) == _canonical(b)


def prefix_of(path: str) -> str:
    """The annotation prefix of one of its files (PREFIX.bed -> PREFIX)."""
    low = path.lower().removesuffix(".gz")
    for suffix in _SUFFIXES:
        if low.endswith(suffix):
            return path[:len(low) - len(suffix)]
    return path


def _read_header(path: str) -> Origin | None:
    """The origin recorded in the header lines of one GFF3 or browser BED file."""
    from urllib.parse import unquote

    from .scheme import LabelScheme

    found: dict = {}
    names: set[str] = set()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh):
                if n > 10000 or not line.startswith(("#", "track", "browser")):
                    break
                m = _LINE.search(line)
                if m and "model" not in found:
                    found.update(version=m.group(1), model=m.group(2),
                                 scheme_name=m.group(3), resolution=int(m.group(4)))
                elif line.startswith("# semiseg_scheme: "):
                    try:
                        found["scheme"] = LabelScheme.from_dict(
                            json.loads(line.split(": ", 1)[1]), where=path)
                    except (ValueError, SemisegError):
                        raise SemisegError(f"{path}: the '# semiseg_scheme:' header line is "
                                           "not a readable label scheme") from None
                elif line.startswith("# semiseg_scores: "):
                    found["scores"] = line.split(": ", 1)[1].strip()
                elif line.startswith("##sequence-region"):
                    parts = line.split()
                    if len(parts) > 1:
                        names.add(unquote(parts[1]))
    except OSError:
        return None
    if "model" not in found:
        return None
    return Origin(source=path, seqs=frozenset(names), **found)


def prediction_origin(pred: str) -> Origin | None:
    """The origin of a prediction (a PREFIX.bed, .browser.bed, .gff3, or the PREFIX),
    from its own header or its sibling files' (GFF3 first: it holds the most); None
    when nothing records it (a BED from elsewhere)."""
    pred = os.fspath(pred)
    prefix = prefix_of(pred)
    candidates = [pred] if pred.lower().endswith((".gff3", ".gff")) else []
    candidates += [f"{prefix}.gff3", f"{prefix}.browser.bed"]
    if pred.lower().endswith(".browser.bed"):
        candidates.insert(0, pred)
    first = (_first_sequence(pred) if os.path.isfile(pred) and candidates[:1] != [pred]
             else None)
    for path in dict.fromkeys(candidates):
        if os.path.isfile(path):
            found = _read_header(path)
            # a GFF3 beside the BED tells of it only if it has the BED's sequences (not
            # a file left from another run)
            if found is not None and (first is None or path == pred or not found.seqs
                                      or first in found.seqs):
                return found
    return None


def _first_sequence(pred: str) -> str | None:
    """The sequence name of a BED's first row."""
    from .labels import bed_rows

    for _, f in bed_rows(pred):
        return f[0]
    return None


def prediction_labels(pred: str) -> list[str]:
    """The label names of a predicted BED (column 4), or of a GFF3's 'label'/'Name'."""
    from .labels import bed_rows, is_gff
    from .scheme import GAP

    if is_gff(pred):
        return []  # a GFF3 prediction is mapped through the scheme when read
    seen: dict[str, None] = {}
    for _, f in bed_rows(pred):
        if len(f) >= 4 and f[3] != GAP:
            seen.setdefault(f[3])
    return list(seen)
