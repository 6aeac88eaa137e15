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


GROUP_BASES = 1 << 24  # bases read back at a time (short chromosomes together, long ones
# in pieces)


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


def _bins(padded: np.ndarray, z: int) -> tuple[np.ndarray, ...]:
    """Per bin of z bases (`padded`: whole bins, NaN where there is no data, float32):
    covered bases, min, max, sum, sum of squares (float64). Reductions along rows of a
    (bins, z) view: reduceat's cost per bin was most of the time on small contigs."""
    v = padded.reshape(-1, z)
    nan = np.isnan(v)
    w = np.where(nan, np.float32(0), v)
    with np.errstate(invalid="ignore"):
        lo = np.fmin.reduce(v, axis=1).astype(np.float64)  # NaN ignored (all NaN: NaN)
        hi = np.fmax.reduce(v, axis=1).astype(np.float64)
    lo[np.isnan(lo)], hi[np.isnan(hi)] = np.inf, -np.inf  # bins without data: merge-neutral
    return (z - nan.sum(1), lo, hi, w.sum(1, dtype=np.float64),
            np.square(w, dtype=np.float64).sum(1))


def _groups(n_bins: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups of k neighbouring finest bins within each chromosome (one with n_bins[i]
    bins has ceil(n_bins[i] / k) groups): each group's chromosome, its index within the
    chromosome and its first bin in the concatenated bins."""
    m = -(-n_bins // k)
    chrom = np.repeat(np.arange(len(n_bins)), m)
    j = np.arange(int(m.sum())) - (np.cumsum(m) - m)[chrom]
    return chrom, j, (np.cumsum(n_bins) - n_bins)[chrom] + j * k


def _merge(stats: tuple[np.ndarray, ...], at: np.ndarray) -> tuple[np.ndarray, ...]:
    """The bins from each index of `at` to the next merged (exact for every field)."""
    if not len(at):
        return tuple(a[:0] for a in stats)
    return (np.add.reduceat(stats[0], at), np.minimum.reduceat(stats[1], at),
            np.maximum.reduceat(stats[2], at), np.add.reduceat(stats[3], at),
            np.add.reduceat(stats[4], at))


def _finest(bw, chrom_sizes: dict[str, int], z: int) -> tuple[tuple, int]:
    """Summaries of bins of z bases (each chromosome's from its start; its last bin may
    be shorter) of every chromosome, concatenated in `chrom_sizes` order, and the number
    of runs of equal values in the file (NaN runs included)."""
    present = bw.chroms()
    parts, runs = [], 0
    pieces: list[tuple[np.ndarray, int]] = []  # values, whole bins they take
    held = 0

    def flush():
        nonlocal pieces, held
        if pieces:
            buf = np.full(held, np.nan, np.float32)
            at = 0
            for v, nb in pieces:
                buf[at:at + len(v)] = v
                at += nb * z
            parts.append(_bins(buf, z))
        pieces, held = [], 0

    step = z * max(1, GROUP_BASES // z)  # pieces of a long chromosome: whole bins
    for chrom, length in chrom_sizes.items():
        for a in range(0, length, step):
            b = min(length, a + step)
            v = (np.asarray(bw.values(chrom, a, b, numpy=True), dtype=np.float32)
                 if chrom in present else np.zeros(0, np.float32))
            if len(v) != b - a:  # a chromosome without data
                v = np.full(b - a, np.nan, np.float32)
            change = v[1:] != v[:-1]
            runs += 1 + int(np.count_nonzero(change & ~(np.isnan(v[1:]) & np.isnan(v[:-1]))))
            nb = -(-(b - a) // z)
            pieces.append((v, nb))
            held += nb * z
            if held >= GROUP_BASES:
                flush()
    flush()
    if not parts:
        return _bins(np.zeros(0, np.float32), z), runs
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True)), runs


class ZoomBins:
    """The finest zoom level's bin summaries of one bigWig, gathered from the entries as
    they are written (OutputWriter), so that closing the file needs no read-back: O(runs
    + bins) instead of O(bases). `add` takes runs [start, end) bp with a value each; they
    are kept and summarised in batches (one set of numpy calls per FLUSH runs, not per
    contig), each run cut at the bin edges. The finest level is chosen at the first
    batch from the data: the finest candidate at least as wide as the mean run (a finer
    one would have more summaries than the file has runs, and is not kept), but never
    coarser than the MIN_LEVELS-th coarsest."""

    FLUSH = 1 << 20  # runs held (24 bytes each) before they are summarised

    def __init__(self, chrom_sizes: dict[str, int], resolution: int = 1):
        self.lengths = np.asarray(list(chrom_sizes.values()), dtype=np.int64)
        self.sizes = level_sizes(max(int(self.lengths.max(initial=0)), 1), resolution)
        self.z: int | None = None  # the finest level, fixed at the first batch
        self.runs = 0
        self._pending: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self._held = 0
        self._stats: list[np.ndarray] | None = None

    def add(self, tid: int, starts, ends, values) -> None:
        if len(starts):
            self._pending.append((tid, np.asarray(starts, dtype=np.int64),
                                  np.asarray(ends, dtype=np.int64),
                                  np.asarray(values, dtype=np.float64)))
            self._held += len(starts)
            self.runs += len(starts)
            if self._held >= self.FLUSH:
                self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self.z is None:
            width = sum(int((p[2] - p[1]).sum()) for p in self._pending) / self._held
            cap = self.sizes[min(MIN_LEVELS, len(self.sizes)) - 1]
            self.z = min(cap, min((z for z in self.sizes if z >= width), default=cap))
            self.n_bins = -(-self.lengths // self.z)
            self.first_bin = np.cumsum(self.n_bins) - self.n_bins
        if self._stats is None:
            n = int(self.n_bins.sum())
            self._stats = [np.zeros(n), np.full(n, np.inf), np.full(n, -np.inf), np.zeros(n),
                           np.zeros(n)]
        tids = np.repeat([p[0] for p in self._pending], [len(p[1]) for p in self._pending])
        starts = np.concatenate([p[1] for p in self._pending])
        ends = np.concatenate([p[2] for p in self._pending])
        values = np.concatenate([p[3] for p in self._pending])
        self._pending, self._held = [], 0
        z = self.z
        b0, b1 = starts // z, (ends - 1) // z
        pieces = b1 - b0 + 1
        run = np.repeat(np.arange(len(starts)), pieces)
        k = np.arange(len(run)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        local = b0[run] + k
        w = (np.minimum(ends[run], (local + 1) * z) - np.maximum(starts[run], local * z))
        w = w.astype(np.float64)
        v = values[run]
        b = self.first_bin[tids[run]] + local
        count, lo, hi, s1, s2 = self._stats
        n = len(count)
        count += np.bincount(b, weights=w, minlength=n)
        s1 += np.bincount(b, weights=w * v, minlength=n)
        s2 += np.bincount(b, weights=w * v * v, minlength=n)
        at = np.flatnonzero(np.diff(b, prepend=-1))  # runs of one bin (in order: one each)
        np.minimum.at(lo, b[at], np.minimum.reduceat(v, at))
        np.maximum.at(hi, b[at], np.maximum.reduceat(v, at))

    def stats(self) -> tuple[np.ndarray, ...]:
        """The bins of every chromosome, concatenated in chromosome order."""
        self._flush()
        if self._stats is None:  # no data at all
            self.z = self.z or self.sizes[-1]
            self.n_bins = -(-self.lengths // self.z)
            n = int(self.n_bins.sum())
            return (np.zeros(n, np.int64), np.full(n, np.inf), np.full(n, -np.inf),
                    np.zeros(n), np.zeros(n))
        count, lo, hi, s1, s2 = self._stats
        return (np.rint(count).astype(np.int64), lo, hi, s1, s2)


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
                    resolution: int = 1, bins: ZoomBins | None = None) -> list[int]:
    """Rewrite the zoom levels of the bigWig at `path` (written by pyBigWig with
    ``maxZooms=MAX_LEVELS`` and the chromosomes `chrom_sizes` in this order); returns the
    levels written (bp per summary, finest first). `bins`: the finest level gathered
    while writing (ZoomBins, made with the same `chrom_sizes` and `resolution`); None:
    read the file back."""
    import pyBigWig

    with open(path, "rb") as fh:
        head = fh.read(64)
    magic, _, _, chrom_tree, data_off = struct.unpack_from("<IHHQQ", head, 0)
    if magic != BIGWIG_MAGIC:
        raise ValueError(f"{path} is not a bigWig")
    auto_sql, summary_off, buf_size = struct.unpack_from("<QQI", head, 36)
    slots = (min(o for o in (chrom_tree, data_off, auto_sql, summary_off) if o) - 64) // 24
    if not chrom_sizes or slots < 1 or max(chrom_sizes.values()) < 1:
        return []
    sizes = list(level_sizes(max(chrom_sizes.values()), resolution))
    finest = sizes[-1]
    if bins is not None:
        stats, runs = bins.stats(), bins.runs
        finest = bins.z
        sizes = [z for z in sizes if z >= finest]
    else:
        bw = pyBigWig.open(os.fspath(path))
        try:
            stats, runs = _finest(bw, chrom_sizes, finest)
        finally:
            bw.close()
    sizes = sizes[:slots]
    lengths = np.asarray(list(chrom_sizes.values()), dtype=np.int64)
    n_bins = -(-lengths // finest)
    # keep the coarsest MIN_LEVELS, finer ones while no bigger than the data
    levels = {}
    for i, z in enumerate(sizes):
        chrom, j, at = _groups(n_bins, z // finest)
        merged = _merge(stats, at)
        ok = merged[0] > 0
        if i >= MIN_LEVELS and int(ok.sum()) > runs:
            break
        rec = np.zeros(int(ok.sum()), _REC)
        rec["chrom"], rec["start"] = chrom[ok], j[ok] * z
        rec["end"] = np.minimum((j[ok] + 1) * z, lengths[chrom[ok]])
        rec["count"] = merged[0][ok]
        rec["min"], rec["max"] = merged[1][ok], merged[2][ok]
        rec["sum"], rec["sumsq"] = merged[3][ok], merged[4][ok]
        levels[z] = rec
    items = min(RECORDS_PER_BLOCK, max(1, buf_size // _REC.itemsize - 1))
    written = []
    with open(path, "r+b") as fh:
        fh.seek(-4, os.SEEK_END)
        end = fh.tell() if struct.unpack("<I", fh.read(4))[0] == BIGWIG_MAGIC else fh.tell() + 4
        fh.seek(end)
        fh.truncate()
        for z in sorted(levels):
            rec = levels[z]
            if not len(rec):
                break
            data_at = fh.tell()
            fh.write(struct.pack("<I", len(rec)))
            # blocks of `items` records; a block may hold several chromosomes (its index
            # entry spans them; readers keep a record by its own chromosome), so an
            # assembly of small contigs is not one block, one compress call, per contig
            leaves = []
            for a in range(0, len(rec), items):
                blk = rec[a:a + items]
                raw = zlib.compress(blk.tobytes(), 1)  # fast; any level reads the same
                leaves.append((int(blk["chrom"][0]), int(blk["start"][0]),
                               int(blk["chrom"][-1]), int(blk["end"][-1]), fh.tell(), len(raw)))
                fh.write(raw)
            index_at = fh.tell()
            _write_rtree(fh, leaves, items)
            written.append((z, data_at, index_at))
        fh.write(struct.pack("<I", BIGWIG_MAGIC))
        fh.seek(0x40)
        for z, d, i in written:
            fh.write(struct.pack("<IIQQ", z, 0, d, i))
        fh.seek(6)
        fh.write(struct.pack("<H", len(written)))
    return [z for z, _, _ in written]
