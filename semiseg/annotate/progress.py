"""annotate's progress while long sequences are encoded and decoded (issue 42).

The bar counts bp (of the sequence that is annotated: N runs cut out as gaps are not
counted). A batch of short contigs counts when it is decoded. A long sequence counts
while it is worked on: ENCODE_SHARE of its bp over its encoder chunks (the encoder runs
`annotate.batch_steps` CRF steps of windows per call), the rest over its decoding
windows (each semi-CRF call of windows; a sequence decoded as one chain counts that part
when its one call returns: the recursions give no news from inside a call). So the bar,
its bp/s and its time left move once per chunk or call, not once per sequence.

On a terminal this is the rich bar of ui.progress(). When stderr is not a terminal (a
cluster job's log, a pipe) rich draws the bar only at the end, so a progress line goes to
the log (ui.log, the `semiseg` logger) at most every LOG_EVERY seconds:
`HH:MM:SS annotating: 1,234,567/12,000,000 bp (10.3%), 45,678 bp/s, 0:03:55 left (chrII)`.
"""

from __future__ import annotations

import datetime
import sys
import time

from .. import ui

# share of a long sequence's bp counted while its encoder chunks run (the rest while it
# is decoded): on the 2-core CPU (loaded, load average 9-10) with the shipped yeast model
# the encoder took 17% of Annotator.run_long on 200 kb of chrII (3.1 of 17.8 s) and 14%
# on 400 kb (5.6 of 40.4 s); on a GPU its share is smaller (benchmarks/RESULTS-log.md,
# "annotate on one H100, stage by stage": encoder 2%), so there the bar runs ahead
# during encoding and its time left is too short until the first decoding call returns.
ENCODE_SHARE = 0.15
LOG_EVERY = 30.0  # seconds between progress lines in a log (stderr not a terminal)


def _to_log() -> bool:
    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    return stream is not None and not ui.quiet() and not (isatty is not None and isatty())


class BpProgress:
    """The bar's task (`bar`, `task`: a rich Progress and its task of `total` bp) moved
    by whole items (`done`) and by the current long item's stages (`stage`), with log
    lines off a terminal."""

    def __init__(self, bar, task, total: int, log_every: float | None = None):
        self.bar, self.task, self.total = bar, task, max(int(total), 0)
        self.finished = 0  # bp of the items done
        self.item_bp = 0  # the current long item's bp and its name
        self.info = ""
        self.t0 = time.perf_counter()
        self.log_every = LOG_EVERY if log_every is None else log_every
        self.last_log = self.t0
        self.log = _to_log()

    def start(self, bp: int, info: str) -> None:
        """A long item of `bp` bp begins (its stages follow)."""
        self.item_bp, self.info = bp, info

    def stage(self, what: str, fraction: float) -> None:
        """The current long item is `fraction` encoded ("encode") or decoded ("decode")."""
        f = min(max(fraction, 0.0), 1.0)
        share = ENCODE_SHARE * f if what == "encode" else ENCODE_SHARE + (1 - ENCODE_SHARE) * f
        self._show(self.finished + self.item_bp * share,
                   f"{self.info} {'encoding' if what == 'encode' else 'decoding'}")

    def done(self, bp: int, info: str) -> None:
        """An item of `bp` bp is done."""
        self.finished += bp
        self.item_bp = 0
        self._show(self.finished, info)

    def _show(self, position: float, info: str) -> None:
        self.bar.update(self.task, completed=position, info=info)
        if not self.log:
            return
        now = time.perf_counter()
        if now - self.last_log < self.log_every or position >= self.total:
            return
        self.last_log = now
        secs = now - self.t0
        rate = position / secs if secs > 0 else 0.0
        left = (f"{datetime.timedelta(seconds=round((self.total - position) / rate))} left"
                if rate > 0 else "time left unknown")
        ui.log(f"annotating: {position:,.0f}/{self.total:,} bp "
               f"({100 * position / max(self.total, 1):.1f}%), {rate:,.0f} bp/s, {left} "
               f"({info})")
