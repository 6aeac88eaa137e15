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
