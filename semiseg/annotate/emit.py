"""Writing annotate's results: one chromosome assembled from its decoded parts and handed
to the OutputWriter (`write_chrom`), in the caller's thread or in one background thread
(`LocalWriter`; on a GPU the decoder mostly waits on the device, so each chromosome's
files are written while the next is decoded).

A writer process instead of the thread was built and measured on one H100 (RESULTS-log.md,
"annotate's writer on a fragmented assembly"): no faster on 4,000 contigs (33.8 s against
33.3 s), slower on 24 Mb (24.4 s against 23.0 s: the arrays cross a socket). The writer's
own work per sequence is the bound there (4.2 ms per contig on that host,
benchmarks/writer_cost.py), not the GIL it shares with the decoder; so it stays a thread.
"""

from __future__ import annotations

import numpy as np

from ..genemodel.generules import apply_rules
from . import spill
from .background import Behind
from .gaps import gap_min


def write_chrom(writer, chrom: str, length: int, parts: list, res: int, names: list[str],
                counts: dict, fa, io_lock, rules=None, run_scores: bool = True) -> None:
    """Assemble one chromosome from its decoded `parts` ((start, end, labels, posteriors,
    signals, run posteriors) per decoded region, in bp and steps) and hand it to
    `writer`; positions outside the decoded regions are written as gaps. `rules`
    (GeneRules or None): genes' start codons moved to the first ATG of their ORF
    (genemodel/firstatg.py), then long intergenic ORFs called genes (genemodel/orffill.py);
    a gene so changed or added has no run posterior (NaN: no BED score). `counts` gains the
    segments and bp per label; `io_lock` guards `fa` (a Fasta shared with a reader thread).
    `run_scores` False (a model without run posteriors, e.g. the gene model): the rows'
    scores are their labels' mean posteriors, not 0; the writer's proteins get the
    chromosome's sequence."""
    from ..genome import labels_to_segments

    S = -(-length // res)
    C = len(names)
    # (a long chromosome's: in files while annotate spills, spill.py)
    lab = spill.np_full(S, -1, np.int64)
    post = spill.np_full((S, C), 0, np.float32)
    sig = spill.np_full((S, 3), 0, np.float32)  # boundary posterior, label and boundary entropy
    runp = spill.np_full(S, np.nan, np.float64)
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
    seq = None
    if rules is not None or writer.proteins:
        with io_lock:
            seq = fa.fetch(chrom)
    if rules is not None and parts:  # (no part: all gap, no gene or background to change)
        weak, masked = apply_rules(rules, lab, seq, runp, post)
        writer.weak_genes += weak
        writer.masked_genes += masked
    # gap rows: N runs of gap_min(res)+ bp, the runs annotate cuts out (annotate/gaps.py)
    with io_lock:
        n_runs = fa.n_runs(chrom, min_length=gap_min(res))
    all_gaps = np.asarray(gaps, np.int64).reshape(-1, 2)
    if len(n_runs):
        # the N runs annotate cut out are also gaps between parts: merged into one
        # interval each (the writer paints every gap's steps: not twice per step)
        all_gaps = _union(np.concatenate([all_gaps, np.asarray(n_runs, np.int64)]))
    segments = labels_to_segments(lab, start=0, resolution=res, end=length)
    # the summary counts the rows as written: gaps (N runs, parts not decoded) cut
    # segments into pieces or hide them (an all-N chromosome is one gap row, no segment)
    pieces, bp = _outside_gaps(segments, all_gaps)
    for c, n, b in zip(segments[:, 2].tolist(), pieces.tolist(), bp.tolist()):
        if c >= 0 and n:
            counts[names[c]]["segments"] += n
            counts[names[c]]["bp"] += b
    # the run posterior of each output run (annotate/uncertainty.py); runs of label -1 have none
    first = (segments[:, 0] // res).astype(np.int64)
    run_rows = np.column_stack([segments[:, :2].astype(np.float64),
                                np.where(segments[:, 2] >= 0, runp[first], np.nan)])
    writer.add(chrom, segments, posteriors=post, boundary=sig[:, 0],
               gaps=all_gaps if len(all_gaps) else None,
               run_posteriors=run_rows if run_scores else None,
               entropy=(sig[:, 1], sig[:, 2]), sequence=seq if writer.proteins else None)


def _union(iv: np.ndarray) -> np.ndarray:
    """(R, 2) [start, end) intervals as their union: sorted, disjoint, not touching."""
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    out: list[list[int]] = []
    for a, b in iv.tolist():
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        elif b > a:
            out.append([a, b])
    return np.asarray(out, np.int64).reshape(-1, 2)


def _outside_gaps(segments: np.ndarray, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per segment [start, end) (rows of `segments`), the number of pieces left and
    their bp after the `gaps` ((R, 2) [start, end), may overlap) are cut out."""
    n_seg = len(segments)
    if not len(gaps):
        return np.ones(n_seg, np.int64), (segments[:, 1] - segments[:, 0]).astype(np.int64)
    g = gaps[np.argsort(gaps[:, 0], kind="stable")]
    gs, ge = [], []  # merged: disjoint, not touching
    for a, b in g.tolist():
        if gs and a <= ge[-1]:
            ge[-1] = max(ge[-1], b)
        elif b > a:
            gs.append(a)
            ge.append(b)
    gs, ge = np.asarray(gs, np.int64), np.asarray(ge, np.int64)
    cum = np.concatenate([[0], np.cumsum(ge - gs)])
    s, e = segments[:, 0].astype(np.int64), segments[:, 1].astype(np.int64)
    i0 = np.searchsorted(ge, s, side="right")  # first gap ending after s
    i1 = np.searchsorted(gs, e, side="left")  # gaps before i1 start before e
    hit = i1 > i0
    first = np.minimum(i0, len(gs) - 1)
    last = np.maximum(i1 - 1, 0)
    covered = np.where(hit, cum[i1] - cum[i0] - np.maximum(0, s - gs[first])
                       - np.maximum(0, ge[last] - e), 0)
    pieces = np.where(hit, (i1 - i0) + 1 - (gs[first] <= s) - (ge[last] >= e), 1)
    bp = e - s - covered
    return np.where(bp > 0, pieces, 0).astype(np.int64), bp


class LocalWriter:
    """write_chrom in the caller's thread, or in one background thread (`threaded`;
    background.Behind), with the OutputWriter in this process. `submit(chrom, length,
    parts)` hands one chromosome over, `finish()` waits for all of them, and leaving the
    `with` block closes the files (or, after an error, removes them)."""

    def __init__(self, writer_args: dict, fa, io_lock, res: int, names: list[str],
                 counts: dict, rules, threaded: bool, budget_bp: float = 0,
                 run_scores: bool = True):
        from ..genome import OutputWriter

        self.writer = OutputWriter(**writer_args)
        self.args = (res, names, counts, fa, io_lock, rules, run_scores)
        # chromosomes wait for the writer while more than two wait and they hold more than
        # budget_bp: a batch of small contigs (~4 ms of writing each) is handed over without
        # stalling the decoder, whole chromosomes two at a time
        self.behind = Behind(threaded, depth=2, budget=budget_bp)

    def submit(self, chrom: str, length: int, parts: list) -> None:
        self.behind.submit(write_chrom, self.writer, chrom, length, parts, *self.args,
                           weight=length)

    def finish(self) -> None:
        self.behind.wait()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.behind.close()
        self.writer.__exit__(exc_type, exc, tb)
