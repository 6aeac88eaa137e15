"""bigWig zoom levels written by semiseg itself (OutputWriter, after pyBigWig closes a
file).

pyBigWig (libBigWig) picks its first zoom level from the mean entry width and stops at
the first level whose summaries fit in as many buffers as the previous level's: one
level on the demo's chrI (a browser then draws a zoomed-out view from every base). Here
the levels are 4x apart, the coarsest the first ``4 * resolution * 4^k`` that holds the
longest chromosome in one summary; finer ones are added down to ``4 * resolution`` bp,
at most 10 (as UCSC's bedGraphToBigWig), always the 5 coarsest and a finer one only
while it has no more summaries than the file has runs of equal values (a level with
more would be no smaller than the data itself).

The summaries (covered bases, min, max, sum, sum of squares per bin, bins where the
file has data) are computed from the values read back from the file, so they summarise
exactly what was written. They are appended to the file with an R-tree index per level,
and the header's zoom table (the slots libBigWig reserves for ``maxZooms`` levels)
and level count are rewritten; libBigWig's own levels stay in the file unused.
Format: the bigWig layout of Kent et al. 2010 (Bioinformatics 26:2204), UCSC's bbiFile.
"""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np

BIGWIG_MAGIC = 0x888FFC26
RTREE_MAGIC = 0x2468ACE0
MAX_LEVELS = 10
MIN_LEVELS = 5
RECORDS_PER_BLOCK = 512  # 16 KiB uncompressed: below libBigWig's 32 KiB buffer
CHILDREN_PER_NODE = 256
_REC = np.dtype([("chrom", "<u4"), ("start", "<u4"), ("end", "<u4"), ("count", "<u4"),
                 ("min", "<f4"), ("max", "<f4"), ("sum", "<f4"), ("sumsq", "<f4")])


def level_sizes(max_len: int, resolution: int) -> list[int]:
    """Candidate zoom levels (bp per summary), coarsest first: 4r * 4^k down from the
    first that is >= max_len, at most MAX_LEVELS, none finer than 4r."""
    base = 4 * resolution
    top = base
    while top < max_len:
        top *= 4
    out = []
    z = top
    while z >= base and len(out) < MAX_LEVELS:
        out.append(z)
        z //= 4
    return out


def _bins(values: np.ndarray, z: int) -> tuple[np.ndarray, ...]:
    """Per bin of z bases (the last one may be shorter): covered bases, min, max, sum,
    sum of squares (float64)."""
    v = np.asarray(values, dtype=np.float64)
    at = np.arange(0, len(v), z)
    if not len(at):
        return tuple(np.zeros(0, t) for t in (np.int64, float, float, float, float))
    nan = np.isnan(v)
    if not nan.any():  # the usual case: no reductions of masked copies
        count = np.diff(np.append(at, len(v)))
        return (count, np.minimum.reduceat(v, at), np.maximum.reduceat(v, at),
                np.add.reduceat(v, at), np.add.reduceat(v * v, at))
    w = np.where(nan, 0.0, v)
    return (np.add.reduceat(~nan, at, dtype=np.int64),
            np.minimum.reduceat(np.where(nan, np.inf, v), at),
            np.maximum.reduceat(np.where(nan, -np.inf, v), at),
            np.add.reduceat(w, at), np.add.reduceat(w * w, at))


def _coarser(stats: tuple[np.ndarray, ...], k: int) -> tuple[np.ndarray, ...]:
    """Merge each k neighbouring bins (exact for every field)."""
    n = len(stats[0])
    m = -(-n // k)
    pad = m * k - n
    fill = (0, np.inf, -np.inf, 0.0, 0.0)
    out = []
    for a, f, red in zip(stats, fill, (np.sum, np.min, np.max, np.sum, np.sum), strict=True):
        a = np.concatenate([a, np.full(pad, f, dtype=a.dtype)]).reshape(m, k)
        out.append(red(a, axis=1))
    return tuple(out)


def _records(tid: int, length: int, z: int, stats) -> np.ndarray:
    count, lo, hi, s, ss = stats
    keep = np.flatnonzero(count > 0)
    rec = np.zeros(len(keep), _REC)
    rec["chrom"] = tid
    rec["start"] = keep * z
    rec["end"] = np.minimum((keep + 1) * z, length)
    rec["count"] = count[keep]
    rec["min"], rec["max"] = lo[keep], hi[keep]
    rec["sum"], rec["sumsq"] = s[keep], ss[keep]
    return rec


def _write_rtree(fh, leaves: list[tuple[int, int, int, int, int, int]], items_per_slot: int
                 ) -> None:
    """An R-tree index (cirTree) over the data blocks `leaves` (chrom0, start, chrom1,
    end, offset, size; in order), written at the file's position."""
    here = fh.tell()
    levels = [leaves]  # bottom up: lists of (chrom0, start, chrom1, end, payload)
    while len(levels[-1]) > CHILDREN_PER_NODE:
        below = levels[-1]
        levels.append([(g[0][0], g[0][1], g[-1][2], g[-1][3], None) for g in
                       (below[i:i + CHILDREN_PER_NODE]
                        for i in range(0, len(below), CHILDREN_PER_NODE))])
    # node layout, root first: the nodes of each level grouped from the level below
    nodes_per_level = [[lvl[i:i + CHILDREN_PER_NODE]
                        for i in range(0, len(lvl), CHILDREN_PER_NODE)] for lvl in levels]
    nodes_per_level = nodes_per_level[::-1]
    offsets, pos = [], here + 48
    for d, nodes in enumerate(nodes_per_level):
        leaf = d == len(nodes_per_level) - 1
        offs = []
        for node in nodes:
            offs.append(pos)
            pos += 4 + len(node) * (32 if leaf else 24)
        offsets.append(offs)
    first, last = leaves[0], leaves[-1]
    fh.write(struct.pack("<IIQIIIIQII", RTREE_MAGIC, CHILDREN_PER_NODE, len(leaves),
                         first[0], first[1], last[2], last[3], here, items_per_slot, 0))
    for d, nodes in enumerate(nodes_per_level):
        leaf = d == len(nodes_per_level) - 1
        for j, node in enumerate(nodes):
            fh.write(struct.pack("<BBH", 1 if leaf else 0, 0, len(node)))
            for c, item in enumerate(node):
                if leaf:
                    fh.write(struct.pack("<IIIIQQ", *item))
                else:
                    child = offsets[d + 1][j * CHILDREN_PER_NODE + c]
                    fh.write(struct.pack("<IIIIQ", *item[:4], child))


def add_zoom_levels(path: str | os.PathLike, chrom_sizes: dict[str, int],
                    resolution: int = 1) -> list[int]:
    """Rewrite the zoom levels of the bigWig at `path` (written by pyBigWig with
    ``maxZooms=MAX_LEVELS`` and the chromosomes `chrom_sizes` in this order); returns the
    levels written (bp per summary, finest first)."""
    import pyBigWig

    with open(path, "rb") as fh:
        head = fh.read(64)
    magic, _, _, chrom_tree, data_off = struct.unpack_from("<IHHQQ", head, 0)
    if magic != BIGWIG_MAGIC:
        raise ValueError(f"{path} is not a bigWig")
    auto_sql, summary_off, buf_size = struct.unpack_from("<QQI", head, 36)
    slots = (min(o for o in (chrom_tree, data_off, auto_sql, summary_off) if o) - 64) // 24
    if not chrom_sizes or slots < 1:
        return []
    sizes = list(level_sizes(max(chrom_sizes.values()), resolution))[:slots]
    finest = sizes[-1]
    stats, runs = [], 0
    bw = pyBigWig.open(os.fspath(path))
    try:
        present = bw.chroms()
        for tid, (chrom, length) in enumerate(chrom_sizes.items()):
            # per chromosome in pieces of whole finest bins
            parts = []
            step = finest * max(1, (1 << 22) // finest)
            prev = np.nan
            for a in range(0, length, step):
                b = min(length, a + step)
                v = (np.asarray(bw.values(chrom, a, b, numpy=True), dtype=np.float64)
                     if chrom in present else np.zeros(0))
                if len(v) != b - a:  # a chromosome without data
                    v = np.full(b - a, np.nan)
                both = np.concatenate([[prev], v])
                runs += int(np.count_nonzero(both[1:] != both[:-1]))
                prev = v[-1]
                parts.append(_bins(v, finest))
            if not parts:  # an empty chromosome
                parts = [_bins(np.zeros(0), finest)]
            stats.append(tuple(np.concatenate(p) for p in zip(*parts, strict=True)))
    finally:
        bw.close()
    # keep the coarsest MIN_LEVELS, finer ones while no bigger than the data
    keep = []
    for i, z in enumerate(sizes):
        n = sum(int(np.count_nonzero(np.add.reduceat(s[0], np.arange(0, len(s[0]), z // finest))))
                for s in stats)
        if i >= MIN_LEVELS and n > runs:
            break
        keep.append(z)
    levels = []
    with open(path, "r+b") as fh:
        fh.seek(-4, os.SEEK_END)
        end = fh.tell() if struct.unpack("<I", fh.read(4))[0] == BIGWIG_MAGIC else fh.tell() + 4
        fh.seek(end)
        fh.truncate()
        items = min(RECORDS_PER_BLOCK, max(1, buf_size // _REC.itemsize - 1))
        for z in sorted(keep):
            recs = [_records(tid, length, z, _coarser(s, z // finest))
                    for tid, ((_, length), s) in enumerate(zip(chrom_sizes.items(), stats))]
            total = sum(len(r) for r in recs)
            data_at = fh.tell()
            fh.write(struct.pack("<I", total))
            leaves = []
            for r in recs:  # blocks within one chromosome
                for i in range(0, len(r), items):
                    blk = r[i:i + items]
                    raw = zlib.compress(blk.tobytes())
                    leaves.append((int(blk["chrom"][0]), int(blk["start"][0]),
                                   int(blk["chrom"][-1]), int(blk["end"][-1]), fh.tell(),
                                   len(raw)))
                    fh.write(raw)
            if not leaves:
                break
            index_at = fh.tell()
            _write_rtree(fh, leaves, items)
            levels.append((z, data_at, index_at))
        fh.write(struct.pack("<I", BIGWIG_MAGIC))
        fh.seek(0x40)
        for z, d, i in levels:
            fh.write(struct.pack("<IIQQ", z, 0, d, i))
        fh.seek(6)
        fh.write(struct.pack("<H", len(levels)))
    return [z for z, _, _ in levels]
