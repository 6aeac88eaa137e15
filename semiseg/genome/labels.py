"""Label schemes and annotations (BED, GFF3, GTF) -> per-position label arrays.

A label array is ``(T,) int64``: a label index per position, ``-1`` where masked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

import numpy as np

from ..errors import SemisegError
from ._util import ChromMatcher, bin_majority, check_region, open_text, overlapping, paint

_CHUNK = 1 << 22  # bp rasterised at a time
GAP = "gap"  # reserved name: N gaps in outputs; reads back as masked (-1)
ROLES = ("CDS", "UTR", "intron", "ncRNA")
_SCHEME_KEYS = {"name", "kind", "background", "min_intron", "labels", "priority", "gff"}
_LABEL_KEYS = {"name", "color", "strand", "role", "aliases", "gff_type"}
_GFF_KEYS = {"cds_types", "exon_types", "utr_types", "intron_types", "ncrna_types"}
_GFF_DEFAULTS = {
    "cds_types": ["CDS", "stop_codon"],
    "exon_types": ["exon", "noncoding_exon"],
    "utr_types": ["five_prime_UTR", "three_prime_UTR", "UTR", "5UTR", "3UTR",
                  "five_prime_utr", "three_prime_utr"],
    "intron_types": ["intron"],
    "ncrna_types": ["ncRNA", "tRNA", "snoRNA", "snRNA", "rRNA", "lnc_RNA", "lncRNA", "miRNA"],
}
_PALETTE = [  # default colours, in label order
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
]


def _color(value, where: str) -> tuple[int, int, int]:
    try:
        if isinstance(value, str):
            v = value.strip()
            if v.startswith("#") and len(v) == 7:
                rgb = tuple(int(v[i:i + 2], 16) for i in (1, 3, 5))
            else:
                rgb = tuple(int(x) for x in v.split(","))
        else:
            rgb = tuple(int(x) for x in value)
        if len(rgb) != 3 or not all(0 <= c <= 255 for c in rgb):
            raise ValueError
    except (TypeError, ValueError):
        raise SemisegError(
            f"{where}: colour must be 'r,g,b', [r, g, b] or '#rrggbb' (0-255), got {value!r}"
        ) from None
    return rgb  # type: ignore[return-value]


@dataclass
class LabelScheme:
    """The labels a model predicts, with how to draw them and how to read annotations.

    Attributes:
        names: label names; the label index is the position in this list.
        colors: ``(r, g, b)`` per label (itemRgb in BED, colour in browsers).
        strands: ``"+"``, ``"-"`` or ``"."`` per label (BED strand column).
        roles: gene-structure role per label (``CDS``, ``UTR``, ``intron``, ``ncRNA``)
            or None.
        aliases: other names per label accepted in BED name / GFF type columns.
        gff_types: GFF3 type column for one-feature-per-segment output.
        kind: ``"bed"`` (labels from BED names) or ``"gene_structure"`` (from GFF3/GTF).
        background: index of the label for unlabelled positions, or None (-> -1 masked).
        priority: label indices, highest first; where annotations overlap, the higher wins.
        min_intron: gaps between a transcript's exons shorter than this are not introns.
        gff: feature types per part (``cds_types``, ``exon_types``, ...).
    """

    names: list[str]
    colors: list[tuple[int, int, int]]
    strands: list[str]
    roles: list[str | None]
    aliases: list[list[str]] = field(default_factory=list)
    gff_types: list[str] = field(default_factory=list)
    kind: str = "bed"
    background: int | None = None
    priority: list[int] = field(default_factory=list)
    min_intron: int = 20
    gff: dict = field(default_factory=lambda: {k: list(v) for k, v in _GFF_DEFAULTS.items()})
    name: str = "custom"

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Label index of a name or alias (SemisegError if unknown)."""
        idx = self._lookup().get(name)
        if idx is None:
            raise SemisegError(
                f"unknown label {name!r}; the scheme has {', '.join(self.names)}"
            )
        return idx

    def _lookup(self) -> dict[str, int]:
        table: dict[str, int] = {}
        for i, (n, al) in enumerate(zip(self.names, self.aliases)):
            for a in al:
                table.setdefault(a, i)
        for i, n in enumerate(self.names):
            table[n] = i
        return table

    def role_label(self, role: str, strand: str) -> int | None:
        """Label index for a gene-structure part on a strand (a ``.`` label fits both)."""
        fallback = None
        for i, (r, s) in enumerate(zip(self.roles, self.strands)):
            if r == role:
                if s == strand:
                    return i
                if s == ".":
                    fallback = i
        return fallback

    def to_dict(self) -> dict:
        """Plain data (lists, str, int) for checkpoints and YAML; see :meth:`from_dict`."""
        labels = []
        for i, n in enumerate(self.names):
            d = {"name": n, "color": list(self.colors[i]), "strand": self.strands[i]}
            if self.roles[i]:
                d["role"] = self.roles[i]
            if self.aliases[i]:
                d["aliases"] = list(self.aliases[i])
            if self.gff_types[i] != n:
                d["gff_type"] = self.gff_types[i]
            labels.append(d)
        return {
            "name": self.name,
            "kind": self.kind,
            "background": None if self.background is None else self.names[self.background],
            "min_intron": int(self.min_intron),
            "labels": labels,
            "priority": [self.names[i] for i in self.priority],
            "gff": {k: list(v) for k, v in self.gff.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping, where: str = "label scheme") -> LabelScheme:
        """Build and check a scheme from plain data (the YAML layout)."""
        if not isinstance(d, Mapping):
            raise SemisegError(f"{where}: expected a mapping with a 'labels' list")
        unknown = set(d) - _SCHEME_KEYS
        if unknown:
            raise SemisegError(f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(_SCHEME_KEYS)}")
        kind = d.get("kind", "bed")
        if kind not in ("bed", "gene_structure"):
            raise SemisegError(f"{where}: kind must be 'bed' or 'gene_structure', got {kind!r}")
        raw = d.get("labels")
        if not isinstance(raw, list) or not raw:
            raise SemisegError(f"{where}: 'labels' must be a non-empty list")
        names, colors, strands, roles, aliases, gff_types = [], [], [], [], [], []
        for i, lab in enumerate(raw):
            if isinstance(lab, str):
                lab = {"name": lab}
            if not isinstance(lab, Mapping) or "name" not in lab:
                raise SemisegError(f"{where}: label {i + 1} needs a 'name'")
            bad = set(lab) - _LABEL_KEYS
            if bad:
                raise SemisegError(f"{where}: label {lab['name']!r}: unknown keys {sorted(bad)}")
            name = str(lab["name"])
            if not name or any(c.isspace() or c in "/;=,&" for c in name) or name == GAP:
                raise SemisegError(f"{where}: bad label name {name!r} "
                                   "(no spaces or / ; = , &; 'gap' is reserved)")
            if name in names:
                raise SemisegError(f"{where}: label {name!r} defined twice")
            strand = lab.get("strand", ".")
            if strand not in ("+", "-", "."):
                raise SemisegError(f"{where}: label {name!r}: strand must be '+', '-' or '.'")
            role = lab.get("role")
            if role is not None and role not in ROLES:
                raise SemisegError(f"{where}: label {name!r}: role must be one of {ROLES}")
            names.append(name)
            colors.append(_color(lab.get("color", _PALETTE[i % len(_PALETTE)]), f"{where}: {name}"))
            strands.append(strand)
            roles.append(role)
            aliases.append([str(a) for a in lab.get("aliases", []) or []])
            gff_types.append(str(lab.get("gff_type", name)))
        index = {n: i for i, n in enumerate(names)}

        def idx(n, what):
            if n not in index:
                raise SemisegError(f"{where}: {what} {n!r} is not a label ({', '.join(names)})")
            return index[n]

        background = d.get("background")
        background = None if background is None else idx(background, "background")
        prio = [idx(n, "priority entry") for n in d.get("priority", []) or []]
        if len(set(prio)) != len(prio):
            raise SemisegError(f"{where}: priority lists a label twice")
        prio += [i for i in range(len(names)) if i not in prio]
        gff = {k: list(v) for k, v in _GFF_DEFAULTS.items()}
        given = d.get("gff") or {}
        bad = set(given) - _GFF_KEYS
        if bad:
            raise SemisegError(f"{where}: gff: unknown keys {sorted(bad)}; allowed {sorted(_GFF_KEYS)}")
        gff.update({k: [str(x) for x in v] for k, v in given.items()})
        min_intron = d.get("min_intron", 20)
        if not isinstance(min_intron, int) or min_intron < 1:
            raise SemisegError(f"{where}: min_intron must be a positive integer")
        if len(names) > 32000:
            raise SemisegError(f"{where}: too many labels ({len(names)})")
        if kind == "gene_structure" and not any(roles):
            raise SemisegError(f"{where}: a gene_structure scheme needs labels with a 'role'")
        return cls(names=names, colors=colors, strands=strands, roles=roles, aliases=aliases,
                   gff_types=gff_types, kind=kind, background=background, priority=prio,
                   min_intron=min_intron, gff=gff, name=str(d.get("name", "custom")))

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> LabelScheme:
        import yaml

        try:
            with open(path) as fh:
                data = yaml.safe_load(fh)
        except OSError as err:
            raise SemisegError(f"cannot read label scheme {path}: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise SemisegError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
        return cls.from_dict(data, where=os.fspath(path))


BUILTIN_SCHEMES = {"gene_structure": os.path.join(os.path.dirname(__file__), "schemes",
                                                   "gene_structure.yaml")}


def load_scheme(path_or_name: str | os.PathLike) -> LabelScheme:
    """A scheme from a YAML file, or a built-in one by name (``"gene_structure"``)."""
    key = os.fspath(path_or_name)
    if key in BUILTIN_SCHEMES:
        return LabelScheme.from_yaml(BUILTIN_SCHEMES[key])
    if not os.path.exists(key):
        raise SemisegError(
            f"label scheme {key!r} is neither a file nor a built-in ({', '.join(BUILTIN_SCHEMES)})"
        )
    return LabelScheme.from_yaml(key)


# --------------------------------------------------------------------------- annotation


class Annotation:
    """Labelled, non-overlapping, sorted intervals per chromosome.

    Args:
        intervals: chrom -> (starts, ends, labels) int64 arrays, possibly overlapping;
            overlaps are resolved by ``scheme.priority`` (label -1, masked, beats all).
        scheme: the label scheme.
        chrom_sizes: sizes of all chromosomes (chromosomes without intervals are all
            background / masked).
    """

    def __init__(self, intervals: Mapping[str, tuple], scheme: LabelScheme,
                 chrom_sizes: Mapping[str, int]):
        self.scheme = scheme
        self.chrom_sizes = dict(chrom_sizes)
        rank = {-1: len(scheme) + 1}
        for r, lab in enumerate(reversed(scheme.priority)):
            rank[lab] = r
        self._iv: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for chrom, (s, e, lab) in intervals.items():
            self._iv[chrom] = _resolve(np.asarray(s, np.int64), np.asarray(e, np.int64),
                                       np.asarray(lab, np.int64), rank)

    @property
    def fill(self) -> int:
        """Label of unlabelled positions (background index, or -1)."""
        return -1 if self.scheme.background is None else self.scheme.background

    def intervals(self, chrom: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, labels) int64, sorted and non-overlapping; -1 = masked."""
        empty = np.zeros(0, np.int64)
        return self._iv.get(chrom, (empty, empty, empty))

    def labels(self, chrom: str, start: int = 0, end: int | None = None,
               resolution: int = 1) -> np.ndarray:
        """``(ceil((end-start)/resolution),) int64`` labels of ``[start, end)``."""
        if end is None:
            end = self.chrom_sizes.get(chrom, 0)
        check_region(self.chrom_sizes, chrom, start, end)
        if resolution < 1:
            raise ValueError(f"resolution must be >= 1, got {resolution}")
        # per bp in chunks (int16: schemes have far fewer labels), int64 per step
        chunk = max(1, _CHUNK // resolution) * resolution
        s, e, lab = self.intervals(chrom)
        parts = []
        for lo in range(start, end, chunk):
            hi = min(end, lo + chunk)
            out = np.full(hi - lo, self.fill, dtype=np.int16)
            sl = overlapping(s, e, lo, hi)
            paint(out, lo, s[sl], e[sl], lab[sl])
            parts.append(bin_majority(out, resolution, len(self.scheme)))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _resolve(s, e, lab, rank) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Resolve overlaps by rank (higher wins) and merge touching equal labels."""
    keep = e > s
    s, e, lab = s[keep], e[keep], lab[keep]
    if len(s) == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), z.copy()
    bounds = np.unique(np.concatenate([s, e]))
    si = np.searchsorted(bounds, s)
    ei = np.searchsorted(bounds, e)
    m = len(bounds) - 1
    best = np.full(m, -2, dtype=np.int64)  # -2: no interval
    for label in sorted(set(lab.tolist()), key=lambda x: rank[x]):
        sel = lab == label
        diff = np.bincount(si[sel], minlength=m + 1) - np.bincount(ei[sel], minlength=m + 1)
        best[np.cumsum(diff)[:m] > 0] = label
    starts, ends = bounds[:-1], bounds[1:]
    has = best != -2
    starts, ends, best = starts[has], ends[has], best[has]
    # merge runs of equal labels that touch
    new = np.ones(len(best), dtype=bool)
    new[1:] = (best[1:] != best[:-1]) | (starts[1:] != ends[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(best)) - 1
    return starts[first], ends[last], best[first]


# --------------------------------------------------------------------------- BED


def bed_rows(path: str | os.PathLike):
    """Yield (lineno, fields) of data lines of a BED-like file (tab or space separated)."""
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            fields = line.rstrip("\n\r").split("\t")
            if len(fields) < 3:
                fields = line.split()
            yield lineno, fields


def _coords(path: str, lineno: int, fields: list[str], chrom: str,
            sizes: Mapping[str, int], one_based: bool = False) -> tuple[int, int]:
    try:
        start, end = int(fields[0]), int(fields[1])
    except ValueError:
        raise SemisegError(
            f"{path}:{lineno}: start/end must be integers, got {fields[0]!r}, {fields[1]!r}"
        ) from None
    if one_based:
        if start < 1 or end < start:
            raise SemisegError(f"{path}:{lineno}: bad coordinates {start}..{end} (1-based, start <= end)")
        start -= 1
    elif start < 0 or end < start:
        raise SemisegError(f"{path}:{lineno}: bad coordinates {start}-{end} (need 0 <= start <= end)")
    if end > sizes[chrom]:
        raise SemisegError(
            f"{path}:{lineno}: end {end} is past the end of {chrom} ({sizes[chrom]} bp)"
        )
    return start, end


def read_bed_labels(path: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                    alias: Mapping[str, str] | None = None) -> Annotation:
    """A BED file (>= 4 columns) whose name column holds label names or aliases.

    ``gap`` (as written by semiseg for N runs) reads as masked (-1). Lines in any order.
    """
    path = os.fspath(path)
    match = ChromMatcher(chrom_sizes, alias)
    lookup = scheme._lookup()
    lookup[GAP] = -1
    rows: dict[str, list[tuple[int, int, int]]] = {}
    unknown: dict[str, int] = {}
    n = 0
    for lineno, f in bed_rows(path):
        n += 1
        if len(f) < 4:
            raise SemisegError(
                f"{path}:{lineno}: expected at least 4 columns (chrom start end name), got {len(f)}"
            )
        chrom = match(f[0], lineno)
        if chrom is None:
            continue
        start, end = _coords(path, lineno, f[1:3], chrom, chrom_sizes)
        label = lookup.get(f[3])
        if label is None:
            unknown.setdefault(f[3], lineno)
            continue
        rows.setdefault(chrom, []).append((start, end, label))
    if n == 0:
        raise SemisegError(f"{path}: no intervals (empty BED file)")
    match.raise_unknown(path)
    if unknown:
        name, line = next(iter(unknown.items()))
        raise SemisegError(
            f"{path}:{line}: unknown label {name!r} (also: {', '.join(list(unknown)[1:6]) or 'none'}); "
            f"the scheme has {', '.join(scheme.names)}"
        )
    return Annotation({c: tuple(np.array(v, np.int64).T) for c, v in rows.items()},
                      scheme, chrom_sizes)


# --------------------------------------------------------------------------- GFF3 / GTF


@dataclass
class GffRow:
    lineno: int
    chrom: str
    type: str
    start: int  # 0-based
    end: int
    strand: str
    attrs: dict[str, str]


_GTF_ATTR = re.compile(r'\s*([^\s";]+)\s+(?:"([^"]*)"|([^\s;]+))\s*;?')


def _parse_attrs(text: str, gtf: bool) -> dict[str, str]:
    text = text.strip()
    if not text or text == ".":
        return {}
    if gtf:
        out: dict[str, str] = {}
        for m in _GTF_ATTR.finditer(text):
            out.setdefault(m.group(1), m.group(2) if m.group(2) is not None else m.group(3))
        return out
    out = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"attribute {part[:40]!r} is not key=value")
        k, v = part.split("=", 1)
        out[k.strip()] = unquote(v)
    return out


def read_gff_rows(path: str | os.PathLike, chrom_sizes: Mapping[str, int],
                  alias: Mapping[str, str] | None = None) -> tuple[list[GffRow], bool]:
    """Parse a GFF3 or GTF file into rows (0-based half-open), checking every line.

    Returns ``(rows, is_gtf)``. GTF is recognised by the extension (.gtf, .gtf.gz).
    """
    path = os.fspath(path)
    gtf = path.lower().endswith((".gtf", ".gtf.gz"))
    match = ChromMatcher(chrom_sizes, alias)
    rows: list[GffRow] = []
    seen = 0
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.startswith("##FASTA"):
                break
            if not line.strip() or line.startswith("#"):
                continue
            seen += 1
            f = line.rstrip("\n\r").split("\t")
            if len(f) != 9:
                raise SemisegError(
                    f"{path}:{lineno}: expected 9 tab-separated columns, got {len(f)}"
                )
            chrom = match(f[0], lineno)
            if chrom is None:
                continue
            start, end = _coords(path, lineno, f[3:5], chrom, chrom_sizes, one_based=True)
            if f[6] not in ("+", "-", ".", "?"):
                raise SemisegError(f"{path}:{lineno}: strand must be +, -, . or ?, got {f[6]!r}")
            try:
                attrs = _parse_attrs(f[8], gtf)
            except ValueError as err:
                raise SemisegError(f"{path}:{lineno}: {err}") from None
            rows.append(GffRow(lineno, chrom, f[2], start, end,
                               "." if f[6] == "?" else f[6], attrs))
    if seen == 0:
        raise SemisegError(f"{path}: no features (empty {'GTF' if gtf else 'GFF3'} file)")
    match.raise_unknown(path)
    return rows, gtf


@dataclass
class Transcript:
    """One transcript (or a gene whose CDS rows hang directly under it, as in SGD).

    Intervals are ``(n, 2) int64`` [start, end), sorted, as given in the file (not merged).
    ``introns`` are the gaps >= min_intron (or covered by explicit intron rows) between
    the exonic blocks; ``short_gaps`` the other gaps, which are labelled like exons.
    """

    id: str
    chrom: str
    strand: str
    type: str
    cds: np.ndarray
    exons: np.ndarray
    utrs: np.ndarray
    introns: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    short_gaps: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    ncrna: bool = False  # a non-coding RNA (by type or biotype), labelled ncRNA

    @property
    def coding(self) -> bool:
        return len(self.cds) > 0


def _iv(rows) -> np.ndarray:
    a = np.array(sorted(rows), dtype=np.int64).reshape(-1, 2)
    return a


def _merge(iv: np.ndarray, tolerance: int = 0) -> np.ndarray:
    """Union of intervals; gaps shorter than ``tolerance`` are closed too."""
    if len(iv) == 0:
        return iv.reshape(0, 2)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s - out[-1][1] < max(tolerance, 1) or s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out, dtype=np.int64)


def _subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Parts of intervals ``a`` not covered by ``b`` (both merged, sorted)."""
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def gff_transcripts(rows: list[GffRow], gtf: bool, scheme: LabelScheme,
                    path: str = "annotation") -> list[Transcript]:
    """Group CDS/exon/UTR/intron rows into transcripts and derive introns.

    GFF3: rows are grouped by Parent (each, if several); a Parent may be an mRNA or,
    as in SGD, a gene. GTF: by ``transcript_id``. A feature of an ncRNA type
    (``scheme.gff['ncrna_types']``, or any ``*RNA`` type but mRNA) without parts is a
    one-exon non-coding transcript.
    """
    g = scheme.gff
    cds_t, exon_t, utr_t, intron_t = (set(g[k]) for k in ("cds_types", "exon_types",
                                                          "utr_types", "intron_types"))
    part_types = cds_t | exon_t | utr_t | intron_t
    ids: dict[str, GffRow] = {}
    if not gtf:
        for r in rows:
            if "ID" in r.attrs and r.type not in part_types:
                ids.setdefault(r.attrs["ID"], r)
    groups: dict[str, list[GffRow]] = {}
    for r in rows:
        if r.type not in part_types:
            continue
        if gtf:
            key = r.attrs.get("transcript_id")
            if not key:
                raise SemisegError(f"{path}:{r.lineno}: GTF {r.type} row has no transcript_id")
            groups.setdefault(key, []).append(r)
            continue
        parent = r.attrs.get("Parent")
        if parent is None:  # a part with no parent stands alone
            groups.setdefault(f"\0line{r.lineno}", []).append(r)
            continue
        for key in parent.split(","):  # an exon may be shared by several transcripts
            if key not in ids:
                raise SemisegError(
                    f"{path}:{r.lineno}: Parent {key!r} is not the ID of any feature"
                )
            groups.setdefault(key, []).append(r)
    out: list[Transcript] = []
    ncrna = set(g["ncrna_types"])
    for key, parts in groups.items():
        chrom, strand = parts[0].chrom, parts[0].strand
        for r in parts:
            if r.chrom != chrom or r.strand != strand:
                raise SemisegError(
                    f"{path}:{r.lineno}: parts of {key!r} disagree on chromosome or strand"
                )
        parent = ids.get(key)
        ttype = parent.type if parent else ("transcript" if gtf else parts[0].type)
        biotype = None
        if gtf:
            for k in ("transcript_biotype", "transcript_type", "gene_biotype", "gene_type"):
                biotype = next((r.attrs[k] for r in parts if k in r.attrs), None)
                if biotype:
                    break
        tid = key if not key.startswith("\0") else f"{parts[0].type}@{path}:{parts[0].lineno}"
        out.append(Transcript(
            id=tid, chrom=chrom, strand=strand, type=ttype,
            cds=_iv((r.start, r.end) for r in parts if r.type in cds_t),
            exons=_iv((r.start, r.end) for r in parts if r.type in exon_t),
            utrs=_iv((r.start, r.end) for r in parts if r.type in utr_t),
            introns=_iv((r.start, r.end) for r in parts if r.type in intron_t),
            ncrna=_is_ncrna(biotype, ncrna) if gtf and biotype else
            (gtf or _is_ncrna(ttype, ncrna)),
        ))
    if not gtf:
        for fid, r in ids.items():
            if _is_ncrna(r.type, ncrna) and fid not in groups:
                out.append(Transcript(id=fid, chrom=r.chrom, strand=r.strand, type=r.type,
                                      cds=_iv([]), exons=_iv([(r.start, r.end)]), utrs=_iv([]),
                                      ncrna=True))
    for t in out:
        _derive_introns(t, scheme.min_intron)
    out.sort(key=lambda t: (t.chrom, t.cds[0, 0] if t.coding else _first(t)))
    return out


def _is_ncrna(kind: str, ncrna: set[str]) -> bool:
    """A non-coding RNA type/biotype: listed in the scheme, or *RNA other than mRNA."""
    return kind in ncrna or (kind.endswith("RNA") and kind != "mRNA")


def _first(t: Transcript) -> int:
    parts = [a for a in (t.cds, t.exons, t.utrs, t.introns) if len(a)]
    return int(min(a[0, 0] for a in parts)) if parts else 0


def _derive_introns(t: Transcript, min_intron: int) -> None:
    explicit = _merge(t.introns)
    blocks = _merge(np.concatenate([t.cds, t.exons, t.utrs]))
    introns, short = [], []
    for (_, e0), (s1, _) in zip(blocks[:-1], blocks[1:]):
        covered = len(_subtract(np.array([[e0, s1]]), explicit)) == 0
        (introns if (s1 - e0 >= min_intron or covered) else short).append((e0, s1))
    derived = np.array(introns, dtype=np.int64).reshape(-1, 2)
    t.introns = _merge(np.concatenate([derived, explicit]))  # keeps lone intron rows
    t.short_gaps = np.array(short, dtype=np.int64).reshape(-1, 2)


def transcript_parts(t: Transcript) -> list[tuple[int, int, str]]:
    """(start, end, role) pieces of a transcript: CDS, UTR, ncRNA and intron.

    Exonic positions are CDS where a CDS row (or a short gap between CDS rows) covers
    them, else UTR in a coding transcript and ncRNA in a non-coding RNA. Other transcripts
    without CDS (pseudogenic_transcript, a bare "transcript", an mRNA without CDS) give
    no parts. In GTF a transcript without CDS is a non-coding RNA when its biotype says
    so (or when it has no biotype attribute).
    """
    if not t.coding and not t.ncrna:
        if len(t.exons) or len(t.utrs):
            return []
        # intron rows on their own (as semiseg writes a lone intron)
        return [(int(s), int(e), "intron") for s, e in t.introns]
    exonic = _merge(np.concatenate([t.cds, t.exons, t.utrs, t.short_gaps]))
    out: list[tuple[int, int, str]] = []
    if t.coding:
        # a short gap is CDS only between two CDS rows (a frameshift), else like its exons
        ends, starts = set(t.cds[:, 1].tolist()), set(t.cds[:, 0].tolist())
        fill = [g for g in t.short_gaps.tolist() if g[0] in ends and g[1] in starts]
        cds = _merge(np.concatenate([t.cds, np.array(fill, np.int64).reshape(-1, 2)]))
        out += [(int(s), int(e), "CDS") for s, e in cds]
        out += [(int(s), int(e), "UTR") for s, e in _subtract(exonic, cds)]
    else:
        out += [(int(s), int(e), "ncRNA") for s, e in exonic]
    out += [(int(s), int(e), "intron") for s, e in t.introns]
    return out


def read_gff_labels(path: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                    alias: Mapping[str, str] | None = None) -> Annotation:
    """GFF3/GTF -> Annotation.

    ``gene_structure`` schemes: transcripts (see :func:`gff_transcripts`) labelled by role
    and strand; rows with a ``label=NAME`` attribute and ``gap`` rows are taken as is.
    Other schemes: one interval per row whose ``label`` attribute (error if unknown) or
    type names a label (rows of other types are ignored).
    """
    path = os.fspath(path)
    rows, gtf = read_gff_rows(path, chrom_sizes, alias)
    lookup = scheme._lookup()
    iv: dict[str, list[tuple[int, int, int]]] = {}

    def add(chrom, s, e, lab):
        iv.setdefault(chrom, []).append((s, e, lab))

    parts = set().union(*(scheme.gff[k] for k in ("cds_types", "exon_types", "utr_types",
                                                  "intron_types")))
    for r in rows:
        if r.type == GAP:
            add(r.chrom, r.start, r.end, -1)
        elif "label" in r.attrs and r.type not in parts:
            name = r.attrs["label"]
            if name not in lookup:
                raise SemisegError(f"{path}:{r.lineno}: unknown label {name!r}; "
                                   f"the scheme has {', '.join(scheme.names)}")
            add(r.chrom, r.start, r.end, lookup[name])
        elif scheme.kind != "gene_structure" and r.type in lookup:
            add(r.chrom, r.start, r.end, lookup[r.type])
    if scheme.kind == "gene_structure":
        for t in gff_transcripts(rows, gtf, scheme, path):
            for s, e, role in transcript_parts(t):
                lab = scheme.role_label(role, t.strand)
                if lab is not None:
                    add(t.chrom, s, e, lab)
    if not iv:
        raise SemisegError(f"{path}: no feature maps to a label of scheme {scheme.name!r}")
    return Annotation({c: tuple(np.array(v, np.int64).T) for c, v in iv.items()},
                      scheme, chrom_sizes)


def read_annotation(path: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                    alias: Mapping[str, str] | None = None) -> Annotation:
    """Labels from a BED (by name column) or GFF3/GTF file, chosen by extension.

    Also reads semiseg's own BED9 / GFF3 output back (truth files for evaluation).
    """
    p = os.fspath(path).lower()
    p = p.removesuffix(".gz")
    if p.endswith((".gff", ".gff3", ".gtf")):
        return read_gff_labels(path, scheme, chrom_sizes, alias)
    if p.endswith(".bed"):
        return read_bed_labels(path, scheme, chrom_sizes, alias)
    raise SemisegError(f"{path}: unknown annotation format (expected .bed, .gff3, .gff or .gtf)")
