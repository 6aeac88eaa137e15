"""Signal tracks (bigWig, bedGraph, BAM coverage) -> per-position float32 values.

Raw values are NaN where missing (a chromosome the file lacks, a gap between bigWig or
bedGraph intervals, a NaN in the file); the loader turns those into 0 plus a "missing"
channel. Transforms and standardisation statistics live here too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import SemisegError
from ._util import ChromMatcher, check_region, open_text, overlapping, paint, show_names

TRANSFORMS = ("none", "log1p", "arcsinh")
_KINDS = {".bw": "bigwig", ".bigwig": "bigwig", ".bedgraph": "bedgraph", ".bg": "bedgraph",
          ".bdg": "bedgraph", ".bam": "bam"}


def _infer_kind(path: str) -> str | None:
    p = path.lower()
    p = p.removesuffix(".gz")
    return _KINDS.get(os.path.splitext(p)[1])


@dataclass
class TrackSpec:
    """A named signal track.

    Args:
        name: feature name (unique among tracks).
        path: the file.
        kind: ``"bigwig"``, ``"bedgraph"`` or ``"bam"``; None = from the extension
            (.bw/.bigwig, .bedgraph/.bg/.bdg[.gz], .bam).
        transform: ``"none"``, ``"log1p"`` (sign(x) * log(1 + |x|)) or ``"arcsinh"``.
        mapq: BAM only: count reads with mapping quality >= mapq.
        strand: BAM only: ``"+"`` or ``"-"`` counts reads on that strand only.
    """

    name: str
    path: str
    kind: str | None = None
    transform: str = "none"
    mapq: int = 0
    strand: str | None = None

    def __post_init__(self):
        self.path = os.fspath(self.path)
        if self.kind is None:
            self.kind = _infer_kind(self.path)
            if self.kind is None:
                raise SemisegError(
                    f"track {self.name!r}: cannot tell the type of {self.path} from its "
                    "extension (.bw, .bigwig, .bedgraph, .bg, .bdg, .bam); give kind"
                )
        if self.kind not in ("bigwig", "bedgraph", "bam"):
            raise SemisegError(f"track {self.name!r}: kind must be bigwig, bedgraph or bam")
        if self.transform not in TRANSFORMS:
            raise SemisegError(
                f"track {self.name!r}: transform must be one of {', '.join(TRANSFORMS)}, "
                f"got {self.transform!r}"
            )
        if self.strand not in (None, "+", "-"):
            raise SemisegError(f"track {self.name!r}: strand must be '+', '-' or empty")
        if self.kind != "bam" and (self.strand is not None or self.mapq):
            raise SemisegError(f"track {self.name!r}: mapq and strand apply to BAM tracks only")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> TrackSpec:
        allowed = {"name", "path", "kind", "transform", "mapq", "strand"}
        bad = set(d) - allowed
        if bad:
            raise SemisegError(f"track: unknown keys {sorted(bad)}; allowed {sorted(allowed)}")
        if "name" not in d or "path" not in d:
            raise SemisegError("track: needs 'name' and 'path'")
        return cls(**dict(d))


SHEET_COLUMNS = ("name", "path", "transform", "kind", "mapq", "strand")


def read_track_sheet(path: str | os.PathLike) -> dict[str, str | dict]:
    """A track sheet: a tab-separated file with one track per line, columns ``name``,
    ``path`` and optionally ``transform``, ``kind``, ``mapq``, ``strand`` (in that order,
    or in any order under a header line that names them: a first line whose first two
    cells are ``name`` and ``path``). Empty cells and ``.`` take the default; ``#`` lines
    and blank lines are skipped; relative paths are relative to the sheet's folder.

    Returns:
        ``{name: path}`` or ``{name: {"path": ..., other columns}}`` in sheet order (the
        layout of the config's ``inputs.tracks``).

    Raises:
        SemisegError: a missing sheet or track file, a line with fewer than two or more
            cells than the columns, a name given twice, an unknown header column, a bad
            mapq (each naming the sheet's line).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SemisegError(f"track sheet not found: {path}")
    folder = os.path.dirname(os.path.abspath(path))
    columns = list(SHEET_COLUMNS)
    out: dict[str, str | dict] = {}
    first = True
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip() or line.startswith("#"):
                continue
            cells = [c.strip() for c in line.rstrip("\r\n").split("\t")]
            if first and [c.lower() for c in cells[:2]] == ["name", "path"]:
                first = False
                columns = [c.lower() for c in cells]
                bad = [c for c in columns if c not in SHEET_COLUMNS]
                if bad or len(set(columns)) != len(columns):
                    raise SemisegError(
                        f"{path}:{lineno}: header columns must be distinct names among "
                        f"{', '.join(SHEET_COLUMNS)}; got {', '.join(cells)}")
                continue
            first = False
            if len(cells) < 2 or len(cells) > len(columns):
                raise SemisegError(
                    f"{path}:{lineno}: expected {', '.join(columns[:2])}"
                    f"{'[, ' + ', '.join(columns[2:]) + ']' if len(columns) > 2 else ''} "
                    f"separated by tabs, got {len(cells)} cell(s): {line.strip()[:60]!r}")
            row = {k: v for k, v in zip(columns, cells) if v not in ("", ".")}
            name, file = row.pop("name", None), row.pop("path", None)
            if not name or not file:
                raise SemisegError(f"{path}:{lineno}: a track needs a name and a path")
            if name in out:
                raise SemisegError(f"{path}:{lineno}: track {name!r} listed twice")
            file = os.path.expanduser(file)
            file = file if os.path.isabs(file) else os.path.join(folder, file)
            if not os.path.isfile(file):
                raise SemisegError(f"{path}:{lineno}: track {name!r}: file not found: {file}")
            if "mapq" in row:
                try:
                    row["mapq"] = int(row["mapq"])
                except ValueError:
                    raise SemisegError(f"{path}:{lineno}: mapq must be an integer, got "
                                       f"{row['mapq']!r}") from None
            out[name] = {"path": file, **row} if row else file
    if not out:
        raise SemisegError(f"{path}: no tracks in the track sheet")
    return out


def transform(values: np.ndarray, kind: str) -> np.ndarray:
    """Apply a track transform (NaN stays NaN)."""
    if kind == "none":
        return values
    if kind == "log1p":
        return np.sign(values) * np.log1p(np.abs(values))
    if kind == "arcsinh":
        return np.arcsinh(values)
    raise ValueError(f"unknown transform {kind!r}")


class Track:
    """An opened track; ``values(chrom, start, end)`` in FASTA chromosome names.

    Args:
        spec: the track.
        chrom_sizes: FASTA chromosome sizes.
        alias: file chromosome name -> FASTA name.

    Raises:
        SemisegError: unreadable or malformed file, unsorted bedGraph, no chromosome that
            matches the FASTA (both sides listed), a chromosome length that differs.
    """

    def __init__(self, spec: TrackSpec, chrom_sizes: Mapping[str, int],
                 alias: Mapping[str, str] | None = None):
        self.spec = spec
        self.chrom_sizes = dict(chrom_sizes)
        if not os.path.isfile(spec.path):
            raise SemisegError(f"track {spec.name!r}: file not found: {spec.path}")
        if os.path.getsize(spec.path) == 0:
            raise SemisegError(f"track {spec.name!r}: {spec.path} is empty")
        self._match = ChromMatcher(chrom_sizes, alias)
        self._to_file: dict[str, str] = {}  # FASTA name -> name in the file
        getattr(self, f"_open_{spec.kind}")()
        if not self._to_file:
            raise SemisegError(
                f"track {spec.name!r} ({spec.path}) has no chromosome of the FASTA: file has "
                f"{show_names(self._match.unknown)}; FASTA has {show_names(chrom_sizes)} "
                "(give an alias map if they are the same chromosomes)"
            )

    @property
    def chroms(self) -> list[str]:
        """FASTA chromosomes this track has data for."""
        return list(self._to_file)

    def _add_chrom(self, file_name: str, size: int | None) -> str | None:
        chrom = self._match(file_name)
        if chrom is None:
            return None
        if size is not None and size != self.chrom_sizes[chrom]:
            raise SemisegError(
                f"track {self.spec.name!r}: {file_name} is {size} bp in {self.spec.path} but "
                f"{chrom} is {self.chrom_sizes[chrom]} bp in the FASTA (another assembly?)"
            )
        self._to_file[chrom] = file_name
        return chrom

    # -- bigWig
    def _open_bigwig(self) -> None:
        import pyBigWig

        try:
            self._bw = pyBigWig.open(self.spec.path)
        except (RuntimeError, OSError):
            self._bw = None
        if self._bw is None or not self._bw.isBigWig():
            raise SemisegError(f"track {self.spec.name!r}: {self.spec.path} is not a bigWig file")
        for name, size in self._bw.chroms().items():
            self._add_chrom(name, size)

    def _values_bigwig(self, fchrom: str, start: int, end: int) -> np.ndarray:
        v = np.asarray(self._bw.values(fchrom, start, end, numpy=True), dtype=np.float32)
        # a bigWig without any entry answers with an empty array
        return v if len(v) == end - start else np.full(end - start, np.nan, np.float32)

    # -- bedGraph
    def _open_bedgraph(self) -> None:
        path = self.spec.path
        data: dict[str, tuple[list, list, list]] = {}
        done: set[str] = set()
        current = None
        prev_end = 0
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip() or line.startswith(("#", "track", "browser")):
                    continue
                f = line.split()
                if len(f) < 4:
                    raise SemisegError(
                        f"{path}:{lineno}: bedGraph needs 4 columns (chrom start end value), "
                        f"got {len(f)}"
                    )
                try:
                    s, e, v = int(f[1]), int(f[2]), float(f[3])
                except ValueError:
                    raise SemisegError(
                        f"{path}:{lineno}: bad number in {line.strip()[:60]!r}"
                    ) from None
                if s < 0 or e <= s:
                    raise SemisegError(f"{path}:{lineno}: bad interval {s}-{e}")
                if f[0] != current:
                    if f[0] in done:
                        raise SemisegError(
                            f"{path}:{lineno}: unsorted bedGraph ({f[0]} appears in two "
                            "blocks); sort it with 'sort -k1,1 -k2,2n'"
                        )
                    if current is not None:
                        done.add(current)
                    current, prev_end = f[0], 0
                    data[current] = ([], [], [])
                if s < prev_end:
                    raise SemisegError(
                        f"{path}:{lineno}: unsorted or overlapping bedGraph interval "
                        f"{f[0]}:{s}-{e}; sort it with 'sort -k1,1 -k2,2n'"
                    )
                prev_end = e
                d = data[current]
                d[0].append(s)
                d[1].append(e)
                d[2].append(v)
        if not data:
            raise SemisegError(f"{path}: no intervals (empty bedGraph)")
        self._bg: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for name, (s, e, v) in data.items():
            chrom = self._add_chrom(name, None)
            if chrom is None:
                continue
            if e[-1] > self.chrom_sizes[chrom]:
                raise SemisegError(
                    f"{path}: interval end {e[-1]} is past the end of {chrom} "
                    f"({self.chrom_sizes[chrom]} bp)"
                )
            self._bg[name] = (np.array(s, np.int64), np.array(e, np.int64),
                              np.array(v, np.float32))

    def _values_bedgraph(self, fchrom: str, start: int, end: int) -> np.ndarray:
        out = np.full(end - start, np.nan, dtype=np.float32)
        s, e, v = self._bg[fchrom]
        sl = overlapping(s, e, start, end)
        paint(out, start, s[sl], e[sl], v[sl])
        return out

    # -- BAM coverage
    def _open_bam(self) -> None:
        import pysam

        path = self.spec.path
        try:
            self._bam = pysam.AlignmentFile(path, "rb")
        except (ValueError, OSError) as err:
            raise SemisegError(f"track {self.spec.name!r}: cannot read BAM {path}: {err}") from None
        if not self._bam.has_index():
            folder = os.path.dirname(os.path.abspath(path))
            if not os.access(folder, os.W_OK):
                raise SemisegError(
                    f"{path} has no index (.bai) and its folder is read-only; "
                    "run 'samtools index' where it can be written"
                )
            self._bam.close()
            try:
                pysam.index(path)
            except pysam.SamtoolsError as err:
                raise SemisegError(f"cannot index {path} (is it sorted?): {err}") from None
            self._bam = pysam.AlignmentFile(path, "rb")
        for name, size in zip(self._bam.references, self._bam.lengths):
            self._add_chrom(name, size)

    def _values_bam(self, fchrom: str, start: int, end: int) -> np.ndarray:
        n = end - start
        starts: list[int] = []
        ends: list[int] = []
        mapq, strand = self.spec.mapq, self.spec.strand
        for read in self._bam.fetch(fchrom, start, end):
            if (read.is_unmapped or read.is_secondary or read.is_qcfail or read.is_duplicate
                    or read.mapping_quality < mapq):
                continue
            if strand is not None and read.is_reverse != (strand == "-"):
                continue
            for bs, be in read.get_blocks():
                starts.append(bs)
                ends.append(be)
        if not starts:
            return np.zeros(n, dtype=np.float32)
        s = np.clip(np.array(starts, np.int64) - start, 0, n)
        e = np.clip(np.array(ends, np.int64) - start, 0, n)
        diff = np.bincount(s, minlength=n + 1) - np.bincount(e, minlength=n + 1)
        return np.cumsum(diff[:n]).astype(np.float32)

    def values(self, chrom: str, start: int = 0, end: int | None = None) -> np.ndarray:
        """``(end - start,) float32`` raw values, NaN where missing."""
        if end is None:
            end = self.chrom_sizes.get(chrom, 0)
        check_region(self.chrom_sizes, chrom, start, end)
        fchrom = self._to_file.get(chrom)
        if fchrom is None or start == end:
            return np.full(end - start, np.nan, dtype=np.float32)
        return getattr(self, f"_values_{self.spec.kind}")(fchrom, start, end)

    def close(self) -> None:
        if self.spec.kind == "bigwig":
            self._bw.close()
        elif self.spec.kind == "bam":
            self._bam.close()


@dataclass
class TrackStats:
    """Mean and standard deviation per track after its transform (training chromosomes).

    ``standardise`` maps ``x -> (x - mean) / std`` (std 0 -> 1).
    """

    names: list[str]
    mean: list[float]
    std: list[float]
    chroms: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"names": list(self.names), "mean": [float(x) for x in self.mean],
                "std": [float(x) for x in self.std], "chroms": list(self.chroms)}

    @classmethod
    def from_dict(cls, d: Mapping) -> TrackStats:
        try:
            stats = cls(names=list(d["names"]), mean=[float(x) for x in d["mean"]],
                        std=[float(x) for x in d["std"]], chroms=list(d.get("chroms", [])))
        except (KeyError, TypeError, ValueError) as err:
            raise SemisegError(f"track statistics are malformed: {err}") from None
        if not len(stats.names) == len(stats.mean) == len(stats.std):
            raise SemisegError("track statistics: names, mean and std differ in length")
        return stats


def fit_track_stats(tracks: Sequence[Track], chroms: Sequence[str],
                    chunk: int = 1 << 22, exclude: Sequence = ()) -> TrackStats:
    """Mean/std of each transformed track over the non-missing positions of ``chroms``,
    leaving out the ``exclude`` regions ((chrom, start, end); held-out data).

    Raises SemisegError if a track has no value on those chromosomes.
    """
    means, stds = [], []
    for tr in tracks:
        total = total2 = 0.0
        count = 0
        for chrom in chroms:
            size = tr.chrom_sizes[chrom]
            held = [(s, e) for c, s, e in exclude if c == chrom]
            for lo in range(0, size, chunk):
                hi = min(size, lo + chunk)
                x = transform(tr.values(chrom, lo, hi).astype(np.float64), tr.spec.transform)
                for s, e in held:
                    x[max(s, lo) - lo:max(min(e, hi) - lo, 0)] = np.nan
                x = x[~np.isnan(x)]
                count += x.size
                total += float(x.sum())
                total2 += float((x * x).sum())
        if count == 0:
            raise SemisegError(
                f"track {tr.spec.name!r} has no values on the training chromosomes "
                f"({show_names(chroms)})"
            )
        mean = total / count
        var = max(0.0, total2 / count - mean * mean)
        means.append(mean)
        stds.append(math.sqrt(var))
    return TrackStats([t.spec.name for t in tracks], means, stds, list(chroms))
