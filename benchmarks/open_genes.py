"""Open a predicted GFF3's genes at the base, as a biologist checks them: for every mRNA,
its CDS rows spliced from the FASTA and read on its strand: length a multiple of 3, an
ATG first, a stop codon at the end (the codon after the last CDS row, or the CDS's own
last codon), no stop codon inside; each intron between two CDS rows GT..AG; intron
lengths. Prints one summary table (and with --list, the genes that fail a check).

    python benchmarks/open_genes.py --fasta data/fly/chr2R_2M_6M.fa PRED.gff3 [...]
        [--regions BED] [--list]

A gene the file marks `partial=true` (semiseg's GFF3 does at a sequence's or region's
end) is counted as cut by an edge. --regions: a gene whose mRNA (or CDS) ends within 3
bp of a region's edge may be cut by it; such genes failing only the frame, ATG or stop
check are counted apart ("cut by an edge"), not as failures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict

STOPS = {"TAA", "TAG", "TGA"}
COMP = str.maketrans("ACGTNacgtn", "TGCANtgcan")


def read_fasta(path: str) -> dict[str, str]:
    seqs: dict[str, list[str]] = {}
    name = None
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                name = line[1:].split()[0]
                seqs[name] = []
            elif name is not None:
                seqs[name].append(line.strip().upper())
    return {k: "".join(v) for k, v in seqs.items()}


def read_cds(path: str):
    """mRNA id -> (chrom, strand, sorted 0-based half-open CDS intervals, the mRNA's
    (start, end), or the CDS's where the file has no mRNA row; (-1, -1) for an mRNA the
    file marks partial=true)."""
    out: dict[str, list] = defaultdict(list)
    where: dict[str, tuple[str, str]] = {}
    span: dict[str, tuple[int, int]] = {}
    with open(path) as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            f = line.rstrip("\n").split("\t")
            if len(f) != 9 or f[2] not in ("CDS", "mRNA", "transcript"):
                continue
            attrs = dict(p.split("=", 1) for p in f[8].split(";") if "=" in p)
            if f[2] != "CDS":
                partial = attrs.get("partial") == "true"  # the writer says it is cut
                span[attrs.get("ID", "")] = (-1, -1) if partial else (int(f[3]) - 1, int(f[4]))
                continue
            parent = attrs.get("Parent", attrs.get("ID", ""))
            out[parent].append((int(f[3]) - 1, int(f[4])))
            where[parent] = (f[0], f[6])
    return {k: (*where[k], sorted(v), span.get(k, (min(v)[0], max(v)[1])))
            for k, v in out.items()}


def read_regions(path: str | None) -> dict[str, list[tuple[int, int]]]:
    regs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    if path:
        with open(path) as fh:
            for line in fh:
                f = line.split()
                if len(f) >= 3 and not line.startswith(("#", "track", "browser")):
                    regs[f[0]].append((int(f[1]), int(f[2])))
    return regs


def check_gene(seq: str, strand: str, cds: list[tuple[int, int]]) -> dict:
    """The checks of one mRNA (see the module's docstring)."""
    coding = "".join(seq[a:b] for a, b in cds)
    introns = [(cds[i][1], cds[i + 1][0]) for i in range(len(cds) - 1)]
    if strand == "-":
        coding = coding.translate(COMP)[::-1]
        after = seq[max(0, cds[0][0] - 3):cds[0][0]].translate(COMP)[::-1]
        sites = [(seq[b - 2:b].translate(COMP)[::-1], seq[a:a + 2].translate(COMP)[::-1])
                 for a, b in introns]
    else:
        after = seq[cds[-1][1]:cds[-1][1] + 3]
        sites = [(seq[a:a + 2], seq[b - 2:b]) for a, b in introns]
    codons = [coding[i:i + 3] for i in range(0, len(coding) - len(coding) % 3, 3)]
    own_stop = bool(codons) and codons[-1] in STOPS
    inner = codons[:-1] if own_stop else codons
    return {
        "frame": len(coding) % 3 == 0,
        "atg": coding[:3] == "ATG",
        "stop": own_stop or after in STOPS,
        "no_inner_stop": not any(c in STOPS for c in inner),
        "gt_ag": all(d == "GT" and a == "AG" for d, a in sites),
        "introns": [b - a for a, b in introns],
    }


def near_edge(chrom: str, span: tuple[int, int], regions) -> bool:
    lo, hi = span
    if lo < 0:
        return True  # marked partial=true by the file itself
    return any(lo - a <= 3 or b - hi <= 3 for a, b in regions.get(chrom, ()) if a <= lo < b)


def summarise(path: str, genome: dict[str, str], regions, show: bool) -> list[str]:
    genes = read_cds(path)
    fails: dict[str, int] = defaultdict(int)
    cut = 0
    lengths: list[int] = []
    n_introns = 0
    for gid, (chrom, strand, cds, span) in sorted(genes.items()):
        r = check_gene(genome[chrom], strand, cds)
        lengths += r["introns"]
        n_introns += len(r["introns"])
        bad = [k for k in ("frame", "atg", "stop", "no_inner_stop", "gt_ag") if not r[k]]
        if bad and near_edge(chrom, span, regions) and set(bad) <= {"atg", "stop", "frame"}:
            cut += 1
            continue
        for k in bad:
            fails[k] += 1
        if bad and show:
            print(f"  {path}: {gid} {chrom}:{cds[0][0]}-{cds[-1][1]} {strand} fails "
                  f"{', '.join(bad)}", file=sys.stderr)
    n = len(genes)
    span = (f"{min(lengths)} / {int(statistics.median(lengths))} / {max(lengths)}"
            if lengths else "-")
    return [path, str(n), str(cut), str(n - cut - fails["frame"]), str(n - cut - fails["atg"]),
            str(n - cut - fails["stop"]), str(n - cut - fails["no_inner_stop"]),
            str(n_introns), str(n - cut - fails["gt_ag"]), span]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gff3", nargs="+")
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--regions")
    ap.add_argument("--list", action="store_true", help="name each gene that fails a check")
    args = ap.parse_args(argv)
    genome = read_fasta(args.fasta)
    regions = read_regions(args.regions)
    head = ["file", "genes", "cut by an edge", "CDS a multiple of 3", "ATG first",
            "stop at the end", "no inner stop", "introns", "genes all GT..AG",
            "intron bp min / median / max"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for path in args.gff3:
        print("| " + " | ".join(summarise(path, genome, regions, args.list)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
