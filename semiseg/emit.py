"""Writing annotate's results: one chromosome assembled from its decoded parts and handed
to the OutputWriter (`write_chrom`), in the caller's thread or in a writer process of
its own (`WriterProcess`).

Why a process: on a GPU the decoder mostly waits on the device, and each chromosome's
files can be written meanwhile. A writer thread shares the GIL with the thread that
launches the kernels and splits their results, and on an assembly of many small contigs
it was the bound (RESULTS.md, "A fragmented assembly: 10,000 contigs": 73% of the time
handing results to the writer). A process has an interpreter of its own; it imports
numpy, pyBigWig and pyfaidx, not torch, and receives each chromosome's arrays through a
pipe. Its files are byte for byte those of the caller's thread (tests/test_e2e_parts.py).
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection

import numpy as np

from .background import Behind
from .errors import SemisegError
from .generules import apply_rules


def write_chrom(writer, chrom: str, length: int, parts: list, res: int, names: list[str],
                counts: dict, fa, io_lock, rules=None) -> None:
    """Assemble one chromosome from its decoded `parts` ((start, end, labels, posteriors,
    signals, run posteriors) per decoded region, in bp and steps) and hand it to
    `writer`; positions outside the decoded regions are written as gaps. `rules`
    (GeneRules or None): genes' start codons moved to the first ATG of their ORF
    (firstatg.py), then long intergenic ORFs called genes (orffill.py); a gene so changed
    or added has no run posterior (NaN: no BED score). `counts` gains the segments and bp
    per label; `io_lock` guards `fa` (a Fasta shared with a reader thread)."""
    from .genome import labels_to_segments

    S = -(-length // res)
    C = len(names)
    lab = np.full(S, -1, np.int64)
    post = np.zeros((S, C), np.float32)
    sig = np.zeros((S, 3), np.float32)  # boundary posterior, label and boundary entropy
    runp = np.full(S, np.nan)
    gaps = []
    prev_end = 0
    for start, end, lb, p, b, rp in sorted(parts, key=lambda r: r[0]):
        s0 = start // res
        lab[s0:s0 + len(lb)] = lb
        post[s0:s0 + len(lb)] = p
        sig[s0:s0 + len(lb)] = b
        runp[s0:s0 + len(lb)] = rp
        if start > prev_end:
            gaps.append((prev_end, start))
        prev_end = end
    if prev_end < length:
        gaps.append((prev_end, length))
    if rules is not None:
        with io_lock:
            seq = fa.fetch(chrom)
        apply_rules(rules, lab, seq, runp)
    with io_lock:
        n_runs = fa.n_runs(chrom, min_length=max(100, res))
    all_gaps = np.asarray(gaps, np.int64).reshape(-1, 2)
    if len(n_runs):
        all_gaps = np.concatenate([all_gaps, np.asarray(n_runs, np.int64).reshape(-1, 2)])
        all_gaps = all_gaps[np.argsort(all_gaps[:, 0], kind="stable")]
    segments = labels_to_segments(lab, start=0, resolution=res, end=length)
    for s, e, c in segments.tolist():
        if c >= 0:
            counts[names[c]]["segments"] += 1
            counts[names[c]]["bp"] += e - s
    # the run posterior of each output run (uncertainty.py); runs of label -1 have none
    first = (segments[:, 0] // res).astype(np.int64)
    run_rows = np.column_stack([segments[:, :2].astype(np.float64),
                                np.where(segments[:, 2] >= 0, runp[first], np.nan)])
    writer.add(chrom, segments, posteriors=post, boundary=sig[:, 0],
               gaps=all_gaps if len(all_gaps) else None, run_posteriors=run_rows,
               entropy=(sig[:, 1], sig[:, 2]))


def _child(fd: int) -> None:
    """The writer process's entry point: its end of the socket pair, then `_serve`."""
    conn = Connection(fd)
    _serve(conn, *conn.recv())


def _serve(conn, writer_args: dict, fasta: str, res: int, names: list[str], rules) -> None:
    """The writer process: an OutputWriter and a Fasta of its own; messages ("add", chrom,
    length, parts), answered ("done",); ("counts",), answered ("counts", counts, seconds
    spent writing); then
    ("close",), answered ("closed",), or ("abort",). An error aborts the writer (no file
    appears) and is sent back."""
    from .genome import Fasta, OutputWriter

    writer = None
    busy = 0.0
    try:
        writer = OutputWriter(**writer_args)
        counts = {n: {"segments": 0, "bp": 0} for n in names}
        with Fasta(fasta) as fa:
            conn.send(("ready",))
            lock = threading.Lock()
            while True:
                msg = conn.recv()
                if msg[0] == "add":
                    t = time.perf_counter()
                    write_chrom(writer, msg[1], msg[2], msg[3], res, names, counts, fa, lock,
                                rules)
                    busy += time.perf_counter() - t
                    conn.send(("done",))
                elif msg[0] == "counts":
                    conn.send(("counts", counts, busy))
                elif msg[0] == "close":
                    writer.close()
                    conn.send(("closed",))
                    return
                else:  # "abort"
                    writer.abort()
                    return
    except BaseException as err:  # noqa: BLE001 (sent to the parent, which raises it)
        if writer is not None:
            writer.abort()
        try:
            conn.send(("error", isinstance(err, SemisegError), str(err),
                       traceback.format_exc()))
        except (OSError, ValueError):
            pass
    finally:
        conn.close()


class LocalWriter:
    """write_chrom in the caller's thread, or in one background thread (`threaded`;
    background.Behind), with the OutputWriter in this process. `submit(chrom, length,
    parts)` hands one chromosome over, `finish()` waits for all of them, and leaving the
    `with` block closes the files (or, after an error, removes them)."""

    def __init__(self, writer_args: dict, fa, io_lock, res: int, names: list[str],
                 counts: dict, rules, threaded: bool):
        from .genome import OutputWriter

        self.writer = OutputWriter(**writer_args)
        self.args = (res, names, counts, fa, io_lock, rules)
        self.behind = Behind(threaded)

    def submit(self, chrom: str, length: int, parts: list) -> None:
        self.behind.submit(write_chrom, self.writer, chrom, length, parts, *self.args)

    def finish(self) -> None:
        self.behind.wait()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.behind.close()
        self.writer.__exit__(exc_type, exc, tb)


class WriterProcess:
    """write_chrom in a child process (a new interpreter: the parent may hold a CUDA
    context, which a forked child must not touch), with the OutputWriter there.
    `submit` queues one chromosome for a sender thread (a send blocks until the child has
    read it all, and the child reads while it is not writing) and returns once at most
    `depth` are unwritten; `finish` waits for all of them, adds the child's segments and
    bp per label to `counts` and sets `busy_s` (the child's seconds of writing); leaving
    the `with` block closes the files (or, after an error, removes them). An error in the
    child is raised in the caller at its next call (a SemisegError as one, anything else
    as a RuntimeError with the child's traceback)."""

    def __init__(self, writer_args: dict, fasta: str, res: int, names: list[str],
                 counts: dict, rules, depth: int = 4):
        # a plain interpreter that imports semiseg.emit (not multiprocessing's spawn,
        # which re-imports the caller's main script, and fails when there is none: a
        # script read from stdin); the two talk through a socket pair
        ours, theirs = socket.socketpair()
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"from semiseg.emit import _child; _child({theirs.fileno()})"],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.counts = counts
        self.depth = depth
        self.unwritten = 0
        self.busy_s = 0.0
        self.outbox: queue.Queue = queue.Queue()
        self.sender = threading.Thread(target=self._send_all, name="semiseg-send",
                                       daemon=True)
        self.sender.start()
        try:
            self.outbox.put((writer_args, fasta, res, names, rules))
            self._expect("ready")  # the output folder's checks, before any decoding
        except BaseException:
            self._stop()
            raise

    def _expect(self, what: str):
        try:
            msg = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"the writer process ended without a word (exit code "
                               f"{self._wait(5)})") from None
        if msg[0] == "error":
            self._wait(5)
            if msg[1]:
                raise SemisegError(msg[2])
            raise RuntimeError(f"in the writer process: {msg[2]}\n{msg[3]}")
        if msg[0] != what:
            raise RuntimeError(f"writer process: expected {what!r}, got {msg[0]!r}")
        return msg

    def _send_all(self) -> None:
        """The sender thread: each queued message in turn, until None. A child that is
        gone ends it; the caller learns that from the socket's other direction."""
        while (msg := self.outbox.get()) is not None:
            try:
                self.conn.send(msg)
            except (OSError, ValueError):
                return

    def _wait(self, seconds: float | None) -> int | None:
        """The child's exit code once it ends within `seconds`, else None."""
        try:
            return self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def submit(self, chrom: str, length: int, parts: list) -> None:
        self.outbox.put(("add", chrom, length, parts))
        self.unwritten += 1
        while self.unwritten > self.depth or (self.unwritten and self.conn.poll()):
            self._expect("done")
            self.unwritten -= 1

    def finish(self) -> None:
        while self.unwritten:
            self._expect("done")
            self.unwritten -= 1
        self.outbox.put(("counts",))
        _, counts, self.busy_s = self._expect("counts")
        for name, c in counts.items():
            self.counts[name]["segments"] += c["segments"]
            self.counts[name]["bp"] += c["bp"]

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.outbox.put(("close",))
                self._expect("closed")
                self._wait(None)
            finally:
                self._stop()
        else:
            self._stop()

    def _stop(self) -> None:
        """Stop the child, which removes its temporary files (after an error here)."""
        if self.proc.poll() is None:
            self.outbox.put(("abort",))
            if self._wait(30) is None:
                self.proc.terminate()
                self.proc.wait()
        self.outbox.put(None)
        self.sender.join(5)
        self.conn.close()
