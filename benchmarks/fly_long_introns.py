"""Where the fly model's long introns go: the truth introns of a region by length and the
share of their bases each prediction calls intron on the same strand; the CRF's own
balance of a long intron against intergenic sequence; and the reverse-complement check.

    python benchmarks/fly_long_introns.py bins NAME=PRED.bed|PRED.gtf ... [--region test]
    python benchmarks/fly_long_introns.py balance [--model fly]
    python benchmarks/fly_long_introns.py revcomp [--model fly] [--region test] --out DIR
    python benchmarks/fly_long_introns.py runlengths [--k 256]

bins     truth introns (CDS gaps of data/fly's transcripts wholly inside the region,
         distinct coordinates) in length bins, per strand: count, bp, and per prediction
         the fraction of their bases labelled intron of that strand (semiseg BED9, or a
         GTF's intron rows such as AUGUSTUS's).
balance  the model's per-base intron-against-intergenic score: its tied-intron bias
         (crf.noncoding_bias) and the log-partition per base of a long run of each label
         with every score 0 (the segmentations a run can take), as (log Z(n1) - log
         Z(n0)) / (n1 - n0) from the CRF itself (n1 - n0 whole tail pieces with run tails).
revcomp  the region's reverse complement as its own FASTA, annotated with the model (CPU),
         labels and coordinates mapped back: DIR/rc_mapped.bed, to score with
         fly_baselines.py --pred NAME=DIR/rc_mapped.bed (intron+ recall of the mapped
         prediction = the original minus-strand introns read on the plus strand).
runlengths  the training part's (0-2.55 Mb) runs of intergenic sequence and of intron
         insides in the gold codes training uses (runs cut by the part's ends or by
         masked transcripts are left out / split): count, median, and for runs over K
         the mean excess length and the per-base log of continuing a geometric tail with
         that mean, log(1 - 1 / mean excess): the tail a count would give.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FASTA = os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa")
GFF = os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.gff3")
CHROM = "chr2R_2M_6M"
REGIONS = {"test": (3_000_000, 4_000_000), "tune": (2_550_000, 3_000_000)}
BINS = [0, 100, 500, 2000, 5000, 20000, 10**9]
FLIP = {"CDS+": "CDS-", "CDS-": "CDS+", "intron+": "intron-", "intron-": "intron+",
        "UTR+": "UTR-", "UTR-": "UTR+", "ncRNA+": "ncRNA-", "ncRNA-": "ncRNA+"}


def truth_introns(lo: int, hi: int) -> set[tuple[int, int, str]]:
    cds = collections.defaultdict(list)
    with open(GFF) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(f) < 9 or f[2] != "CDS":
                continue
            s, e = int(f[3]) - 1, int(f[4])
            if s < lo or e > hi:
                continue
            parent = next(a[7:] for a in f[8].split(";") if a.startswith("Parent="))
            cds[parent].append((s, e, f[6]))
    out = set()
    for rows in cds.values():
        rows.sort()
        out |= {(a[1], b[0], a[2]) for a, b in zip(rows, rows[1:])}
    return out


def labels_of(path: str, lo: int, hi: int) -> np.ndarray:
    lab = np.full(hi - lo, "", dtype="U10")
    with open(path) as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if line.startswith(("#", "track", "browser")) or len(f) < 4:
                continue
            if path.endswith((".gtf", ".gff", ".gff3")):
                if len(f) < 9 or f[2] != "intron":
                    continue
                s, e, name = int(f[3]) - 1, int(f[4]), "intron" + f[6]
            else:
                s, e, name = int(f[1]), int(f[2]), f[3]
            s, e = max(s, lo), min(e, hi)
            if e > s:
                lab[s - lo:e - lo] = name
    return lab


def cmd_bins(args) -> None:
    lo, hi = REGIONS[args.region]
    introns = truth_introns(lo, hi)
    preds = {p.split("=", 1)[0]: labels_of(p.split("=", 1)[1], lo, hi) for p in args.pred}
    print(f"truth introns of {CHROM}:{lo:,}-{hi:,}: fraction of their bases called intron "
          "of the same strand\n")
    print("| strand | intron length | introns (bp) | " + " | ".join(preds) + " |")
    print("|---|---|---|" + "---|" * len(preds))
    for strand in "+-":
        for a, b in zip(BINS, BINS[1:]):
            sel = [i for i in introns if i[2] == strand and a <= i[1] - i[0] < b]
            bp = sum(e - s for s, e, _ in sel)
            cells = []
            for lab in preds.values():
                hit = sum(int((lab[s - lo:e - lo] == "intron" + strand).sum())
                          for s, e, _ in sel)
                cells.append(f"{hit / bp:.2f}" if bp else "-")
            span = f"{a:,}-{b:,}" if b < 10**9 else f">= {a:,}"
            print(f"| {strand} | {span} | {len(sel)} ({bp:,}) | " + " | ".join(cells) + " |")


def cmd_balance(args) -> None:
    import torch

    from semiseg.checkpoint import build_model, load_checkpoint
    from semiseg.genemodel.symmetry import run_rates

    torch.set_grad_enabled(False)
    head = build_model(load_checkpoint(args.model))[0].crf
    bias = head.noncoding_bias.detach().tolist() if head.tie is not None else []
    print(f"noncoding_bias (per intron base, per strand): {bias}")
    labels = ["outside:intergenic", "intron+", "intron-"]
    for label, rate in run_rates(head, labels).items():
        print(f"{label}: log-partition per base of a long run, scores 0: {rate:.5f}")


def cmd_revcomp(args) -> None:
    import pyfaidx

    lo, hi = REGIONS[args.region]
    os.makedirs(args.out, exist_ok=True)
    with pyfaidx.Fasta(FASTA) as fa:
        seq = str(fa[CHROM][lo:hi])
    rc = seq.translate(str.maketrans("ACGTacgt", "TGCAtgca"))[::-1]
    fa_path = os.path.join(args.out, "rc.fa")
    with open(fa_path, "w") as fh:
        fh.write(">rc\n" + "\n".join(rc[i:i + 80] for i in range(0, len(rc), 80)) + "\n")
    prefix = os.path.join(args.out, "rc")
    subprocess.run([sys.executable, "-m", "semiseg.cli", "annotate", "--model", args.model,
                    "--fasta", fa_path, "--out", prefix, "--quiet", "--device", "cpu"],
                   check=True)
    rows = []
    with open(prefix + ".bed") as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if line.startswith(("#", "track", "browser")):
                continue
            s, e = lo + (hi - lo) - int(f[2]), lo + (hi - lo) - int(f[1])
            strand = {"+": "-", "-": "+"}.get(f[5], f[5])
            rows.append([CHROM, s, e, FLIP.get(f[3], f[3]), f[4], strand, s, e, f[8]])
    rows.sort(key=lambda r: r[1])
    out = os.path.join(args.out, "rc_mapped.bed")
    with open(out, "w") as fh:
        fh.writelines("\t".join(map(str, r)) + "\n" for r in rows)
    print(out)


def cmd_runlengths(args) -> None:
    import math

    from semiseg.config.load import load_config
    from semiseg.genemodel.frames import INTRON_ANY
    from semiseg.genome._util import runs
    from semiseg.train.data import frame_gold_for, prepare

    cfg = load_config(os.path.join(ROOT, "configs", "gene_structure.yaml"), overrides=[
        f"inputs.fasta={FASTA}", f"labels.annotation={GFF}", "windows.chroms=null"])
    data, ann, scheme, _ = prepare(cfg)
    gold = frame_gold_for(cfg, scheme, ann, data)
    codes = gold._chrom(CHROM)[:2_550_000].astype(np.int64)
    inter = gold.layout.index("outside:intergenic")
    print(f"runs of the training part {CHROM}:0-2,550,000, K = {args.k}")
    for name, mask in (("intergenic", codes == inter), ("intron+", codes == INTRON_ANY["+"]),
                       ("intron-", codes == INTRON_ANY["-"])):
        s, e, v = runs(mask.astype(np.int8))
        inner = (v == 1) & (s > 0) & (e < len(codes))
        lengths = (e - s)[inner]
        long = lengths[lengths > args.k]
        ex = float((long - args.k).mean())
        print(f"{name}: {len(lengths)} runs, median {np.median(lengths):.0f} bp, "
              f"{len(long)} over {args.k} bp with mean excess {ex:.0f} bp: per-base log "
              f"continue {math.log(1 - 1 / ex):.5f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bins")
    b.add_argument("pred", nargs="+", metavar="NAME=PATH")
    b.add_argument("--region", choices=sorted(REGIONS), default="test")
    bal = sub.add_parser("balance")
    bal.add_argument("--model", default="fly")
    r = sub.add_parser("revcomp")
    r.add_argument("--model", default="fly")
    r.add_argument("--region", choices=sorted(REGIONS), default="test")
    r.add_argument("--out", required=True)
    rl = sub.add_parser("runlengths")
    rl.add_argument("--k", type=int, default=256)
    args = ap.parse_args()
    {"bins": cmd_bins, "balance": cmd_balance, "revcomp": cmd_revcomp,
     "runlengths": cmd_runlengths}[args.cmd](args)


if __name__ == "__main__":
    main()
