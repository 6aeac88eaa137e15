"""N runs cut out of what `semiseg annotate` encodes and decodes (issue 42, "gaps cost
nothing").

The rule: an N run (N or n) of at least `gap_min(res)` = max(GAP_MIN, res) bp, the runs
the output writer writes as `gap` rows, is not encoded or decoded: the sequence (a
chromosome, or a --regions region) is cut there into pieces, each annotated as a
sequence of its own (as if it were a FASTA record by itself), and the run is written as
one gap row, as before. Shorter N runs (a few unknown bases inside a gene) stay in the
sequence and are annotated through, as before. So what is written as a gap is what is
not decoded (up to the grid, below), and the encoder's and the decoder's time and memory
follow the bases that are not N: 1 Mb of N is one gap row with no encoder or semi-CRF
work (benchmarks/gaps.py). The writer's arrays still span the whole chromosome (about
33 bytes per bp of N: benchmarks/RESULTS-log.md).

A piece's ends are on the model's resolution grid (piece starts rounded down, ends
rounded up to a multiple of `res`, the chromosome's end excepted), so a step that holds
both a base and an N stays in the piece; the gap row still covers exactly the N run.
Only N is cut. The other ambiguity letters (R, Y, ...) encode as all zero like N by
default (GenomeData's iupac="zero"; "fractional" splits them over their bases); they
are single uncertain bases in real assemblies, not gaps, and they are not gap rows (the
writer's gaps are N runs), so a run of them is annotated through as before.

The summary and the bigWigs treat the cut runs as they treated gap rows before: no
segment is counted there and the bigWigs have no value there.
"""

from __future__ import annotations

GAP_MIN = 100  # bp: N runs at least this long (and one CRF step) are gap rows and cut out


def gap_min(res: int) -> int:
    """The shortest N run written as a gap row (emit.write_chrom) and cut out here."""
    return max(GAP_MIN, res)


def cut(items: list, fa, res: int) -> list:
    """`items` (each with .chrom, .start, .end; starts on the `res` grid) without their
    N runs of at least gap_min(res) bp: the pieces between the runs, in order, as
    objects of the items' class. An item that is all N leaves no piece."""
    out = []
    for it in items:
        runs = fa.n_runs(it.chrom, min_length=gap_min(res))
        if not len(runs):
            out.append(it)
            continue
        pos = it.start
        for a, b in runs.tolist():
            if b <= it.start or a >= it.end:
                continue
            # on the grid: the piece before ends at a step edge at or after a, the piece
            # after starts at a step edge at or before b (a run touching an end: that end)
            ca = it.start if a <= it.start else -(-a // res) * res
            cb = it.end if b >= it.end else b // res * res
            if cb <= ca:  # the run holds no whole step
                continue
            if ca > pos:
                out.append(type(it)(it.chrom, pos, ca))
            pos = max(pos, cb)
        if pos < it.end:
            out.append(type(it)(it.chrom, pos, it.end))
    return out
