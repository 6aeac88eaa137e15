"""Label schemes: the labels a model predicts, their colours and strands, and how
annotation files map onto them (built-in ``gene_structure``, a YAML file, or a mapping).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import SemisegError

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
        for i, (_n, al) in enumerate(zip(self.names, self.aliases)):
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
            raise SemisegError(f"{where}: unknown keys {sorted(unknown)}; "
                               f"allowed {sorted(_SCHEME_KEYS)}")
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
            raise SemisegError(f"{where}: gff: unknown keys {sorted(bad)}; "
                               f"allowed {sorted(_GFF_KEYS)}")
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

        from .safeyaml import NoAliasLoader

        try:
            with open(path) as fh:
                data = yaml.load(fh, Loader=NoAliasLoader)
        except OSError as err:
            raise SemisegError(f"cannot read label scheme {path}: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise SemisegError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
        return cls.from_dict(data, where=os.fspath(path))


BUILTIN_SCHEMES = {"gene_structure": os.path.join(os.path.dirname(__file__), "schemes",
                                                   "gene_structure.yaml")}


def load_scheme(spec: str | os.PathLike | Mapping) -> LabelScheme:
    """A scheme from a YAML file, a built-in one by name (``"gene_structure"``), or a
    mapping in the YAML layout (as in a config's ``labels.scheme``)."""
    if isinstance(spec, Mapping):
        return LabelScheme.from_dict(spec)
    key = os.fspath(spec)
    if key in BUILTIN_SCHEMES:
        return LabelScheme.from_yaml(BUILTIN_SCHEMES[key])
    if not os.path.exists(key):
        raise SemisegError(
            f"label scheme {key!r} is neither a file nor a built-in ({', '.join(BUILTIN_SCHEMES)})"
        )
    return LabelScheme.from_yaml(key)


def strand_swap(scheme) -> np.ndarray:
    """For each label, its twin on the other strand (itself for unstranded labels): by
    role (gene_structure schemes), else by the name with its +/- suffix swapped."""
    out = []
    for i, (name, strand, role) in enumerate(zip(scheme.names, scheme.strands, scheme.roles)):
        if strand not in ("+", "-"):
            out.append(i)
            continue
        other = "-" if strand == "+" else "+"
        twins = [j for j, (n2, s2, r2) in enumerate(zip(scheme.names, scheme.strands,
                                                        scheme.roles))
                 if s2 == other and ((role is not None and r2 == role)
                                     or (role is None and name.endswith(strand)
                                         and n2 == name[:-1] + other))]
        if len(twins) != 1:
            raise SemisegError(f"train.reverse_complement: label {name!r} ({strand}) has no "
                               "unique twin on the other strand in the label scheme")
        out.append(twins[0])
    return np.asarray(out, np.int64)
