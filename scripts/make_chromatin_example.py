"""Make data/chromatin_example/: a small synthetic chromatin-state data set (no real data).

Three chromosomes (chrA 400 kb, chrB 200 kb, chrC 200 kb) are cut into states by a
semi-Markov chain over 200-bp bins: quiescent, promoter, enhancer, transcribed (mostly
right after a promoter) and polycomb, with the state lengths below. Five marks are drawn
per bin from a gamma distribution whose mean depends on the state (table MEANS), as a
fold-enrichment-like signal; H3K4me1 has no value (a gap in its file) over one 20-kb
stretch of chrB, like a region a real track does not cover. Written:

    chrom.sizes                two columns: name, length
    H3K4me3.bw H3K27ac.bw H3K36me3.bw H3K27me3.bw   bigWig, one entry per 200-bp bin
    H3K4me1.bedgraph.gz        bedGraph (gzip), the same bins
    tracks.tsv                 the track sheet: name, path, transform
    states.bed                 the states other than quiescent (BED4; unlabelled bins
                               are quiescent, the scheme's background)

Everything follows from the seed, so running this again gives the same numbers (the
bigWig files' bytes may differ between pyBigWig versions).

    python scripts/make_chromatin_example.py [--out data/chromatin_example] [--seed 44]
"""

from __future__ import annotations

import argparse
import gzip
import os

import numpy as np

BIN = 200
SIZES = {"chrA": 400_000, "chrB": 200_000, "chrC": 200_000}
STATES = ["quiescent", "promoter", "enhancer", "transcribed", "polycomb"]
# state length in bins: (low, high), drawn uniformly
LENGTHS = {"quiescent": (10, 80), "promoter": (4, 10), "enhancer": (2, 10),
           "transcribed": (25, 150), "polycomb": (25, 100)}
# which state follows which (quiescent's next state; a promoter mostly opens a gene)
AFTER_QUIESCENT = {"promoter": 0.45, "enhancer": 0.4, "polycomb": 0.15}
MARKS = ["H3K4me3", "H3K27ac", "H3K36me3", "H3K27me3", "H3K4me1"]
# mean signal of each mark (columns) in each state (rows, STATES order)
MEANS = np.array([
    # K4me3 K27ac K36me3 K27me3 K4me1
    [0.5, 0.5, 0.5, 0.6, 0.5],  # quiescent
    [8.0, 5.0, 0.8, 0.5, 2.0],  # promoter
    [1.0, 4.0, 0.5, 0.5, 5.0],  # enhancer
    [0.6, 0.7, 4.0, 0.4, 1.0],  # transcribed
    [0.6, 0.4, 0.3, 4.0, 0.6],  # polycomb
])
SHAPE = 2.0  # gamma shape: a noisy signal (coefficient of variation 0.71)
MISSING = ("chrB", 120_000, 140_000)  # H3K4me1 has no value here


def states(rng: np.random.Generator, n_bins: int) -> np.ndarray:
    """(n_bins,) state index per bin from the semi-Markov chain."""
    out = np.empty(n_bins, np.int64)
    pos, state = 0, "quiescent"
    names, probs = list(AFTER_QUIESCENT), list(AFTER_QUIESCENT.values())
    while pos < n_bins:
        lo, hi = LENGTHS[state]
        n = int(rng.integers(lo, hi + 1))
        out[pos:pos + n] = STATES.index(state)
        pos += n
        if state == "quiescent":
            state = str(rng.choice(names, p=probs))
        elif state == "promoter":
            state = "transcribed" if rng.random() < 0.7 else "quiescent"
        else:
            state = "quiescent"
    return out


def write_bigwig(path: str, values: dict[str, np.ndarray]) -> None:
    import pyBigWig

    bw = pyBigWig.open(path, "w")
    bw.addHeader(list(SIZES.items()))
    for chrom, v in values.items():
        bw.addEntries(chrom, 0, values=v.astype(np.float64).tolist(), span=BIN, step=BIN)
    bw.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                  "chromatin_example"))
    ap.add_argument("--seed", type=int, default=44)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)
    signal = {m: {} for m in MARKS}
    bed = []
    for chrom, size in SIZES.items():
        st = states(rng, size // BIN)
        x = rng.gamma(SHAPE, MEANS[st] / SHAPE)  # (bins, marks)
        for j, m in enumerate(MARKS):
            signal[m][chrom] = np.round(x[:, j], 3)
        change = np.flatnonzero(np.diff(st)) + 1
        starts = np.concatenate([[0], change])
        ends = np.concatenate([change, [len(st)]])
        bed += [(chrom, int(a) * BIN, int(b) * BIN, STATES[st[a]])
                for a, b in zip(starts, ends) if st[a] != 0]
    with open(os.path.join(args.out, "chrom.sizes"), "w") as fh:
        fh.writelines(f"{c}\t{n}\n" for c, n in SIZES.items())
    for m in MARKS[:4]:
        write_bigwig(os.path.join(args.out, f"{m}.bw"), signal[m])
    # the fifth mark as a gzipped bedGraph, with a stretch of chrB missing
    with gzip.GzipFile(os.path.join(args.out, "H3K4me1.bedgraph.gz"), "wb", mtime=0) as gz:
        lines = []
        for chrom, v in signal["H3K4me1"].items():
            for i, val in enumerate(v.tolist()):
                s = i * BIN
                if chrom == MISSING[0] and MISSING[1] <= s < MISSING[2]:
                    continue
                lines.append(f"{chrom}\t{s}\t{s + BIN}\t{val:g}\n")
        gz.write("".join(lines).encode())
    with open(os.path.join(args.out, "tracks.tsv"), "w") as fh:
        fh.write("name\tpath\ttransform\n")
        for m in MARKS:
            path = f"{m}.bw" if m != "H3K4me1" else "H3K4me1.bedgraph.gz"
            fh.write(f"{m}\t{path}\tlog1p\n")
    with open(os.path.join(args.out, "states.bed"), "w") as fh:
        fh.writelines(f"{c}\t{s}\t{e}\t{n}\n" for c, s, e, n in bed)
    counts = {s: sum(e - a for c, a, e, n in bed if n == s) for s in STATES[1:]}
    total = sum(SIZES.values())
    print(f"wrote {args.out}: {len(bed)} state intervals; bp per state: "
          + ", ".join(f"{s} {counts[s]}" for s in STATES[1:])
          + f", quiescent {total - sum(counts.values())}")


if __name__ == "__main__":
    main()
