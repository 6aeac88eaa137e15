"""The region loader, holdout regions and the chrom-sizes stand-in for a FASTA.

``GenomeData.load(chrom, start, end)`` is the one call the trainer and annotator need:
features ``(T, F) float32`` and labels ``(T,) int64`` at the model's resolution.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..errors import SemisegError
from ._util import bin_mean, check_region, show_names
from .labels import Annotation, bed_rows
from .sequence import Fasta, read_chrom_sizes
from .tracks import Track, TrackSpec, TrackStats, fit_track_stats, transform


def parse_region(text: str) -> tuple[str, int, int]:
    """``"chr1:1000-2000"`` (0-based half-open, commas allowed) or ``"chr1"`` (end = -1)."""
    if ":" not in text:
        return text, 0, -1
    chrom, rng = text.rsplit(":", 1)
    try:
        s, e = (int(x.replace(",", "")) for x in rng.split("-"))
    except ValueError:
        raise SemisegError(f"region {text!r}: expected chrom:start-end") from None
    return chrom, s, e


class ChromSizes:
    """A genome known by its chromosome sizes alone, in place of a :class:`Fasta` for
    models that read no sequence (tracks only): a two-column chrom-sizes file
    (``name<TAB>length``) or a FASTA index (``.fai``). Its sequence reads as N: one-hot
    rows are all zero and there are no N runs to write as gaps (nothing is known).

    Raises:
        SemisegError: a missing or malformed file (its line), a chromosome listed twice,
            no chromosomes; from :meth:`fetch`, always (there is no sequence).
    """

    def __init__(self, path: str | os.PathLike):
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise SemisegError(f"chrom sizes file not found: {path}")
        self.path = path
        self.paths: list[str] = []  # no FASTA
        self.chrom_sizes = read_chrom_sizes(path)

    def fetch(self, chrom: str, start: int = 0, end: int | None = None) -> str:
        raise SemisegError(f"no sequence: the genome is given by chromosome sizes only "
                           f"({self.path}); this needs a FASTA")

    def onehot(self, chrom: str, start: int = 0, end: int | None = None,
               iupac: str = "zero", softmask: bool = False) -> np.ndarray:
        if end is None:
            end = self.chrom_sizes.get(chrom, 0)
        check_region(self.chrom_sizes, chrom, start, end)
        return np.zeros((end - start, 5 if softmask else 4), np.float32)

    def n_runs(self, chrom: str, min_length: int = 1) -> np.ndarray:
        check_region(self.chrom_sizes, chrom, 0, 0)
        return np.zeros((0, 2), np.int64)

    def close(self) -> None:
        pass

    def __enter__(self) -> ChromSizes:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_holdout(spec, chrom_sizes: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """Held-out regions (``windows.holdout``): a BED file path (first three columns), or a
    list of ``"chrom:start-end"`` (0-based, end exclusive, commas allowed) or ``"chrom"``
    (the whole chromosome). Returns sorted, merged (chrom, start, end) in ``chrom_sizes``
    order. SemisegError names the BED line or the list item of a bad region."""
    if spec is None:
        return []
    raw: list[tuple[str, int, int, str]] = []
    if isinstance(spec, (str, os.PathLike)):
        path = os.fspath(spec)
        if not os.path.isfile(path):
            raise SemisegError(f"windows.holdout: file not found: {path}")
        for lineno, f in bed_rows(path):
            if len(f) < 3:
                raise SemisegError(f"{path}:{lineno}: expected chrom, start, end")
            try:
                raw.append((f[0], int(f[1]), int(f[2]), f"{path}:{lineno}"))
            except ValueError:
                raise SemisegError(f"{path}:{lineno}: start and end must be integers") from None
    else:
        for i, item in enumerate(spec):
            try:
                chrom, a, b = parse_region(str(item))
            except SemisegError:
                raise SemisegError(f"windows.holdout[{i}] {item!r}: expected chrom:start-end "
                                   "or chrom") from None
            if b == -1 and chrom in chrom_sizes:
                b = chrom_sizes[chrom]
            raw.append((chrom, a, b, f"windows.holdout[{i}] {item!r}"))
    by: dict[str, list[list[int]]] = {}
    for chrom, a, b, where in raw:
        if chrom not in chrom_sizes:
            raise SemisegError(f"{where}: chromosome {chrom} is not in the genome "
                               f"({show_names(chrom_sizes)})")
        if not 0 <= a < b <= chrom_sizes[chrom]:
            raise SemisegError(f"{where}: region [{a}, {b}) is empty or outside {chrom} "
                               f"(0-{chrom_sizes[chrom]})")
        by.setdefault(chrom, []).append([a, b])
    out = []
    for chrom in chrom_sizes:
        merged: list[list[int]] = []
        for a, b in sorted(by.get(chrom, [])):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        out += [(chrom, a, b) for a, b in merged]
    return out


def subtract_regions(regions: Iterable[tuple[str, int, int]],
                     holes: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """``regions`` with every part inside ``holes`` cut out (a region may split in two or
    vanish); order kept."""
    by: dict[str, list[tuple[int, int]]] = {}
    for c, a, b in holes:
        by.setdefault(c, []).append((a, b))
    out = []
    for chrom, start, end in regions:
        pieces = [(start, end)]
        for a, b in sorted(by.get(chrom, [])):
            nxt = []
            for s, e in pieces:
                if b <= s or a >= e:
                    nxt.append((s, e))
                    continue
                if s < a:
                    nxt.append((s, a))
                if b < e:
                    nxt.append((b, e))
            pieces = nxt
        out += [(chrom, s, e) for s, e in pieces]
    return out


class GenomeData:
    """Features and labels of any region, at a resolution (bp per model step).

    Args:
        fasta: a :class:`Fasta`, or a FASTA path (or list of paths).
        tracks: :class:`TrackSpec` (or dicts of its fields), in feature order.
        annotation: labels (:class:`Annotation`), or None (labels all -1).
        resolution: bp per model step; features are bin means, labels bin majorities.
        iupac: ``"zero"`` or ``"fractional"`` (see :func:`onehot`).
        softmask: add a lowercase (soft-masked) channel after A, C, G, T.
        stats: :class:`TrackStats` for standardisation (None: not standardised until
            :meth:`fit_stats`).
        alias: file chromosome name -> FASTA name, for tracks.

    Features per step: ``A, C, G, T, [softmask], track_1..track_n, missing_1..missing_n``
    (tracks transformed, standardised, 0 where missing; missing = fraction of the bin
    without a value).
    """

    def __init__(self, fasta, tracks: Sequence = (), annotation: Annotation | None = None,
                 resolution: int = 1, iupac: str = "zero", softmask: bool = False,
                 stats: TrackStats | None = None, alias: Mapping[str, str] | None = None):
        if not isinstance(resolution, (int, np.integer)) or resolution < 1:
            raise ValueError(f"resolution must be a positive integer, got {resolution!r}")
        if iupac not in ("zero", "fractional"):
            raise ValueError(f"iupac must be 'zero' or 'fractional', got {iupac!r}")
        if isinstance(fasta, (Fasta, ChromSizes)):
            self.fasta = fasta
        elif isinstance(fasta, Mapping) and "chrom_sizes" in fasta:
            self.fasta = ChromSizes(fasta["chrom_sizes"])
        else:
            self.fasta = Fasta(fasta)
        self.chrom_sizes = self.fasta.chrom_sizes
        specs = [t if isinstance(t, TrackSpec) else TrackSpec.from_dict(t) for t in tracks]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise SemisegError(f"track names must be unique, got {', '.join(names)}")
        self.tracks = [Track(s, self.chrom_sizes, alias) for s in specs]
        self.annotation = annotation
        if annotation is not None and dict(annotation.chrom_sizes) != dict(self.chrom_sizes):
            raise ValueError("annotation was read against other chromosome sizes")
        self.resolution = int(resolution)
        self.iupac = iupac
        self.softmask = bool(softmask)
        self.stats = None
        if stats is not None:
            self.set_stats(stats)

    @property
    def feature_names(self) -> list[str]:
        names = ["A", "C", "G", "T"] + (["softmask"] if self.softmask else [])
        names += [t.spec.name for t in self.tracks]
        names += [f"{t.spec.name}.missing" for t in self.tracks]
        return names

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    def set_stats(self, stats: TrackStats) -> None:
        if list(stats.names) != [t.spec.name for t in self.tracks]:
            raise SemisegError(
                f"track statistics are for tracks {stats.names}, "
                f"but the tracks are {[t.spec.name for t in self.tracks]}"
            )
        self.stats = stats

    def fit_stats(self, chroms: Sequence[str], exclude: Sequence = ()) -> TrackStats:
        """Compute (and keep) standardisation statistics on ``chroms`` (training), leaving
        out the ``exclude`` regions ((chrom, start, end): held out)."""
        missing = [c for c in chroms if c not in self.chrom_sizes]
        if missing:
            raise SemisegError(f"chromosomes {show_names(missing)} are not in the FASTA")
        self.set_stats(fit_track_stats(self.tracks, list(chroms), exclude=list(exclude)))
        return self.stats

    def load(self, chrom: str, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Features ``(T, F) float32`` and labels ``(T,) int64`` of ``[start, end)``,
        ``T = ceil((end - start) / resolution)``."""
        check_region(self.chrom_sizes, chrom, start, end)
        n = end - start
        nt = len(self.tracks)
        base = 5 if self.softmask else 4
        x = np.empty((n, base + 2 * nt), dtype=np.float32)
        x[:, :base] = self.fasta.onehot(chrom, start, end, iupac=self.iupac,
                                        softmask=self.softmask)
        for i, tr in enumerate(self.tracks):
            v = transform(tr.values(chrom, start, end), tr.spec.transform)
            miss = np.isnan(v)
            if self.stats is not None:
                std = self.stats.std[i] or 1.0
                v = (v - np.float32(self.stats.mean[i])) / np.float32(std)
            v[miss] = 0.0
            x[:, base + i] = v
            x[:, base + nt + i] = miss
        x = bin_mean(x, self.resolution)
        if self.annotation is None:
            y = np.full(len(x), -1, dtype=np.int64)
        else:
            y = self.annotation.labels(chrom, start, end, self.resolution)
        return x, y

    def config(self) -> dict:
        """Plain data describing the features (for the checkpoint)."""
        return {
            "fasta": list(self.fasta.paths),
            **({"chrom_sizes": self.fasta.path} if isinstance(self.fasta, ChromSizes)
               else {}),
            "tracks": [t.spec.to_dict() for t in self.tracks],
            "resolution": self.resolution,
            "iupac": self.iupac,
            "softmask": self.softmask,
            "stats": None if self.stats is None else self.stats.to_dict(),
            "feature_names": self.feature_names,
        }

    @classmethod
    def from_config(cls, config: Mapping, fasta=None, track_paths: Mapping[str, str] | None = None,
                    annotation: Annotation | None = None,
                    alias: Mapping[str, str] | None = None) -> GenomeData:
        """Rebuild the same features, possibly on other files (``fasta``; ``track_paths``:
        track name -> path). Every track of the config must be present."""
        specs = []
        track_paths = dict(track_paths or {})
        unknown = set(track_paths) - {t["name"] for t in config["tracks"]}
        if unknown:
            raise SemisegError(
                f"tracks {show_names(sorted(unknown))} are not model tracks "
                f"({show_names([t['name'] for t in config['tracks']])})"
            )
        for t in config["tracks"]:
            d = dict(t)
            if t["name"] in track_paths:
                d["path"] = os.fspath(track_paths[t["name"]])
            specs.append(TrackSpec.from_dict(d))
        stats = config.get("stats")
        if fasta is None:
            fasta = config if config.get("chrom_sizes") else config["fasta"]
        data = cls(fasta, specs, annotation,
                   resolution=config["resolution"], iupac=config["iupac"],
                   softmask=config["softmask"],
                   stats=None if stats is None else TrackStats.from_dict(stats), alias=alias)
        return data

    def close(self) -> None:
        for t in self.tracks:
            t.close()
        self.fasta.close()

    def __enter__(self) -> GenomeData:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
