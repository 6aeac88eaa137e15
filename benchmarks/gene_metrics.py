"""Shared helpers of the gene-finding baselines: FASTA, gene models, label BEDs, scores.

A gene model here is the coding part of one gene (or transcript): its CDS intervals,
0-based half-open, sorted, on one strand, stop codon included (as in the SGD GFF3).
Labels are those of configs/demo.yaml: intergenic / CDS+ / CDS- (introns and everything
non-coding count as intergenic).

Used by benchmarks/orf_finder.py, augustus_baseline.py and gene_baselines.py:

- `read_fasta`, `revcomp`: sequences (plain FASTA, read whole);
- `read_gff_genes`: gene models from a GFF3 (CDS rows grouped by Parent), for the truth
  and for gene finders that write GFF3;
- `genes_from_bed`: gene models from a label BED (each maximal run of CDS+ or CDS- is
  one single-exon model: what a segmentation such as semiseg's says);
- `write_label_bed`: a BED9 of intergenic / CDS+ / CDS- covering each chromosome end to
  end, in the layout of semiseg's own PREFIX.bed (semiseg/genome/write.py);
- `gene_metrics`: the gene-level picture (start/stop codons exactly right, codon checks);
- `evaluate_bed`: `semiseg evaluate` on a BED (the same functions the CLI calls);
- `machine`, `commit`: for the RESULTS.md headers.

    python benchmarks/gene_metrics.py --pred results/x.bed [--gff-pred results/x.gff3]

prints the gene-level numbers of one prediction on chrI.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
from semiseg.evaluate.genelevel import GeneModel, merge

YEAST = os.path.join(ROOT, "data", "yeast")
CHRI = os.path.join(YEAST, "chrI.fa")
TRUTH = os.path.join(YEAST, "yeast_chrI_chrII.gff3")
SCHEME = os.path.join(ROOT, "configs", "demo.yaml")
RESULTS_DIR = os.path.join(ROOT, "results")
RESULTS_MD = os.path.join(ROOT, "benchmarks", "RESULTS.md")

STOPS = ("TAA", "TAG", "TGA")
LABELS = ("intergenic", "CDS+", "CDS-", "intron+", "intron-")  # codes 0..4 of label arrays
STRAND_LABEL = {"+": "CDS+", "-": "CDS-"}
LABEL_STRAND = {"CDS+": "+", "CDS-": "-"}
# colours and strands as in configs/demo.yaml, so the BED looks like semiseg's
COLORS = {"intergenic": (200, 200, 200), "CDS+": (0, 90, 200), "CDS-": (200, 40, 40),
          "intron+": (130, 180, 240), "intron-": (240, 150, 150)}
BED_STRAND = {"intergenic": ".", "CDS+": "+", "CDS-": "-", "intron+": "+", "intron-": "-"}

_COMP = str.maketrans("ACGTNRYKMSWBDHVacgtnrykmswbdhv", "TGCANYRMKSWVHDBtgcanyrmkswvhdb")


def revcomp(seq: str) -> str:
    """Reverse complement (IUPAC codes complemented, case kept)."""
    return seq.translate(_COMP)[::-1]


def read_fasta(path: str) -> dict[str, str]:
    """{name: sequence} of a plain FASTA (name = first word of the header), file order."""
    out: dict[str, list[str]] = {}
    name = None
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            if line.startswith(">"):
                name = line[1:].split()[0]
                if name in out:
                    raise ValueError(f"{path}: sequence {name} appears twice")
                out[name] = []
            elif name is None:
                raise ValueError(f"{path}: sequence before the first '>' header")
            else:
                out[name].append(line)
    if not out:
        raise ValueError(f"{path}: no sequences")
    return {k: "".join(v) for k, v in out.items()}


# --------------------------------------------------------------------------- gene models
class Gene(GeneModel):
    """The coding part of one gene: CDS intervals [start, end), sorted, one strand
    (semiseg.genelevel.GeneModel's fields, start, end and key, plus what the baselines use)."""

    @property
    def five_prime(self) -> int:
        """Genomic coordinate of the 5' end (first base of the start codon on +, the end
        coordinate on -)."""
        return self.start if self.strand == "+" else self.end

    @property
    def three_prime(self) -> int:
        """Genomic coordinate of the 3' end (end of the stop codon on +, start on -)."""
        return self.end if self.strand == "+" else self.start

    @property
    def length(self) -> int:
        return sum(e - s for s, e in self.cds)

    def coding_sequence(self, seq: str) -> str:
        """The spliced CDS, 5' to 3' on the gene's strand (upper case)."""
        s = "".join(seq[a:b] for a, b in self.cds).upper()
        return revcomp(s) if self.strand == "-" else s


def _attrs(text: str) -> dict[str, str]:
    out = {}
    for part in text.strip().split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = unquote(v.strip())
    return out


def read_gff_genes(path: str, chroms: Iterable[str] | None = None,
                   types: Sequence[str] = ("CDS", "stop_codon")) -> list[Gene]:
    """Gene models from a GFF3: rows of `types` grouped by Parent (each one, if several),
    overlapping or touching rows merged.

    SGD hangs CDS rows directly under the gene; AUGUSTUS under the transcript (g1.t1).
    stop_codon rows count as coding by default, as in semiseg's gene_structure scheme
    (cds_types: CDS, stop_codon): a stop codon that a file keeps out of its CDS rows
    (AUGUSTUS with the yeast parameters) joins them; one inside a CDS changes nothing.
    """
    keep = None if chroms is None else set(chroms)
    groups: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    n = 0
    with open(path) as fh:
        for line in fh:
            if line.startswith("##FASTA"):
                break
            if line.startswith("#") or not line.strip():
                continue
            f = line.rstrip("\n\r").split("\t")
            if len(f) != 9 or f[2] not in types:
                continue
            if keep is not None and f[0] not in keep:
                continue
            n += 1
            parents = _attrs(f[8]).get("Parent") or f"{f[2]}@{n}"
            for p in parents.split(","):
                groups.setdefault((f[0], p), []).append((int(f[3]) - 1, int(f[4]), f[6]))
    genes = []
    for (chrom, gid), rows in groups.items():
        strands = {r[2] for r in rows}
        if len(strands) != 1 or strands & {".", "?"}:
            raise ValueError(f"{path}: parts of {gid} have strands {sorted(strands)}")
        genes.append(Gene(gid, chrom, rows[0][2], merge((s, e) for s, e, _ in rows)))
    genes.sort(key=lambda g: (g.chrom, g.start, g.end, g.strand))
    return genes


def read_label_bed(path: str) -> dict[str, list[tuple[int, int, str]]]:
    """{chrom: [(start, end, label), ...]} sorted, from a BED whose name column is the label."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    with open(path) as fh:
        for line in fh:
            if line.startswith(("#", "track", "browser")) or not line.strip():
                continue
            f = line.rstrip("\n\r").split("\t")
            out.setdefault(f[0], []).append((int(f[1]), int(f[2]), f[3]))
    for rows in out.values():
        rows.sort()
    return out


def genes_from_bed(path: str) -> list[Gene]:
    """Each maximal run of CDS+ (or CDS-) positions is one single-exon gene model."""
    genes = []
    for chrom, rows in read_label_bed(path).items():
        cur = None  # [start, end, label]
        for s, e, lab in rows + [(None, None, None)]:
            if cur is not None and (lab != cur[2] or s != cur[1]):
                genes.append(Gene(f"{chrom}:{cur[0]}-{cur[1]}{LABEL_STRAND[cur[2]]}", chrom,
                                  LABEL_STRAND[cur[2]], ((cur[0], cur[1]),)))
                cur = None
            if lab in LABEL_STRAND:
                if cur is None:
                    cur = [s, e, lab]
                else:
                    cur[1] = e
    genes.sort(key=lambda g: (g.chrom, g.start, g.end, g.strand))
    return genes


# --------------------------------------------------------------------------- label BED
def label_arrays(genes: Iterable[Gene], sizes: Mapping[str, int],
                 priority: str = "+") -> tuple[dict[str, np.ndarray], int]:
    """Per chromosome, int8 labels (0 intergenic, 1 CDS+, 2 CDS-) painted from the CDS.

    Where CDS of the two strands overlap, the `priority` strand wins (the demo scheme's
    order puts CDS+ first, as the truth does). Returns the arrays and the number of bp
    where strands collided.
    """
    arrs = {c: np.zeros(n, np.int8) for c, n in sizes.items()}
    plus = {c: np.zeros(n, bool) for c, n in sizes.items()}
    minus = {c: np.zeros(n, bool) for c, n in sizes.items()}
    for g in genes:
        if g.chrom not in arrs:
            continue
        target = plus if g.strand == "+" else minus
        for s, e in g.cds:
            target[g.chrom][s:e] = True
    clash = 0
    for c, arr in arrs.items():
        clash += int((plus[c] & minus[c]).sum())
        if priority == "+":
            arr[minus[c]] = 2
            arr[plus[c]] = 1
        else:
            arr[plus[c]] = 1
            arr[minus[c]] = 2
    return arrs, clash


def write_label_bed(path: str, arrays: Mapping[str, np.ndarray], source: str) -> None:
    """BED9 of runs of equal labels, every chromosome end to end (semiseg's layout:
    chrom start end label score strand thickStart thickEnd itemRgb; score 0 = no
    posterior). Written to a temporary name and renamed."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(f"# {source} scheme=cds resolution=1\n")
        for chrom, arr in arrays.items():
            change = np.flatnonzero(arr[1:] != arr[:-1]) + 1
            starts = np.concatenate([[0], change]).tolist()
            ends = np.concatenate([change, [len(arr)]]).tolist()
            for s, e in zip(starts, ends):
                lab = LABELS[int(arr[s])]
                r, g, b = COLORS[lab]
                fh.write(f"{chrom}\t{s}\t{e}\t{lab}\t0\t{BED_STRAND[lab]}\t{s}\t{e}\t{r},{g},{b}\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- metrics
def gene_metrics(truth: Sequence[Gene], pred: Sequence[Gene],
                 seqs: Mapping[str, str]) -> dict:
    """Gene-level numbers of a prediction, on the chromosomes of `seqs`.

    Truth side (`truth` genes, e.g. SGD CDS grouped by gene): the fraction whose start
    codon (5' end, strand-aware) is the 5' end of a predicted gene on the same strand
    (`start_exact`), whose stop codon is a predicted 3' end (`stop_exact`), whose start
    and stop are those of one predicted gene (`both_exact`), and whose CDS intervals are
    exactly those of a predicted gene (`structure_exact`).
    Prediction side: the fraction of predicted genes whose CDS length is a multiple of 3,
    that start with ATG, end with a stop codon (TAA, TAG, TGA; on the sequence, on the
    gene's strand), all three (`valid_orf`), and whose start and stop are those of one
    truth gene (`pred_both_exact`: a precision for `both_exact`).
    """
    truth = [g for g in truth if g.chrom in seqs]
    pred = [g for g in pred if g.chrom in seqs]

    def key5(g):
        return (g.chrom, g.strand, g.five_prime)

    def key3(g):
        return (g.chrom, g.strand, g.three_prime)

    p5 = {key5(g) for g in pred}
    p3 = {key3(g) for g in pred}
    p53 = {(key5(g), g.three_prime) for g in pred}
    pstruct = {(g.chrom, g.strand, g.cds) for g in pred}
    t53 = {(key5(g), g.three_prime) for g in truth}
    n_t, n_p = len(truth), len(pred)

    def frac(k, n):
        return k / n if n else float("nan")

    out = {
        "truth_genes": n_t,
        "truth_multi_exon": sum(len(g.cds) > 1 for g in truth),
        "pred_genes": n_p,
        "pred_multi_exon": sum(len(g.cds) > 1 for g in pred),
        "start_exact": frac(sum(key5(g) in p5 for g in truth), n_t),
        "stop_exact": frac(sum(key3(g) in p3 for g in truth), n_t),
        "both_exact": frac(sum((key5(g), g.three_prime) in p53 for g in truth), n_t),
        "structure_exact": frac(sum((g.chrom, g.strand, g.cds) in pstruct for g in truth), n_t),
        "pred_both_exact": frac(sum((key5(g), g.three_prime) in t53 for g in pred), n_p),
    }
    mult3 = atg = stop = valid = 0
    for g in pred:
        cs = g.coding_sequence(seqs[g.chrom])
        a, b, c = len(cs) % 3 == 0, cs[:3] == "ATG", cs[-3:] in STOPS
        mult3 += a
        atg += b
        stop += c
        valid += a and b and c
    out.update({"pred_len_mult3": frac(mult3, n_p), "pred_starts_atg": frac(atg, n_p),
                "pred_ends_stop": frac(stop, n_p), "pred_valid_orf": frac(valid, n_p)})
    return out


GENE_COLUMNS = [("truth_genes", "truth genes"), ("pred_genes", "pred genes"),
                ("start_exact", "start exact"), ("stop_exact", "stop exact"),
                ("both_exact", "start+stop exact"), ("structure_exact", "all CDS exact"),
                ("pred_both_exact", "pred start+stop in truth"),
                ("pred_len_mult3", "pred len %3=0"), ("pred_starts_atg", "pred ATG"),
                ("pred_ends_stop", "pred stop"), ("pred_valid_orf", "pred all three")]


def fmt(v, digits: int = 3) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def gene_table(results: Mapping[str, dict]) -> str:
    """Markdown table of `gene_metrics` results, one row per method."""
    return markdown(["method"] + [h for _, h in GENE_COLUMNS],
                    [[name] + [m[k] for k, _ in GENE_COLUMNS] for name, m in results.items()])


# --------------------------------------------------------------------------- evaluation
def evaluate_bed(pred: str, tolerance: int, out: str | None = None, truth: str = TRUTH,
                 scheme: str = SCHEME) -> dict:
    """What `semiseg evaluate --pred PRED --truth TRUTH --scheme SCHEME --tolerance T
    --out OUT` computes (the same functions), returned as its result dict."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from semiseg.evaluate.intervals import load_scheme_arg
    from semiseg.evaluate.run import evaluate, write_report

    result = evaluate(pred, truth, scheme=load_scheme_arg(scheme), tolerance=tolerance)
    if out:
        write_report(result, out)
    return result


def eval_command(pred: str, tolerance: int, out: str) -> str:
    rel = os.path.relpath
    return (f"semiseg evaluate --pred {rel(pred, ROOT)} --truth {rel(TRUTH, ROOT)} "
            f"--scheme {rel(SCHEME, ROOT)} --tolerance {tolerance} --out {rel(out, ROOT)}")


GENE_NOTE = (
    "Gene level (benchmarks/gene_metrics.py): truth genes = SGD CDS rows grouped by gene "
    "(Parent) on the chromosome, stop codon included; start/stop exact = the gene's "
    "start (stop) codon is the 5' (3') end of a predicted gene on the same strand; "
    "start+stop exact = both on one predicted gene; all CDS exact = every CDS interval "
    "identical; pred start+stop in truth = predicted genes whose start and stop are those "
    "of one truth gene; len %3=0 / ATG / stop = predicted genes whose spliced CDS length is "
    "a multiple of 3, that begin with ATG, end with TAA/TAG/TGA (read on the sequence, on "
    "the gene's strand). Predicted genes come from the gene finder's own GFF3 where it "
    "writes one (AUGUSTUS), else one per maximal CDS+ or CDS- run of the BED.")

COMBINED = [("macro_f1", "macro F1"), ("segment_exact", "exact segment F1"),
            ("boundary_0", "exact boundary F1"), ("boundary_20", "boundary F1 +-20 bp"),
            ("segment_50", "segment F1 >=50% overlap"), ("start_exact", "gene start exact"),
            ("stop_exact", "stop exact"), ("both_exact", "start+stop exact"),
            ("runtime", "runtime")]


def slug(name: str) -> str:
    """A file name from a method name: "ORF finder, longest per stop" ->
    ORF_finder_longest_per_stop."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", name).strip("_") or "method"


THREE = ("intergenic", "CDS+", "CDS-")


def three(result: dict) -> dict:
    """The macro of `semiseg evaluate`'s rows for intergenic, CDS+ and CDS- only (the
    issue's columns; the demo scheme's intron labels have their own rows in the reports,
    and a method without introns would score 0 on them)."""
    rows = [r for r in result["labels"] if r["label"] in THREE]
    return {k: float(np.mean([r[k] for r in rows])) for k in
            ("precision", "recall", "f1", "segment_f1_exact", "boundary_f1",
             "segment_f1_overlap50")}


def score_method(name: str, bed: str, genes: Sequence[Gene] | None, seqs: Mapping[str, str],
                 outdir: str, seconds: float | None = None, truth: str = TRUTH,
                 scheme: str = SCHEME) -> dict:
    """One row of the combined table: `semiseg evaluate` at tolerance 0 and 20 (reports
    written to OUTDIR/SLUG.eval.tol0.{tsv,json} and .tol20) and the gene-level numbers
    (`genes` None: one gene per CDS run of the BED). `seqs`: the sequences of the BED's
    chromosomes, for the codon checks."""
    base = os.path.join(outdir, slug(name))
    r0 = evaluate_bed(bed, 0, f"{base}.eval.tol0", truth, scheme)
    r20 = evaluate_bed(bed, 20, f"{base}.eval.tol20", truth, scheme)
    chroms = list(r0["chromosomes"])
    missing = [c for c in chroms if c not in seqs]
    if missing:
        raise ValueError(f"{bed}: no sequence given for {', '.join(missing)}")
    seqs = {c: seqs[c] for c in chroms}
    pred = genes_from_bed(bed) if genes is None else genes
    gmet = gene_metrics(read_gff_genes(truth, seqs), pred, seqs)
    m0, m20 = three(r0), three(r20)
    return {"method": name, "bed": bed, "macro_f1": m0["f1"],
            "segment_exact": m0["segment_f1_exact"], "boundary_0": m0["boundary_f1"],
            "boundary_20": m20["boundary_f1"], "segment_50": m0["segment_f1_overlap50"],
            "start_exact": gmet["start_exact"], "stop_exact": gmet["stop_exact"],
            "both_exact": gmet["both_exact"], "runtime": seconds, "genes": gmet,
            "eval_0": r0, "eval_20": r20, "eval_prefix": base + ".eval"}


def _runtime(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.2f} s" if s < 100 else f"{s / 60:.1f} min"


def combined_table(rows: Sequence[dict]) -> str:
    """Markdown: one row per `score_method` result."""
    body = []
    for r in rows:
        body.append([r["method"]] + [_runtime(r[k]) if k == "runtime" else r[k]
                                     for k, _ in COMBINED])
    return markdown(["method"] + [h for _, h in COMBINED], body)


def label_table(row: dict) -> str:
    """Markdown: per-label scores of one method (tolerance 0 and 20 boundary F1)."""
    r0, r20 = row["eval_0"], row["eval_20"]
    body = []
    for a, b in zip(r0["labels"], r20["labels"]):
        body.append([a["label"], a["bp_truth"], a["bp_pred"], a["precision"], a["recall"],
                     a["f1"], a["segments_truth"], a["segments_pred"], a["segment_f1_exact"],
                     a["segment_f1_overlap50"], a["boundary_f1"], b["boundary_f1"]])
    m0, m20 = three(r0), three(r20)
    body.append(["macro", "", "", m0["precision"], m0["recall"], m0["f1"], "", "",
                 m0["segment_f1_exact"], m0["segment_f1_overlap50"], m0["boundary_f1"],
                 m20["boundary_f1"]])
    return markdown(["label", "bp truth", "bp pred", "precision", "recall", "F1",
                     "segments truth", "segments pred", "segment F1 exact",
                     "segment F1 >=50%", "boundary F1 exact", "boundary F1 +-20"], body)


def commit() -> str:
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                       check=False, capture_output=True, text=True)
    # RESULTS.md itself is left out: these scripts append to it
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                            "--", ".", ":!benchmarks/RESULTS.md"],
                           check=False, capture_output=True, text=True).stdout.strip()
    return (r.stdout.strip() or "unknown") + (" (uncommitted changes)" if dirty else "")


def machine() -> str:
    name = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import platform

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{name or platform.processor() or platform.machine()} ({os.cpu_count()} cores "
            f"visible, load average {load:.1f} at the start)")


def append_results(text: str) -> None:
    with open(RESULTS_MD, "a") as fh:
        fh.write(text if text.startswith("\n") else "\n" + text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pred", required=True, help="label BED (name = intergenic/CDS+/CDS-)")
    ap.add_argument("--gff-pred", help="take the predicted gene models from this GFF3 "
                                       "(CDS rows by Parent) instead of the BED runs")
    ap.add_argument("--fasta", default=CHRI)
    ap.add_argument("--truth", default=TRUTH)
    args = ap.parse_args(argv)
    seqs = read_fasta(args.fasta)
    truth = read_gff_genes(args.truth, seqs)
    pred = (read_gff_genes(args.gff_pred, seqs) if args.gff_pred
            else genes_from_bed(args.pred))
    print(gene_table({os.path.basename(args.pred): gene_metrics(truth, pred, seqs)}))


if __name__ == "__main__":
    main()
