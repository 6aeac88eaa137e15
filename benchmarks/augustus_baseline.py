"""AUGUSTUS (ab initio, shipped yeast parameters) on the demo's test chromosome.

    python benchmarks/augustus_baseline.py [--fasta data/yeast/chrI.fa]
                                           [--species saccharomyces_cerevisiae_S288C]
                                           [--outdir results/augustus] [--no-record]

Needs the `augustus` binary (Debian: `apt-get install -y augustus`, AUGUSTUS 3.5); when it
is missing the script says so and exits with status 3 (a benchmark, not a test).

Runs `augustus --species=SPECIES --gff3=on FASTA > OUTDIR/chrI.augustus.gff3` (timed,
wall clock), turns its CDS features into the intergenic / CDS+ / CDS- labels of
configs/demo.yaml (introns and everything else intergenic) as a BED9 over the whole
chromosome, and scores it like `semiseg evaluate --scheme configs/demo.yaml` at boundary
tolerance 0 and 20 bp, plus the gene-level numbers of gene_metrics.py (predicted gene
models from the AUGUSTUS transcripts). Prints a table and appends it to
benchmarks/RESULTS.md (--no-record: do not).

Stop codons: the shipped yeast parameter file sets stopCodonExcludedFromCDS=true, so
AUGUSTUS writes each stop codon as a stop_codon row next to (not inside) the CDS rows,
while the SGD truth's CDS rows include the stop codon. The stop_codon rows are therefore
labelled CDS too (the same as running with --stopCodonExcludedFromCDS=false); labelling
CDS rows alone would put a 3-bp intergenic run at the end of every gene.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gene_metrics as gm

SPECIES = "saccharomyces_cerevisiae_S288C"
NOT_INSTALLED = 3


class AugustusMissing(RuntimeError):
    pass


def augustus_version(binary: str = "augustus") -> str:
    """"AUGUSTUS 3.5.0" from `augustus --version` (plus the Debian package version)."""
    r = subprocess.run([binary, "--version"], check=False, capture_output=True, text=True)
    m = re.search(r"AUGUSTUS \(([^)]+)\)", r.stdout + r.stderr)
    version = f"AUGUSTUS {m.group(1)}" if m else "AUGUSTUS (version unknown)"
    if shutil.which("dpkg-query"):
        d = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "augustus"],
                           check=False, capture_output=True, text=True)
        if d.returncode == 0 and d.stdout.strip():
            version += f" (Debian package {d.stdout.strip()})"
    return version


def run(fasta: str, outdir: str, species: str = SPECIES, binary: str = "augustus",
        gff: str | None = None) -> dict:
    """Run AUGUSTUS (unless `gff`, an existing output, is given), write the label BED.

    Returns {gff, bed, genes, seconds, version, command, seqs, clash}. Raises
    AugustusMissing when the binary is not on PATH.
    """
    seqs = gm.read_fasta(fasta)
    os.makedirs(outdir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(fasta))[0]
    seconds = None
    version = None
    command = None
    if gff is None:
        exe = shutil.which(binary)
        if exe is None:
            raise AugustusMissing(
                f"augustus is not installed ({binary!r} is not on PATH): this benchmark "
                "needs it; on Debian/Ubuntu: apt-get install -y augustus")
        version = augustus_version(exe)
        gff = os.path.join(outdir, f"{stem}.augustus.gff3")
        args = [exe, f"--species={species}", "--gff3=on", os.path.abspath(fasta)]
        command = (f"augustus --species={species} --gff3=on {os.path.relpath(fasta, gm.ROOT)}"
                   f" > {os.path.relpath(gff, gm.ROOT)}")
        tmp = gff + ".tmp"
        t0 = time.perf_counter()
        with open(tmp, "w") as out:
            r = subprocess.run(args, check=False, stdout=out, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError(f"augustus failed (exit {r.returncode}): {r.stderr.strip()}")
        os.replace(tmp, gff)
    genes = gm.read_gff_genes(gff, seqs, types=("CDS", "stop_codon"))  # see the docstring
    arrays, clash = gm.label_arrays(genes, {c: len(s) for c, s in seqs.items()})
    bed = os.path.join(outdir, f"{stem}.augustus.bed")
    gm.write_label_bed(bed, arrays, f"AUGUSTUS {species} ({os.path.basename(gff)})")
    return {"gff": gff, "bed": bed, "genes": genes, "seconds": seconds, "version": version,
            "command": command, "seqs": seqs, "clash": clash}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="AUGUSTUS baseline on yeast chrI.")
    ap.add_argument("--fasta", default=gm.CHRI, help="FASTA (default: yeast chrI)")
    ap.add_argument("--species", default=SPECIES)
    ap.add_argument("--outdir", default=os.path.join(gm.RESULTS_DIR, "augustus"))
    ap.add_argument("--augustus", default="augustus", help="the augustus binary")
    ap.add_argument("--gff", help="score this existing AUGUSTUS GFF3 instead of running it")
    ap.add_argument("--truth", default=gm.TRUTH, help="truth GFF3 for the evaluation")
    ap.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = ap.parse_args(argv)
    try:
        res = run(args.fasta, args.outdir, args.species, args.augustus, args.gff)
    except AugustusMissing as err:
        print(f"augustus_baseline: {err}", file=sys.stderr)
        sys.exit(NOT_INSTALLED)
    n_bp = sum(g.length for g in res["genes"])
    took = "" if res["seconds"] is None else f" in {res['seconds']:.1f} s"
    print(f"{res['version'] or 'AUGUSTUS (existing output)'}: {len(res['genes'])} transcripts "
          f"({n_bp:,} bp CDS incl. stop codons){took} -> {res['gff']}, {res['bed']}")
    name = "AUGUSTUS"
    row = gm.score_method(name, res["bed"], res["genes"], res["seqs"], args.outdir,
                          seconds=res["seconds"], truth=args.truth)
    runs = gm.gene_metrics(gm.read_gff_genes(args.truth, res["seqs"]),
                           gm.genes_from_bed(res["bed"]), res["seqs"])
    table = gm.combined_table([row])
    labels = gm.label_table(row)
    genes = gm.gene_table({name: row["genes"], f"{name} (genes = BED runs)": runs})
    print(table, labels, genes, sep="\n\n")
    if args.no_record:
        return
    cmd = " ".join(["python benchmarks/augustus_baseline.py"]
                   + (argv if argv is not None else sys.argv[1:]))
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    ran = (f"it ran `{res['command']}` ({res['version']}; runtime = its wall clock, one run)"
           if res["command"] else f"it scored the existing {res['gff']}")
    gm.append_results(
        f"\n## AUGUSTUS baseline (benchmarks/augustus_baseline.py) - {date}, commit "
        f"{gm.commit()}\nCPU: {gm.machine()}. Command: `{cmd}`; {ran}. CDS and stop_codon "
        f"rows (the yeast parameters exclude the stop codon from CDS; SGD includes it) -> "
        f"CDS+/CDS-, the rest (introns included) intergenic; {len(res['genes'])} "
        f"transcripts, {n_bp:,} bp; {res['clash']} bp where strands overlap. Scored as "
        f"`{gm.eval_command(res['bed'], 0, row['eval_prefix'] + '.tol0')}` (and "
        f"--tolerance 20).\n\n{table}\n\n{labels}\n\n{genes}\n\n{gm.GENE_NOTE}\n")


if __name__ == "__main__":
    main()
