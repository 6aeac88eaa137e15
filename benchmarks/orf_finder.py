"""A naive ORF finder (no learning): the floor a gene finder has to beat.

    python benchmarks/orf_finder.py [--fasta data/yeast/chrI.fa] [--min-codons 100]
                                    [--out results/orf_finder/chrI.bed] [--chroms chrI]
                                    [--longest-per-stop] [--no-eval] [--no-record]

Candidates: every ATG..stop open reading frame on both strands, i.e. every ATG (each
in-frame ATG, not only the first after a stop) with the first in-frame stop codon
downstream (standard code: TAA, TAG, TGA), at least --min-codons codons long counting
the stop codon (100 codons = 300 bp), wholly inside the sequence (ORFs running off an
end are dropped); with --longest-per-stop only the longest ORF of each stop codon
(from the first in-frame ATG). Selection: candidates longest first, ties broken by the
leftmost start and then + before -, each kept if it overlaps no ORF kept before on
either strand. Bases other than A/C/G/T (any case) are in no start or stop codon. The
kept ORFs are CDS+ / CDS-, everything else intergenic: a BED9 over each chromosome end
to end, in the layout of semiseg's PREFIX.bed (benchmarks/gene_metrics.py).

With the default truth (SGD yeast GFF3, chromosomes chrI and chrII) it then scores the
BED like `semiseg evaluate --scheme configs/demo.yaml` at boundary tolerance 0 and 20 bp,
adds the gene-level numbers of gene_metrics.py, prints a table and appends it to
benchmarks/RESULTS.md (--no-record: do not). chrI is the test chromosome of the demo.
"""

from __future__ import annotations

import argparse
import bisect
import os
import sys
import time
from datetime import UTC, datetime

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gene_metrics as gm

_CODE = np.full(256, 4, np.int64)
for _i, _b in enumerate("ACGT"):
    _CODE[ord(_b)] = _CODE[ord(_b.lower())] = _i


def _codon_id(codon: str) -> int:
    return 25 * "ACGT".index(codon[0]) + 5 * "ACGT".index(codon[1]) + "ACGT".index(codon[2])


ATG = _codon_id("ATG")
STOP_IDS = [_codon_id(c) for c in gm.STOPS]


def orfs_forward(seq: str, min_codons: int = 100,
                 longest_per_stop: bool = False) -> list[tuple[int, int]]:
    """Every ATG..stop ORF of `seq` read 5'->3' (stop included), >= min_codons codons:
    [start, end) pairs, sorted. Bases other than ACGT (any case) match no codon.
    longest_per_stop: only the longest ORF of each stop codon (from the first in-frame
    ATG after the previous in-frame stop)."""
    b = _CODE[np.frombuffer(seq.encode("ascii"), np.uint8)]
    if len(b) < 3:
        return []
    cid = 25 * b[:-2] + 5 * b[1:-1] + b[2:]  # codon starting at each position
    cid[(b[:-2] == 4) | (b[1:-1] == 4) | (b[2:] == 4)] = -1
    atg = np.flatnonzero(cid == ATG)
    stop = np.flatnonzero(np.isin(cid, STOP_IDS))
    out = []
    for frame in range(3):
        st = stop[stop % 3 == frame]
        a = atg[atg % 3 == frame]
        k = np.searchsorted(st, a)  # first in-frame stop at or after the ATG
        ok = k < len(st)
        a, end = a[ok], st[k[ok]] + 3
        if longest_per_stop:  # a is sorted: the first ATG of each stop is the longest
            _, first = np.unique(end, return_index=True)
            a, end = a[first], end[first]
        long = end - a >= 3 * min_codons
        out.extend(zip(a[long].tolist(), end[long].tolist()))
    out.sort()
    return out


def find_orfs(seq: str, min_codons: int = 100,
              longest_per_stop: bool = False) -> list[tuple[int, int, str]]:
    """Every ATG..stop ORF on both strands: (start, end, strand) in the coordinates of
    `seq` (0-based half-open; a - strand ORF's stop codon is at its left end)."""
    n = len(seq)
    plus = [(s, e, "+") for s, e in orfs_forward(seq, min_codons, longest_per_stop)]
    minus = [(n - e, n - s, "-")
             for s, e in orfs_forward(gm.revcomp(seq), min_codons, longest_per_stop)]
    return sorted(plus + minus)


def select_orfs(orfs: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Longest first (ties: leftmost start, then + before -), skipping any that overlaps
    one already kept (either strand). Returns the kept ORFs sorted by position."""
    order = sorted(orfs, key=lambda o: (o[0] - o[1], o[0], o[2] != "+"))
    starts: list[int] = []
    ends: list[int] = []
    kept = []
    for s, e, strand in order:
        k = bisect.bisect_right(starts, s)
        if k > 0 and ends[k - 1] > s:
            continue
        if k < len(starts) and starts[k] < e:
            continue
        starts.insert(k, s)
        ends.insert(k, e)
        kept.append((s, e, strand))
    return sorted(kept)


def orf_genes(seqs: dict[str, str], min_codons: int = 100,
              longest_per_stop: bool = False) -> tuple[list[gm.Gene], int]:
    """Kept ORFs of every sequence as gene models, and the number of candidates."""
    genes, n_cand = [], 0
    for chrom, seq in seqs.items():
        cand = find_orfs(seq, min_codons, longest_per_stop)
        n_cand += len(cand)
        for s, e, strand in select_orfs(cand):
            genes.append(gm.Gene(f"{chrom}:{s}-{e}{strand}", chrom, strand, ((s, e),)))
    return genes, n_cand


def run(fasta: str, out: str, min_codons: int = 100, chroms: list[str] | None = None,
        longest_per_stop: bool = False) -> dict:
    """Find, select, write the BED; returns {bed, genes, candidates, seconds, seqs}."""
    seqs = gm.read_fasta(fasta)
    if chroms:
        missing = [c for c in chroms if c not in seqs]
        if missing:
            raise SystemExit(f"orf_finder: {', '.join(missing)} not in {fasta}")
        seqs = {c: seqs[c] for c in chroms}
    t0 = time.perf_counter()
    genes, n_cand = orf_genes(seqs, min_codons, longest_per_stop)
    arrays, clash = gm.label_arrays(genes, {c: len(s) for c, s in seqs.items()})
    assert clash == 0
    gm.write_label_bed(out, arrays, f"benchmarks/orf_finder.py min_codons={min_codons}"
                       + (" longest_per_stop" if longest_per_stop else ""))
    return {"bed": out, "genes": genes, "candidates": n_cand,
            "seconds": time.perf_counter() - t0, "seqs": seqs}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Naive longest-first ORF finder -> label BED.")
    ap.add_argument("--fasta", default=gm.CHRI, help="FASTA (default: yeast chrI)")
    ap.add_argument("--min-codons", type=int, default=100,
                    help="shortest ORF kept, in codons including the stop (default 100)")
    ap.add_argument("--out", default=None,
                    help="BED to write (default results/orf_finder/chrI[.longest_per_stop].bed)")
    ap.add_argument("--chroms", help="comma-separated chromosomes (default: all in the FASTA)")
    ap.add_argument("--longest-per-stop", action="store_true",
                    help="candidates: only the longest ORF of each stop codon (first ATG), "
                         "not every ATG")
    ap.add_argument("--truth", default=gm.TRUTH, help="truth GFF3 for the evaluation")
    ap.add_argument("--no-eval", action="store_true", help="only write the BED")
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = ap.parse_args(argv)
    if args.min_codons < 2:
        ap.error("--min-codons must be >= 2")
    tag = ".longest_per_stop" if args.longest_per_stop else ""
    out = args.out or os.path.join(gm.RESULTS_DIR, "orf_finder", f"chrI{tag}.bed")
    res = run(args.fasta, out, args.min_codons,
              args.chroms.split(",") if args.chroms else None, args.longest_per_stop)
    n_bp = sum(g.length for g in res["genes"])
    total = sum(len(s) for s in res["seqs"].values())
    what = "longest ORF per stop codon" if args.longest_per_stop else "ATG..stop ORFs"
    print(f"{res['candidates']:,} candidates ({what}, >= {args.min_codons} codons), "
          f"{len(res['genes']):,} kept ({n_bp:,} of {total:,} bp coding) in "
          f"{res['seconds']:.2f} s -> {out}")
    if args.no_eval:
        return
    name = "ORF finder" + (", longest per stop" if args.longest_per_stop else "")
    outdir = os.path.dirname(os.path.abspath(out))
    row = gm.score_method(name, out, res["genes"], res["seqs"], outdir,
                          seconds=res["seconds"], truth=args.truth)
    table = gm.combined_table([row])
    labels = gm.label_table(row)
    genes = gm.gene_table({name: row["genes"]})
    print(table, labels, genes, sep="\n\n")
    if args.no_record:
        return
    cmd = " ".join(["python benchmarks/orf_finder.py"]
                   + (argv if argv is not None else sys.argv[1:]))
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cand = ("the longest ORF of each stop codon" if args.longest_per_stop
            else "every ATG..stop ORF (each in-frame ATG)")
    gm.append_results(
        f"\n## naive ORF finder (benchmarks/orf_finder.py) - {date}, commit {gm.commit()}\n"
        f"CPU: {gm.machine()}. Command: `{cmd}`. Candidates: {cand} of >= "
        f"{args.min_codons} codons (stop included) on both strands; taken longest first, no "
        f"overlaps on either strand; {res['candidates']:,} candidates, "
        f"{len(res['genes']):,} kept ({n_bp:,} of {total:,} bp). Scored as "
        f"`{gm.eval_command(out, 0, row['eval_prefix'] + '.tol0')}` (and --tolerance 20); "
        f"runtime = finding + selecting + writing the BED.\n\n"
        f"{table}\n\n{labels}\n\n{genes}\n\n{gm.GENE_NOTE}\n")


if __name__ == "__main__":
    main()
