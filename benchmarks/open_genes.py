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
import os
import statistics
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from lib import header  # noqa: E402

from semiseg.evaluate.genelevel import read_gene_models  # noqa: E402
from semiseg.genemodel.splitstops import STOPS  # noqa: E402
from semiseg.genome import Fasta  # noqa: E402
from semiseg.genome.codes import reverse_complement as rc  # noqa: E402


def mrna_spans(path: str) -> dict[str, tuple[int, int] | None]:
    """mRNA (or transcript) ID -> its 0-based half-open span, None where the file marks it
    partial=true (the transcripts' CDS rows: genelevel.read_gene_models)."""
    out: dict[str, tuple[int, int] | None] = {}
    with open(path) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(f) != 9 or f[2] not in ("mRNA", "transcript"):
                continue
            attrs = dict(p.split("=", 1) for p in f[8].split(";") if "=" in p)
            out[attrs.get("ID", "")] = (None if attrs.get("partial") == "true"
                                        else (int(f[3]) - 1, int(f[4])))
    return out


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
        coding = rc(coding)
        after = rc(seq[max(0, cds[0][0] - 3):cds[0][0]])
        sites = [(rc(seq[b - 2:b]), rc(seq[a:a + 2])) for a, b in introns]
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


def near_edge(chrom: str, span: tuple[int, int] | None, regions) -> bool:
    if span is None:
        return True  # marked partial=true by the file itself
    lo, hi = span
    return any(lo - a <= 3 or b - hi <= 3 for a, b in regions.get(chrom, ()) if a <= lo < b)


def summarise(path: str, fa: Fasta, regions, show: bool) -> list[str]:
    genes = read_gene_models(path, types=("CDS",))
    spans = mrna_spans(path)
    fails: dict[str, int] = defaultdict(int)
    cut = 0
    lengths: list[int] = []
    n_introns = 0
    for g in genes:
        gid, chrom, strand, cds = g.id, g.chrom, g.strand, g.cds
        lo = max(0, g.start - 3)  # the gene and 3 bp either side (a stop after the CDS)
        seq = fa.fetch(chrom, lo, min(fa.chrom_sizes[chrom], g.end + 3)).upper()
        r = check_gene(seq, strand, [(a - lo, b - lo) for a, b in cds])
        span = spans.get(gid, (g.start, g.end))
        lengths += r["introns"]
        n_introns += len(r["introns"])
        bad = [k for k in ("frame", "atg", "stop", "no_inner_stop", "gt_ag") if not r[k]]
        # cut: marked partial by the file (whatever it then fails: its codons are read
        # from a truncated start), or within 3 bp of a region's edge failing only the ends
        if bad and (span is None or (near_edge(chrom, span, regions)
                                     and set(bad) <= {"atg", "stop", "frame"})):
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
    regions = read_regions(args.regions)
    print(header("benchmarks/open_genes.py", "cpu", "python " + " ".join(sys.argv)))
    head = ["file", "genes", "cut by an edge", "CDS a multiple of 3", "ATG first",
            "stop at the end", "no inner stop", "introns", "genes all GT..AG",
            "intron bp min / median / max"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    with Fasta(args.fasta) as fa:
        for path in args.gff3:
            print("| " + " | ".join(summarise(path, fa, regions, args.list)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
