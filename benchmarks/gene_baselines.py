"""Gene-finding baselines on the demo's test chromosome (yeast chrI), one combined table.

    python benchmarks/gene_baselines.py [--extra NAME=path.bed ...]
                                        [--extra-genes NAME=path.gff3 ...]
                                        [--no-augustus] [--outdir results/gene_baselines]
                                        [--no-record]

Methods, each turned into an intergenic / CDS+ / CDS- BED over chrI (configs/demo.yaml
labels) and scored the same way:
- "intergenic everywhere": one intergenic segment over the chromosome;
- the naive ORF finder (benchmarks/orf_finder.py): every ATG..stop ORF >= 100 codons,
  longest first, no overlaps; and its variant with only the longest ORF per stop codon;
- AUGUSTUS 3.5 with the shipped S288C parameters (benchmarks/augustus_baseline.py);
  skipped with a note when the augustus binary is missing (or with --no-augustus);
- every `--extra NAME=path.bed`: any label BED whose name column is intergenic / CDS+ /
  CDS- (semiseg's own PREFIX.bed with the demo scheme is one), covering chrI; its gene
  models are its CDS+/CDS- runs unless `--extra-genes NAME=path.gff3` gives a GFF3 whose
  CDS (and stop_codon) rows, grouped by Parent, are the gene models.

Scores: `semiseg evaluate --scheme configs/demo.yaml` against the SGD GFF3 at boundary
tolerance 0 (macro F1, exact segment F1, exact boundary F1, segment F1 >= 50% overlap)
and 20 bp (boundary F1 +-20), and the gene-level numbers of gene_metrics.py. Prints the
combined table and the gene table and appends both to benchmarks/RESULTS.md with the
commit, machine and command (--no-record: do not). Evaluation reports and BEDs go to
--outdir (default results/gene_baselines, git-ignored).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import augustus_baseline
import gene_metrics as gm
import orf_finder


def _pairs(values: list[str], flag: str, ap: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            ap.error(f"{flag} takes NAME=PATH, got {v!r}")
        if not os.path.isfile(path):
            ap.error(f"{flag} {name}: file not found: {path}")
        if name in out:
            ap.error(f"{flag}: {name} given twice")
        out[name] = path
    return out


def intergenic_bed(seqs: dict[str, str], path: str) -> float:
    t0 = time.perf_counter()
    gm.write_label_bed(path, {c: np.zeros(len(s), np.int8) for c, s in seqs.items()},
                       "intergenic everywhere")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Gene-finding baselines on yeast chrI.")
    ap.add_argument("--fasta", default=gm.CHRI, help="FASTA of the chromosome(s) scored "
                                                     "(default: yeast chrI, the test chromosome)")
    ap.add_argument("--truth", default=gm.TRUTH, help="truth GFF3 (default: SGD yeast)")
    ap.add_argument("--extra", action="append", metavar="NAME=PATH.bed",
                    help="another method's label BED (repeatable)")
    ap.add_argument("--extra-genes", action="append", metavar="NAME=PATH.gff3",
                    help="gene models of an --extra method (CDS rows by Parent)")
    ap.add_argument("--no-augustus", action="store_true", help="leave AUGUSTUS out")
    ap.add_argument("--min-codons", type=int, default=100, help="ORF finder minimum")
    ap.add_argument("--outdir", default=os.path.join(gm.RESULTS_DIR, "gene_baselines"))
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = ap.parse_args(argv)
    extra = _pairs(args.extra, "--extra", ap)
    extra_genes = _pairs(args.extra_genes, "--extra-genes", ap)
    for name in extra_genes:
        if name not in extra:
            ap.error(f"--extra-genes {name}: no --extra {name}=PATH.bed")
    os.makedirs(args.outdir, exist_ok=True)
    seqs = gm.read_fasta(args.fasta)
    notes = []
    rows = []
    gene_rows = {}

    def add(name, bed, genes, seconds):
        print(f"scoring {name} ...", file=sys.stderr)
        row = gm.score_method(name, bed, genes, seqs, args.outdir, seconds, truth=args.truth)
        rows.append(row)
        gene_rows[name] = row["genes"]
        return row

    bed = os.path.join(args.outdir, "intergenic.bed")
    add("intergenic everywhere", bed, [], intergenic_bed(seqs, bed))
    for longest, name in ((False, "ORF finder"), (True, "ORF finder, longest per stop")):
        out = os.path.join(args.outdir, gm.slug(name) + ".bed")
        res = orf_finder.run(args.fasta, out, args.min_codons, longest_per_stop=longest)
        add(name, out, res["genes"], res["seconds"])
        notes.append(f"{name}: {res['candidates']:,} candidates, {len(res['genes'])} kept.")
    if args.no_augustus:
        notes.append("AUGUSTUS: left out (--no-augustus).")
    else:
        try:
            res = augustus_baseline.run(args.fasta, args.outdir)
        except augustus_baseline.AugustusMissing as err:
            print(f"gene_baselines: {err}; AUGUSTUS left out", file=sys.stderr)
            notes.append("AUGUSTUS: not installed, left out.")
        else:
            add("AUGUSTUS", res["bed"], res["genes"], res["seconds"])
            gene_rows["AUGUSTUS (genes = BED runs)"] = gm.gene_metrics(
                gm.read_gff_genes(args.truth, seqs), gm.genes_from_bed(res["bed"]), seqs)
            notes.append(f"AUGUSTUS: {res['version']}, `{res['command']}`, "
                         f"{len(res['genes'])} transcripts; CDS + stop_codon rows -> CDS "
                         "(the yeast parameters keep the stop codon out of CDS, SGD "
                         "includes it); runtime = its wall clock.")
    for name, path in extra.items():
        genes = (gm.read_gff_genes(extra_genes[name], seqs) if name in extra_genes else None)
        add(name, path, genes, None)
        notes.append(f"{name}: {path}" + (f", gene models from {extra_genes[name]}"
                                          if name in extra_genes else "") + ".")

    table = gm.combined_table(rows)
    genes = gm.gene_table(gene_rows)
    print(table, genes, sep="\n\n")
    if args.no_record:
        return
    chroms = ", ".join(f"{c} ({len(s):,} bp)" for c, s in seqs.items())
    cmd = " ".join(["python benchmarks/gene_baselines.py"]
                   + (argv if argv is not None else sys.argv[1:]))
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    ex = rows[0]["eval_prefix"]
    gm.append_results(
        f"\n## gene-finding baselines (benchmarks/gene_baselines.py) - {date}, commit "
        f"{gm.commit()}\nCPU: {gm.machine()}. Command: `{cmd}`. Scored on {chroms} against "
        f"the SGD GFF3 with the demo labels (intergenic / CDS+ / CDS-), as "
        f"`{gm.eval_command(rows[0]['bed'], 0, ex + '.tol0')}` for each method's BED: "
        f"macro F1, exact segment F1, exact boundary F1 and segment F1 >= 50% overlap at "
        f"tolerance 0, boundary F1 at tolerance 20 (macro = mean over the 3 labels). "
        f"Runtime: one run each. {' '.join(notes)}\n\n{table}\n\n{genes}\n\n"
        f"{gm.GENE_NOTE}\n")


if __name__ == "__main__":
    main()
