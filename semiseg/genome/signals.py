"""The signal tracks of OutputWriter (write.py): each series' bigWig and bedGraph
entries (rounded to the signal precision, runs of equal values as one entry), the finest
zoom bins fed as they go (zooms.py), and the free-space guard that keeps libBigWig off a
full disk. A mixin: OutputWriter holds the files and the state these methods use
(_bw, _fh, _zoom, _space, _bw_entries, order, precision, resolution).
"""

from __future__ import annotations

import numpy as np

from ._util import close_silenced, deferred_signals
from .diskspace import detach
from .zooms import add_zoom_levels


def _fmt(x: float) -> str:
    return f"{x:.6g}"


class SignalWriter:
    """The bigWig / bedGraph entries of an OutputWriter (see the module docstring)."""

    def _room(self, entries: int, strict: bool = True) -> bool:
        """Whether the disk has room for `entries` more bigWig entries and for closing
        every bigWig (OSError ENOSPC if not, when `strict`): libBigWig aborts the process
        or loops forever on a full disk instead of reporting it (diskspace.check_space).
        Measured with pyBigWig: a closed file holds 5-8 bytes per entry, close itself
        writes about 1.7 (zoom levels and index); allowed: 12 per new entry, 4 per entry
        for close, two 4 KiB blocks per file."""
        if not self._bw:
            return True
        self._bw_entries += entries
        try:
            self._space.check(12 * entries, 4 * self._bw_entries + 8192 * len(self._bw),
                              fresh=not strict)
        except OSError:
            if strict:
                raise
            return False
        return True

    def _write_signals(self, chrom, lo, hi, series: dict, valid) -> None:
        """Each series' entries (bigWig and/or bedGraph) over the `valid` steps. The
        series without a NaN (usually all) share their runs of valid steps and are rounded
        and compared together, as rows of one array per run (on an assembly of small
        contigs the per-call numpy costs of one series at a time were a third of the
        writer's time); a series with NaNs goes alone, over its own runs. The entries are
        the same either way."""
        clean = {k: np.asarray(v) for k, v in series.items()}
        with deferred_signals():  # no signal inside libBigWig's writes
            for key in list(clean):
                nan = np.isnan(clean[key])
                if nan.any():
                    self._entries([key], chrom, lo, hi, [clean.pop(key)], valid & ~nan)
            if clean:
                self._entries(list(clean), chrom, lo, hi, list(clean.values()), valid)

    def _finish_bigwigs(self) -> None:
        """Close every bigWig (signals deferred) and add its zoom levels (zooms.py)."""
        with deferred_signals():
            for bw in self._bw.values():
                bw.close()
        for s in self._bw:  # zoom levels down to whole chromosomes
            add_zoom_levels(self._tmp[f"{self.prefix}.{s}.bw"], self.chrom_sizes,
                            self.resolution, self._zoom[s])

    def _abort_bigwigs(self) -> None:
        """Close every bigWig of an aborted set (the files are removed after)."""
        low = not self._room(0, strict=False)
        with deferred_signals():
            for s, bw in self._bw.items():
                if low:  # libBigWig's close on a full disk aborts the process: in memory
                    detach(self._tmp.get(f"{self.prefix}.{s}.bw", ""))
                close_silenced(bw)

    def _entries(self, keys, chrom, lo, hi, values, ok) -> None:
        """Entries of the series `keys` (their steps `values`) over the runs of `ok`."""
        edges = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
        run_s, run_e = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        for a, b in zip(run_s.tolist(), run_e.tolist()):
            for c in range(a, b, 1 << 20):  # float64 copies of 1M steps per series at most
                d = min(b, c + (1 << 20))
                seg = np.stack([v[c:d] for v in values]).astype(np.float64)
                if self.precision:
                    seg = np.round(seg / self.precision) * self.precision
                which, at = np.nonzero(seg[:, 1:] != seg[:, :-1])  # by series, then step
                cut = np.searchsorted(which, np.arange(len(keys) + 1))
                for j, key in enumerate(keys):
                    change = at[cut[j]:cut[j + 1]] + 1
                    self._entry_rows(key, chrom, lo, hi, c, d, seg[j], change)

    def _entry_rows(self, key, chrom, lo, hi, c, d, seg, change) -> None:
        """One series' entries for steps [c, d) (values `seg`, changes at `change`)."""
        r = self.resolution
        bw = self._bw.get(key)
        fh = self._fh.get(f"bg:{key}")
        # runs of equal values as one entry each when that is much shorter (a
        # variable-span entry costs pyBigWig ~7x a fixed-step value)
        as_runs = bool(self.precision) and 8 * (len(change) + 1) <= d - c
        if bw is not None and not as_runs:
            # one fixed-step entry per step; the last step may be shorter than the
            # resolution (the chromosome's end)
            full = d - 1 if lo + d * r > hi else d
            self._room(d - c)
            if full > c:
                bw.addEntries(chrom, lo + c * r, values=seg[:full - c], span=r, step=r)
            if full < d:
                bw.addEntries([chrom], [lo + full * r], ends=[hi], values=[float(seg[-1])])
        if not as_runs and fh is None and bw is None:
            return
        first = np.concatenate([[0], change])
        starts = lo + (c + first) * r
        ends = np.minimum(hi, lo + (c + np.append(change, d - c)) * r)
        vals = seg[first]
        if bw is not None:  # the zoom levels' finest bins, from the runs (zooms.py)
            self._zoom[key].add(self.order[chrom], starts, ends, vals)
        if bw is not None and as_runs:
            self._room(len(first))
            bw.addEntries([chrom] * len(first), starts.tolist(), ends=ends.tolist(),
                          values=vals.tolist())
        if fh is not None:
            fh.write("".join(f"{chrom}\t{s_}\t{e_}\t{_fmt(x)}\n" for s_, e_, x in
                             zip(starts.tolist(), ends.tolist(), vals.tolist())))
