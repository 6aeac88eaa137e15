"""Score trained gene-model runs the same way: chrI (the test chromosome) and the held-out
last part of chrII (the validation windows), one row per run, then mean (spread).

    python benchmarks/score_gene_runs.py GROUP=RUN_DIR[,RUN_DIR...] ... [--penalty P]
        [--rc on|off] [--branch-penalty B] [--first-atg] [--long-orfs N] [--donor-motif M]
        [--orf-finder]
        [--no-chrI] [--no-valid] [--threads N] [--record TITLE]

Each RUN_DIR holds best.pt (`semiseg train`). For each run this script calls `semiseg
annotate` on chrI (RUN_DIR/chrI.*) and on chrII's validation region (RUN_DIR/valid.*,
chrII:VALID_START-end, the windows `semiseg train` held out with the demo config),
then scores both like `semiseg evaluate` (the same functions: semiseg/metrics.py) at
tolerance 0 and 20 over the demo's labels intergenic / CDS+ / CDS- (introns count as
their own labels in the prediction and the truth, as in `semiseg evaluate`; the three
columns are the means of those three labels' rows), plus the gene-level numbers of
gene_metrics.py on chrI (start+stop exact over chrI's 121 coding genes) and the
predicted introns (exactly right / predicted). Annotations already present are reused
(delete them to re-annotate). Spread = max - min over a group's runs. --orf-finder adds
the ORF finder scored on chrI and on each held-out block of the runs given.

chrII's validation part chooses settings; chrI is the test chromosome (README).
--record TITLE appends the table to benchmarks/RESULTS.md with commit and machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gene_metrics import (
    TRUTH,
    append_results,
    commit,
    gene_metrics,
    machine,
    read_fasta,
    read_gff_genes,
)

from semiseg.evaluate.intervals import read_segments, read_truth
from semiseg.evaluate.run import _fill
from semiseg.metrics import add_segment_counts, new_segment_counts, prf

YEAST = os.path.join(ROOT, "data", "yeast")
SCHEME = os.path.join(ROOT, "configs", "demo.yaml")
SIZES = {"chrI": 230208, "chrII": 813178}
VALID_START = 696000  # inside the held-out last 15% (691,201-813,178) of configs/demo.yaml


def valid_block(cfg: dict) -> tuple[int, int]:
    """chrII's scored held-out region for a run's resolved config: VALID_START-end for the
    demo's split (all earlier tables), or, with windows.valid_offset (a cross-validation
    fold), the block `semiseg train` held out, from the same function (split_regions)."""
    if cfg.get("windows", {}).get("valid_offset") is None:
        return VALID_START, SIZES["chrII"]
    from semiseg.config.load import from_dict
    from semiseg.train.data import split_regions

    _, valid = split_regions(from_dict(cfg), SIZES)
    (_, lo, hi), = [v for v in valid if v[0] == "chrII"]
    return lo, hi
NAMES = ["intergenic", "CDS+", "CDS-", "intron+", "intron-"]
THREE = (0, 1, 2)


def labels(track, chrom: str, lo: int, hi: int) -> np.ndarray:
    """Label indices over [lo, hi), painted as `semiseg evaluate` paints them (intergenic
    where nothing is given, -1 in gaps of the truth)."""
    return _fill(hi, track, chrom, {n: i for i, n in enumerate(NAMES)}, 0)[lo:hi]


def scores(pred: np.ndarray, truth: np.ndarray) -> dict:
    """Macro F1, exact segment F1, exact boundary F1 and boundary F1 +-20 over THREE,
    counted as `semiseg evaluate` counts them."""
    C = len(NAMES)
    ok = (truth >= 0) & (pred >= 0)
    conf = np.bincount(truth[ok] * C + pred[ok], minlength=C * C).reshape(C, C)
    out = {"macro F1": [], "exact segment F1": [], "exact boundary F1": [],
           "boundary F1 +-20": []}
    seg0, seg20 = new_segment_counts(C), new_segment_counts(C)
    add_segment_counts(seg0, truth, pred, 0)
    add_segment_counts(seg20, truth, pred, 20)
    for c in THREE:
        tp = conf[c, c]
        out["macro F1"].append(prf(tp, conf[:, c].sum(), conf[c].sum())[2])
        out["exact segment F1"].append(prf(seg0["exact"][c], seg0["n_pred"][c],
                                           seg0["n_true"][c])[2])
        out["exact boundary F1"].append(prf(seg0["b_hit"][c], seg0["b_pred"][c],
                                            seg0["b_true"][c])[2])
        out["boundary F1 +-20"].append(prf(seg20["b_hit"][c], seg20["b_pred"][c],
                                           seg20["b_true"][c])[2])
    return {k: float(np.mean(v)) for k, v in out.items()}


def introns(bed_track, truth_track, chrom, lo, hi) -> str:
    def runs(track):
        out = set()
        if chrom not in track.intervals:
            return out
        for s, e, n in zip(*track.intervals[chrom]):
            if n.startswith("intron") and s >= lo and e <= hi:
                out.add((int(s), int(e), n))
        return out
    p, t = runs(bed_track), runs(truth_track)
    return f"{len(p & t)}/{len(p)}"


def annotate(model: str, out: str, fasta: str, extra: list[str], threads: int) -> None:
    if os.path.exists(out + ".bed"):
        return
    cmd = [sys.executable, "-m", "semiseg.cli", "annotate", "--model", model, "--fasta",
           fasta, "--out", out, "--quiet", *extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads))
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)


def score_run(d: str, args, truth_tracks, seqs, truth_genes) -> dict:
    model = os.path.join(d, "best.pt")
    with open(os.path.join(d, "config.yaml")) as fh:
        cfg = yaml.safe_load(fh)
    argmax = cfg["crf"].get("head") == "argmax"
    block = valid_block(cfg)
    extra = [] if args.penalty is None or argmax else ["--intron-penalty", str(args.penalty)]
    if args.branch_penalty and not argmax:
        extra += ["--branch-penalty", str(args.branch_penalty)]
    tag = "" if args.penalty is None else f".p{args.penalty:g}"  # (no introns to penalise
    # in an argmax-head run: its files carry the tag of the group's command all the same)
    if args.rc is not None:
        extra += ["--reverse-complement", args.rc]
        tag += f".rc{args.rc}"
    if args.branch_penalty:
        tag += f".b{args.branch_penalty:g}"
    if args.first_atg and not argmax:
        extra += ["--first-atg"]
        tag += ".atg"
    if args.donor_motif and not argmax:
        extra += ["--donor-motif", args.donor_motif]
        tag += f".d{args.donor_motif}"
    if args.long_orfs is not None and not argmax:
        extra += ["--long-orfs", str(args.long_orfs)]
        tag += f".o{args.long_orfs}"
    valid = chrI = None
    if not args.no_valid:
        region = os.path.join(d, "valid_region.bed")
        with open(region, "w") as fh:
            fh.write(f"chrII\t{block[0]}\t{block[1]}\n")
        valid = os.path.join(d, f"valid{tag}.bed")
        annotate(model, valid[:-4], os.path.join(YEAST, "chrII.fa"),
                 extra + ["--regions", region], args.threads)
    if not args.no_chrI:
        chrI = os.path.join(d, f"chrI{tag}.bed")
        annotate(model, chrI[:-4], os.path.join(YEAST, "chrI.fa"), extra, args.threads)
    genes = None if chrI is None else read_gff_genes(chrI[:-4] + ".gff3", ["chrI"])
    return score_beds(valid, chrI, genes, truth_tracks, seqs, truth_genes, block)


def score_beds(valid: str | None, chrI: str | None, chrI_genes, truth_tracks, seqs,
               truth_genes, block: tuple[int, int] = (VALID_START, SIZES["chrII"])) -> dict:
    """One row from label BEDs: `valid` covering chrII's held-out `block` (a whole-chrII
    BED is fine: only the region is scored), `chrI` covering chrI with its gene models
    `chrI_genes`; either may be None."""
    row = {}
    if valid is not None:
        p = read_segments(valid)
        lo, hi = block
        s = scores(labels(p, "chrII", lo, hi), labels(truth_tracks["chrII"], "chrII", lo, hi))
        row.update({f"valid {k}": v for k, v in s.items()})
        row["valid introns right/pred"] = introns(p, truth_tracks["chrII"], "chrII", lo, hi)
    if chrI is not None:
        p = read_segments(chrI)
        hi = SIZES["chrI"]
        s = scores(labels(p, "chrI", 0, hi), labels(truth_tracks["chrI"], "chrI", 0, hi))
        row.update({f"chrI {k}": v for k, v in s.items()})
        gm = gene_metrics(truth_genes, chrI_genes, seqs)
        row["chrI gene start+stop exact"] = gm["both_exact"]
        row["chrI introns right/pred"] = introns(p, truth_tracks["chrI"], "chrI", 0, hi)
    return row


def orf_finder_row(args, truth_tracks, seqs, truth_genes,
                   block: tuple[int, int] = (VALID_START, SIZES["chrII"])) -> dict:
    """The naive ORF finder (orf_finder.py), scored like the runs (on chrII's `block`)."""
    import orf_finder

    out = os.path.join(ROOT, "results", "score_gene_runs")
    os.makedirs(out, exist_ok=True)
    valid = chrI = genes = None
    if not args.no_valid:
        valid = os.path.join(out, "orf_finder.chrII.bed")
        orf_finder.run(os.path.join(YEAST, "chrII.fa"), valid)
    if not args.no_chrI:
        chrI = os.path.join(out, "orf_finder.chrI.bed")
        genes = orf_finder.run(os.path.join(YEAST, "chrI.fa"), chrI)["genes"]
    return score_beds(valid, chrI, genes, truth_tracks, seqs, truth_genes, block)


def run_block(d: str) -> tuple[int, int]:
    """chrII's held-out block of the run in folder d."""
    with open(os.path.join(d, "config.yaml")) as fh:
        return valid_block(yaml.safe_load(fh))


def table(groups: list[tuple[str, list[str], list[dict]]]) -> str:
    cols = list(groups[0][2][0])
    lines = ["| run | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, dirs, rows in groups:
        for d, r in zip(dirs, rows):
            lines.append(f"| {name} {os.path.basename(d.rstrip('/'))} | " + " | ".join(
                f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
        if len(rows) > 1:
            cells = []
            for c in cols:
                if isinstance(rows[0][c], float):
                    v = np.array([r[c] for r in rows])
                    cells.append(f"{v.mean():.3f} ({v.max() - v.min():.3f})")
                else:
                    cells.append(", ".join(r[c] for r in rows))
            lines.append(f"| **{name} mean (spread)** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("groups", nargs="+", help="GROUP=RUN_DIR[,RUN_DIR...]")
    ap.add_argument("--branch-penalty", type=float, default=0.0,
                    help="annotate's --branch-penalty (0: off)")
    ap.add_argument("--penalty", type=float, default=None,
                    help="annotate --intron-penalty (default: the model's own)")
    ap.add_argument("--rc", choices=["auto", "on", "off"], default=None,
                    help="annotate --reverse-complement (default: the model's own)")
    ap.add_argument("--first-atg", action="store_true",
                    help="annotate --first-atg (start codons at their ORF's first ATG)")
    ap.add_argument("--long-orfs", type=int, default=None,
                    help="annotate --long-orfs N (intergenic ORFs of N+ codons called genes)")
    ap.add_argument("--donor-motif", default=None,
                    help="annotate --donor-motif M (introns begin with this IUPAC motif)")
    ap.add_argument("--no-chrI", action="store_true")
    ap.add_argument("--no-valid", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--orf-finder", action="store_true",
                    help="add a row for the naive ORF finder (benchmarks/orf_finder.py)")
    ap.add_argument("--record", default=None, help="append to RESULTS.md under this title")
    args = ap.parse_args(argv)
    from semiseg.evaluate.intervals import load_scheme_arg

    scheme = load_scheme_arg(SCHEME)
    truth_tracks = {c: read_truth(TRUTH, scheme, {c: n}) for c, n in SIZES.items()}
    seqs = read_fasta(os.path.join(YEAST, "chrI.fa"))
    truth_genes = read_gff_genes(TRUTH, ["chrI"])
    groups = []
    for g in args.groups:
        name, dirs = g.split("=", 1)
        dirs = dirs.split(",")
        groups.append((name, dirs, [score_run(d, args, truth_tracks, seqs,
                                              truth_genes) for d in dirs]))
    if args.orf_finder:  # one row per held-out block of the runs given
        blocks = list(dict.fromkeys(run_block(d) for _, dirs, _ in groups for d in dirs))
        groups.append(("ORF finder", [f"(no training; chrII {lo}-{hi})" for lo, hi in blocks],
                       [orf_finder_row(args, truth_tracks, seqs, truth_genes, b)
                        for b in blocks]))
    text = table(groups)
    print(text)
    if args.record:
        cmd = "python benchmarks/score_gene_runs.py " + " ".join(argv or sys.argv[1:])
        append_results(f"\n## {args.record} - commit {commit()}, {machine()}\n\n"
                       f"`{cmd}`\n\n{text}\n")


if __name__ == "__main__":
    main()
