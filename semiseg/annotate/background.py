"""Reading ahead in a background thread, so that annotation reads while it computes.

`ahead(fn, items, depth)` runs fn(item) for the next `depth` items in a reader thread
while the caller uses the current result (reading FASTA and track windows while the
encoder and the semi-CRF run; numpy and pyfaidx spend most of that time outside the
GIL). An error surfaces in the caller, at the item that failed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor


def ahead(fn: Callable, items: Iterable, depth: int = 2) -> Iterator:
    """fn(item) for each item, in order, computed up to `depth` items ahead in one
    background thread (depth 0: in the caller's thread)."""
    if depth <= 0:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(1, thread_name_prefix="semiseg-read") as pool:
        pending: deque[Future] = deque()
        it = iter(items)
        try:
            for item in it:
                pending.append(pool.submit(fn, item))
                if len(pending) > depth:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:  # a consumer that stops early: drop what was not started
            for f in pending:
                f.cancel()


class Behind:
    """Calls run in submission order in one background thread (`threaded`), or at once in
    the caller's thread. Each call has a weight (its bp, say); `submit` waits while more
    than `depth` calls are waiting *and* their weights add up to more than `budget`, so
    many light calls (the small contigs of one batch) queue up without holding the caller
    back, and a few heavy ones (whole chromosomes' arrays) bound the memory. An error
    surfaces in the caller at its next `submit` or at `wait`.

    Annotation on a GPU writes each chromosome's files here while the next batch is
    decoded: the main thread then mostly waits on the device, which releases the GIL. On
    CPU the decoder needs the GIL itself, and writing alongside it was slower (4x on 2
    cores), so there it stays in the caller's thread."""

    def __init__(self, threaded: bool, depth: int = 2, budget: float = 0):
        self.depth, self.budget = depth, budget
        self.pool = (ThreadPoolExecutor(1, thread_name_prefix="semiseg-write")
                     if threaded else None)
        self.pending: deque[tuple[Future, float]] = deque()
        self.weight = 0.0  # of the calls pending

    def submit(self, fn: Callable, *args, weight: float = 0) -> None:
        if self.pool is None:
            fn(*args)
            return
        self.pending.append((self.pool.submit(fn, *args), weight))
        self.weight += weight
        while self.pending and (self.pending[0][0].done() or (
                len(self.pending) > self.depth and self.weight > self.budget)):
            self._pop()

    def _pop(self) -> None:
        f, w = self.pending.popleft()
        self.weight -= w
        f.result()

    def wait(self) -> None:
        """Finish every call (raising the first error); the thread ends."""
        try:
            while self.pending:
                self._pop()
        finally:
            self.close()

    def close(self) -> None:
        """Stop: calls not started are dropped, a running one is waited for."""
        if self.pool is not None:
            for f, _ in self.pending:
                f.cancel()
            self.pool.shutdown(wait=True)
            self.pool = None
        self.pending.clear()
        self.weight = 0.0
