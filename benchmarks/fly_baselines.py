"""Fly baselines (issue 41): AUGUSTUS and the ORF finder on the held-out fly region, and
any prediction scored the same way.

    python benchmarks/fly_baselines.py [--region test|valid|tune|late] [--pred NAME=PATH ...]
                                       [--no-baselines] [--rerun-augustus] [--record]

Data: data/fly/chr2R_2M_6M.fa / .gff3 (dm3 chr2R 2-6 Mb, scipio CDS structures; see
data/README.md). Split: training and choosing settings on sequence coordinates
0-3,000,000; `--region valid` = 2,000,000-3,000,000 (the validation part, for
reference), `--region tune` = 2,550,000-3,000,000 (the training runs' validation block),
`--region test` (default) = 3,000,000-4,000,000, the held-out last 1 Mb, `--region late`
= 3,400,000-4,000,000 (its part that a model trained on the whole shared sequence,
0-3.4 Mb, did not train on) (0-based half-open).

What is scored, for each method, exactly as `semiseg evaluate --pred P --truth
benchmarks/results/fly/truth_REGION.gff3 --scheme gene_structure --regions
benchmarks/results/fly/region_REGION.bed --fasta data/fly/chr2R_2M_6M.fa --tolerance 0`
computes it (the same function, semiseg.evaluate.evaluate):
- truth: the transcripts of the fly GFF3 lying wholly inside the region (CDS span
  including the stop codon just after it), written to truth_REGION.gff3;
- only the region's bases, segments and boundaries are counted (--regions), and only
  gene models wholly inside it;
- columns: base macro F1 over intergenic, CDS+, CDS-, intron+, intron- (the labels of
  the truth; a method's other labels, e.g. UTR, count in its rows of the JSON only),
  exact segment F1 and exact boundary F1 (macro over the same five labels, tolerance
  0), exon F1 (exact CDS exon), gene sensitivity / precision / F1 (whole CDS chain
  exactly right; truth loci for sensitivity: see semiseg/evaluate.py GENE_RULES), and
  the base-level recall of intron+ and intron-. Stop codons of both sides are
  normalised from the sequence (inside the CDS; base labels too), so that the fly
  truth's convention (stop codon after the CDS rows) and a method's (AUGUSTUS fly: inside)
  do not count as errors; --raw-stops scores without the FASTA instead (labels as each
  file writes them; gene matches with the 3' end free by 3 bp).

Methods:
- AUGUSTUS 3.5 `--species=fly`, run as a user would: the region extracted to a FASTA
  (header `chr2R_2M_6M:START-END`), `augustus --species=fly REGION.fa > OUT`, its
  coordinates shifted back onto chr2R_2M_6M. The shifted output is kept in
  benchmarks/results/fly/augustus_REGION.gtf (reused unless --rerun-augustus; its first
  lines say how it was made). Scored from its CDS and stop_codon rows (UTRs not read).
- ORF finder (benchmarks/orf_finder.py, longest first, >= 100 codons, no learning) on
  the region's sequence, written as a GFF3 of one-exon genes (orf_REGION.gff3).
- --pred NAME=PATH (repeatable): a prediction (semiseg's PREFIX.bed or PREFIX.gff3, e.g.
  from `semiseg annotate --model fly --fasta data/fly/chr2R_2M_6M.fa --regions
  benchmarks/results/fly/region_test.bed --out X`, or another gene finder's GFF3/GTF on
  chr2R_2M_6M coordinates).

The evaluate reports of each method go to benchmarks/results/fly/REGION.SLUG.json.
--record appends the table, with date, commit and machine, to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import gene_metrics as gm
import orf_finder
from augustus_baseline import augustus_version

from semiseg.evaluate import genelevel
from semiseg.evaluate.run import evaluate, write_report
from semiseg.genome import load_scheme

FLY = os.path.join(ROOT, "data", "fly")
FASTA = os.path.join(FLY, "chr2R_2M_6M.fa")
GFF = os.path.join(FLY, "chr2R_2M_6M.gff3")
CHROM = "chr2R_2M_6M"
REGIONS = {"test": (3_000_000, 4_000_000), "valid": (2_000_000, 3_000_000),
           "tune": (2_550_000, 3_000_000),  # tune: the training runs' validation block
           "late": (3_400_000, 4_000_000),  # late: the validation block of a model trained
# on the whole shared sequence (0-3.4 Mb; fly_gene_gpu.sh's "all"), inside the test region
           "folds": (0, 3_000_000)}  # folds: six 0.5 Mb blocks, each predicted by the model
# that held it out (benchmarks/fly_folds.py)
# a region scored as separate blocks: truth = the transcripts wholly inside one block (a
# fold's model predicts its own block only, so a gene across two blocks is in neither)
BLOCKS = {"folds": [(a, a + 500_000) for a in range(*REGIONS["folds"], 500_000)]}
OUTDIR = os.path.join(HERE, "results", "fly")
FIVE = ("intergenic", "CDS+", "CDS-", "intron+", "intron-")
COLUMNS = [("macro_f1", "base macro F1"), ("segment_exact", "exact segment F1"),
           ("boundary_exact", "exact boundary F1"), ("exon_f1", "exon F1"),
           ("gene_sens", "gene sens"), ("gene_prec", "gene prec"), ("gene_f1", "gene F1"),
           ("intron_plus_recall", "intron+ recall"), ("intron_minus_recall", "intron- recall")]


def rel(path: str) -> str:
    return os.path.relpath(path, ROOT)


def region_files(name: str, seq: str, outdir: str) -> tuple[str, str, int]:
    """region_NAME.bed and truth_NAME.gff3 (transcripts wholly inside the region, or
    inside one of its BLOCKS, stop codon included); returns their paths and the number of
    truth transcripts kept."""
    lo, hi = REGIONS[name]
    blocks = BLOCKS.get(name, [(lo, hi)])
    os.makedirs(outdir, exist_ok=True)
    bed = os.path.join(outdir, f"region_{name}.bed")
    with open(bed, "w") as fh:
        fh.write("".join(f"{CHROM}\t{a}\t{b}\n" for a, b in blocks))
    models = genelevel.read_gene_models(GFF)
    norm, _ = genelevel.normalise_stops(models, lambda c, a, b: seq[a:b], {CHROM: len(seq)})
    keep = {g.id for g in genelevel.inside(norm, {CHROM: blocks})}
    # the GFF3 is gene > mRNA > CDS: keep the mRNA rows kept, their genes and CDS rows
    with open(GFF) as fh:
        lines = fh.read().splitlines()
    genes = set()
    for ln in lines:
        f = ln.split("\t")
        if len(f) == 9 and f[2] == "mRNA":
            a = dict(p.split("=", 1) for p in f[8].split(";") if "=" in p)
            if a.get("ID") in keep:
                genes.add(a.get("Parent"))
    out = [(f"##gff-version 3\n##sequence-region {CHROM} 1 {len(seq)}\n"
            f"# {rel(GFF)}: the {len(keep)} transcripts wholly inside {CHROM}:{lo}-{hi} "
            + (f"(inside one of its {len(blocks)} blocks) " if len(blocks) > 1 else "") +
            "(0-based half-open; stop codon included), written by "
            "benchmarks/fly_baselines.py\n")]
    for ln in lines:
        f = ln.split("\t")
        if len(f) != 9:
            continue
        a = dict(p.split("=", 1) for p in f[8].split(";") if "=" in p)
        if (f[2] == "gene" and a.get("ID") in genes) or a.get("ID") in keep or (
                a.get("Parent") in keep):
            out.append(ln + "\n")
    truth = os.path.join(outdir, f"truth_{name}.gff3")
    with open(truth, "w") as fh:
        fh.write("".join(out))
    return bed, truth, len(keep)


def run_augustus(name: str, seq: str, outdir: str, rerun: bool) -> tuple[str, dict]:
    """augustus_NAME.gtf on chr2R_2M_6M coordinates (module doc); reused when present."""
    lo, hi = REGIONS[name]
    out = os.path.join(outdir, f"augustus_{name}.gtf")
    if os.path.isfile(out) and not rerun:
        with open(out) as fh:
            head = "".join(fh.readline() for _ in range(3))
        return out, {"reused": True, "header": head.strip()}
    exe = shutil.which("augustus")
    if exe is None:
        raise SystemExit("fly_baselines: augustus is not installed (apt-get install augustus "
                         "augustus-data); the saved output is missing too: " + rel(out))
    version = augustus_version(exe)
    with tempfile.TemporaryDirectory() as tmp:
        fa = os.path.join(tmp, f"{name}.fa")
        sub = seq[lo:hi]
        with open(fa, "w") as fh:
            fh.write(f">{CHROM}:{lo}-{hi}\n")
            fh.writelines(sub[i:i + 60] + "\n" for i in range(0, len(sub), 60))
        t0 = time.perf_counter()
        r = subprocess.run([exe, "--species=fly", os.path.basename(fa)], cwd=tmp,
                           capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"fly_baselines: augustus failed ({r.returncode}): {r.stderr}")
        raw = r.stdout
    n_rows = shift_augustus(raw, lo, out, header=(
        f"# {version}; `augustus --species=fly {name}.fa > raw.gff` on {CHROM}:{lo}-{hi} "
        f"(0-based half-open, extracted by benchmarks/fly_baselines.py), {seconds:.0f} s "
        f"wall on {gm.machine()}\n# coordinates shifted by +{lo} onto {CHROM} "
        f"({datetime.now(UTC):%Y-%m-%d})\n"))
    return out, {"reused": False, "seconds": seconds, "version": version, "rows": n_rows}


def shift_augustus(raw: str, offset: int, out: str, header: str = "") -> int:
    """AUGUSTUS output on a region's FASTA -> the same rows on chr2R_2M_6M (columns 1, 4,
    5); comment lines kept. Returns the number of feature rows."""
    lines, n = [header], 0
    for ln in raw.splitlines():
        f = ln.split("\t")
        if ln.startswith("#") or len(f) != 9:
            lines.append(ln + "\n")
            continue
        f[0] = CHROM
        f[3], f[4] = str(int(f[3]) + offset), str(int(f[4]) + offset)
        lines.append("\t".join(f) + "\n")
        n += 1
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("".join(lines))
    os.replace(tmp, out)
    return n


def run_orf_finder(name: str, seq: str, outdir: str) -> tuple[str, float]:
    """orf_NAME.gff3: the ORF finder's genes on the region, on chr2R_2M_6M coordinates."""
    lo, hi = REGIONS[name]
    t0 = time.perf_counter()
    genes, _ = orf_finder.orf_genes({CHROM: seq[lo:hi]})
    seconds = time.perf_counter() - t0
    out = os.path.join(outdir, f"orf_{name}.gff3")
    with open(out, "w") as fh:
        fh.write(f"##gff-version 3\n# benchmarks/orf_finder.py orf_genes (>= 100 codons, "
                 f"longest first) on {CHROM}:{lo}-{hi}, shifted onto {CHROM}\n")
        for k, g in enumerate(genes, 1):
            (s, e), = g.cds
            a, b = s + lo + 1, e + lo
            fh.write(f"{CHROM}\torf\tgene\t{a}\t{b}\t.\t{g.strand}\t.\tID=orf{k}\n"
                     f"{CHROM}\torf\tmRNA\t{a}\t{b}\t.\t{g.strand}\t.\tID=orf{k}.t;"
                     f"Parent=orf{k}\n"
                     f"{CHROM}\torf\tCDS\t{a}\t{b}\t.\t{g.strand}\t0\tParent=orf{k}.t\n")
    return out, seconds


def score(pred: str, truth: str, regions: str, outdir: str, region: str, name: str,
          raw_stops: bool = False) -> dict:
    """One table row: `semiseg evaluate ... --tolerance 0` (module doc); the report is
    written to OUTDIR/REGION.SLUG.{tsv,json} (REGION.raw.SLUG with raw_stops: no --fasta,
    so stop codons are not normalised)."""
    res = evaluate(pred, truth, scheme=load_scheme("gene_structure"), tolerance=0,
                   regions=regions, fasta=None if raw_stops else FASTA)
    write_report(res, os.path.join(outdir, f"{region}.{'raw.' if raw_stops else ''}"
                                           f"{gm.slug(name)}"))
    rows = {r["label"]: r for r in res["labels"]}

    def macro(key):
        return sum(rows[lab][key] for lab in FIVE) / len(FIVE)

    g = res["genes"]
    return {"method": name, "pred": pred, "macro_f1": macro("f1"),
            "segment_exact": macro("segment_f1_exact"), "boundary_exact": macro("boundary_f1"),
            "exon_f1": g["exon"]["f1"], "gene_sens": g["gene"]["sensitivity"],
            "gene_prec": g["gene"]["precision"], "gene_f1": g["gene"]["f1"],
            "intron_plus_recall": rows["intron+"]["recall"],
            "intron_minus_recall": rows["intron-"]["recall"],
            "genes": g, "bp": res["bp_evaluated"]}


def table(rows: list[dict]) -> str:
    return gm.markdown(["method"] + [h for _, h in COLUMNS] + ["truth loci / pred genes"],
                       [[r["method"]] + [r[k] for k, _ in COLUMNS]
                        + [f"{r['genes']['truth_loci']} / {r['genes']['pred_models']}"]
                        for r in rows])


def seed_summary(rows: list[dict]) -> str:
    """Rows named VARIANT_sSEED grouped by variant: mean and (min-max) of each column over
    the seeds ("" when no row has a seed suffix)."""
    import re
    groups: dict[str, list[dict]] = {}
    for r in rows:
        m = re.fullmatch(r"(.+)_s\d+", r["method"])
        if m:
            groups.setdefault(m.group(1), []).append(r)
    if not groups:
        return ""
    out = []
    for name, rs in groups.items():
        cells = []
        for k, _ in COLUMNS:
            v = [r[k] for r in rs]
            cells.append(f"{sum(v) / len(v):.3f} ({min(v):.3f}-{max(v):.3f})")
        out.append([f"{name} ({len(rs)} seeds)"] + cells)
    return gm.markdown(["variant: mean (min-max)"] + [h for _, h in COLUMNS], out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="AUGUSTUS and ORF-finder baselines on the "
                                             "held-out fly region; score predictions alike.")
    ap.add_argument("--region", choices=sorted(REGIONS), default="test")
    ap.add_argument("--pred", action="append", default=[], metavar="NAME=PATH",
                    help="a prediction to score (semiseg BED/GFF3 or a GFF3/GTF); repeatable")
    ap.add_argument("--no-baselines", action="store_true", help="score --pred only")
    ap.add_argument("--rerun-augustus", action="store_true",
                    help="run AUGUSTUS again instead of reusing its saved output")
    ap.add_argument("--raw-stops", action="store_true",
                    help="score without --fasta: base labels as each file writes its stop "
                         "codons (fly truth: after the CDS; AUGUSTUS fly: inside), gene and "
                         "exon matches with the 3' end free by 3 bp")
    ap.add_argument("--outdir", default=OUTDIR)
    ap.add_argument("--record", action="store_true", help="append to benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    seq = gm.read_fasta(FASTA)[CHROM]
    regions, truth, n_truth = region_files(args.region, seq, args.outdir)
    lo, hi = REGIONS[args.region]
    rows, notes = [], []
    if not args.no_baselines:
        aug, info = run_augustus(args.region, seq, args.outdir, args.rerun_augustus)
        notes.append(f"AUGUSTUS: {rel(aug)} ("
                     + ("saved output reused: " + info["header"].splitlines()[0].lstrip("# ")
                        if info["reused"] else
                        f"ran now: {info['version']}, {info['seconds']:.0f} s wall") + ")")
        rows.append(score(aug, truth, regions, args.outdir, args.region, "AUGUSTUS 3.5 fly",
                          args.raw_stops))
        orf, secs = run_orf_finder(args.region, seq, args.outdir)
        notes.append(f"ORF finder: {rel(orf)} ({secs:.1f} s)")
        rows.append(score(orf, truth, regions, args.outdir, args.region, "ORF finder",
                          args.raw_stops))
    for item in args.pred:
        name, sep, path = item.partition("=")
        if not sep:
            name, path = os.path.basename(item), item
        rows.append(score(path, truth, regions, args.outdir, args.region, name,
                          args.raw_stops))
    if not rows:
        raise SystemExit("fly_baselines: nothing to score (--no-baselines without --pred)")
    cmd = "python benchmarks/fly_baselines.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    head = (f"Fly {args.region} region {CHROM}:{lo:,}-{hi:,} (0-based half-open; "
            f"{rows[0]['bp']:,} bp scored), {n_truth} truth transcripts wholly inside "
            f"({rows[0]['genes']['truth_loci']} loci). Stop codons: "
            + ("not normalised (--raw-stops)" if args.raw_stops else
               "normalised from the sequence on both sides, at every level")
            + f". {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
            f"commit {gm.commit()}, {gm.machine()}. Command: `{cmd.strip()}`.")
    summary = seed_summary(rows)
    text = "\n".join([head, "", table(rows), ""] + ([summary, ""] if summary else [])
                     + [f"- {n}" for n in notes])
    print(text)
    if args.record:
        gm.append_results(f"\n## Fly baselines, {args.region} region (benchmarks/"
                          f"fly_baselines.py)\n{text}\n")


if __name__ == "__main__":
    main()
