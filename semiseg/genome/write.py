"""Segmentations and posteriors -> BED9, browser BED, GFF3, bigWig, bedGraph.

Everything is written to temporary names next to the outputs and renamed only when
the whole output is complete, so a failed run leaves no partial files.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import SemisegError
from ._util import deferred_signals, paint, tmp_name
from .codes import genetic_code as genetic_code_table
from .diskspace import SpaceGuard
from .escapes import _esc, check_bed_names, gff3_seqid
from .geneseq import fasta_record, gene_seq
from .labels import GAP, LabelScheme, _resolve
from .signals import SignalWriter
from .zooms import ZoomBins

FORMATS = ("bed", "gff3", "bigwig", "bedgraph")
GAP_COLOR = (0, 0, 0)


class OutputWriter(SignalWriter):
    """Writes one segmentation (all chromosomes) to files named from a prefix.

    Args:
        prefix: output prefix, e.g. ``out/sample`` -> ``out/sample.bed`` ...
        scheme: the label scheme (names, colours, strands, roles).
        chrom_sizes: all chromosome sizes of the FASTA, in output order.
        resolution: bp per step of the posteriors.
        formats: any of ``"bed"`` (``.bed`` and ``.browser.bed``), ``"gff3"``,
            ``"bigwig"`` (``.posterior.LABEL.bw`` per label and ``.boundary.bw``),
            ``"bedgraph"`` (the same as ``.bedGraph``).
        version: semiseg version for the headers (annotate passes semiseg.__version__).
        model_hash: model identifier for the headers.
        fasta: a :class:`Fasta`; when given, N runs >= ``gap_min`` bp become ``gap``
            for chromosomes whose ``gaps`` are not passed to :meth:`add`.
        gap_min: minimum N-run length written as ``gap``.
        entropy: also write ``.entropy.bw`` (per-step label entropy) and
            ``.boundary_entropy.bw`` (per-step boundary entropy), given to :meth:`add`.
        signal_precision: round bigWig/bedGraph values to a multiple of this and write
            each run of equal neighbours as one entry (0: every step's float32 value,
            one entry per step). At 1 bp a trained gene model's label posterior tracks
            have 100-650 times fewer runs at 1e-4 than steps (chrI), its boundary and
            entropy tracks 13-50 times fewer.
        genetic_code: NCBI translation table of the proteins (genome/codes.py).
        proteins: also write ``.cds.fa`` and ``.proteins.fa`` (the spliced CDS and the
            protein of each gene of a gene-structure scheme; :meth:`add` then needs
            ``sequence``) and the GFF3 ``start_codon`` / ``stop_codon`` rows.
        stranded_bed: with ``"bed"``, also ``.stranded.bed``: the BED9 rows with every
            unstranded row (intergenic, gap) once per strand, so that every row is + or
            - (pyranges then treats it as stranded; docs/outputs.md).
        provenance: ``{key: value}`` of how the files were made (command line, options,
            inputs and checksums, date): ``# key: value`` lines in the GFF3 header and
            the browser BED after its track line (docs/outputs.md).

    Use as a context manager; call :meth:`add` once per chromosome in ``chrom_sizes``
    order. Files appear only when the block ends without an error.
    """

    def __init__(self, prefix: str | os.PathLike, scheme: LabelScheme,
                 chrom_sizes: Mapping[str, int], resolution: int = 1,
                 formats: Sequence[str] = ("bed", "gff3", "bigwig"), version: str = "unknown",
                 model_hash: str | None = None, fasta=None, gap_min: int = 100,
                 entropy: bool = False, signal_precision: float = 0.0,
                 genetic_code: int = 1, proteins: bool = False,
                 provenance: Mapping | None = None, stranded_bed: bool = False):
        bad = set(formats) - set(FORMATS)
        if bad:
            raise SemisegError(f"unknown output formats {sorted(bad)}; "
                               f"choose from {', '.join(FORMATS)}")
        if resolution < 1:
            raise ValueError("resolution must be >= 1")
        if not (signal_precision >= 0 and np.isfinite(signal_precision)):
            raise SemisegError(f"signal precision must be a finite number >= 0, got "
                               f"{signal_precision}")
        if "bed" in formats or "bedgraph" in formats:
            check_bed_names(chrom_sizes, getattr(fasta, "paths", ["the FASTA"])[0]
                            if fasta is not None else "the FASTA")
        self.prefix = os.fspath(prefix)
        folder = os.path.dirname(os.path.abspath(self.prefix))
        if not os.path.isdir(folder):
            raise SemisegError(f"output folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise SemisegError(f"output folder {folder} is not writable")
        self.scheme = scheme
        self.chrom_sizes = dict(chrom_sizes)
        self.order = {c: i for i, c in enumerate(self.chrom_sizes)}
        self.resolution = int(resolution)
        self.formats = tuple(formats)
        self.version = version
        self.model_hash = model_hash or "none"
        self.fasta = fasta
        self.gap_min = gap_min
        self.entropy = entropy
        self.precision = float(signal_precision)
        self._last = -1
        self._tmp: dict[str, str] = {}  # final path -> temporary path
        self._fh: dict[str, object] = {}
        self._bw: dict[str, object] = {}
        self._zoom: dict[str, ZoomBins] = {}  # bigWig series -> its finest zoom bins
        self._bw_entries = 0  # bigWig entries added so far (_room)
        self._space = SpaceGuard(folder)
        self._regions: list[str] = []
        self._gene_n = 0
        self.code = genetic_code_table(genetic_code)
        self.proteins = bool(proteins) and scheme.kind == "gene_structure"
        # transcripts whose CDS reads a stop codon before its end (with `proteins`): a
        # codon split by an intron can form one, which the gene model does not forbid
        self.internal_stop_genes: list[str] = []
        self.weak_genes = 0  # genes not called for their score (genemodel/genefilter.py)
        self.masked_genes = 0  # ... for their soft-masked CDS (annotate.max_masked_cds)
        self.extra = dict(provenance or {})
        self._score_kinds: set[str] = set()
        self.stranded_bed = stranded_bed
        self._seq: str | None = None
        self._open()

    @property
    def provenance(self) -> str:
        """``semiseg VERSION model=HASH scheme=NAME resolution=R``: what made the files."""
        return (f"semiseg {self.version} model={self.model_hash} "
                f"scheme={self.scheme.name} resolution={self.resolution}")

    def _origin_lines(self) -> str:
        """GFF3 header lines that evaluate, plot and merge read (semiseg/genome/origin.py): the
        label scheme in full (JSON), and what the BED score column holds
        (run_posterior: P(the row is exactly right); mean_label_posterior; none; mixed)."""
        import json

        kinds = sorted(self._score_kinds)
        scores = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "none")
        return (f"# semiseg_scheme: {json.dumps(self.scheme.to_dict(), sort_keys=True)}\n"
                f"# semiseg_scores: {scores}\n")

    def _comment_lines(self) -> str:
        """The provenance given to the writer as ``# key: value`` lines (values one line
        each: nested values as JSON)."""
        import json

        out = []
        for k, v in self.extra.items():
            text = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
            out.append(f"# {k}: {' '.join(str(text).split())}\n")
        return "".join(out)

    # ---------------------------------------------------------------- files
    def _path(self, suffix: str) -> str:
        final = f"{self.prefix}.{suffix}"
        self._tmp[final] = tmp_name(final)
        return self._tmp[final]

    def _open(self) -> None:
        try:
            if "bed" in self.formats:
                # PREFIX.bed is plain BED9 with no header line, so that pyranges, bedtools
                # and IGV read it unchanged; the provenance goes in the browser BED's track
                # line and the GFF3 header (and annotate's PREFIX.summary.tsv)
                self._fh["bed"] = open(self._path("bed"), "w")
                self._fh["browser"] = open(self._path("browser.bed"), "w")
                name = os.path.basename(self.prefix)
                self._fh["browser"].write(
                    f'track name="{name}" description="{self.provenance}" itemRgb="On"\n'
                    + self._comment_lines())
                if self.stranded_bed:  # unstranded rows once per strand: docs/outputs.md
                    self._fh["stranded"] = open(self._path("stranded.bed"), "w")
            if self.proteins:
                self._fh["cds"] = open(self._path("cds.fa"), "w")
                self._fh["proteins"] = open(self._path("proteins.fa"), "w")
            if "gff3" in self.formats:
                self._path("gff3")  # assembled at close from the body
                self._fh["gff3"] = open(tmp_name(f"{self.prefix}.gff3.body"), "w")
            series = [f"posterior.{n}" for n in self.scheme.names] + ["boundary"]
            if self.entropy:
                series += ["entropy", "boundary_entropy"]
            if "bigwig" in self.formats:
                import pyBigWig

                header_bw = list(self.chrom_sizes.items())
                # the header (with the chromosome list) is written at once: room first
                header = 8192 + sum(len(c) + 32 for c in self.chrom_sizes)
                for s in series:
                    self._space.check(header, header * len(self._bw))
                    try:
                        # no signal between the open and the file's entry in _bw (a
                        # bigWig dropped unclosed prints libBigWig's error when freed),
                        # nor inside libBigWig's write of the header
                        with deferred_signals():
                            bw = self._bw[s] = pyBigWig.open(self._path(f"{s}.bw"), "w")
                            bw.addHeader(header_bw, maxZooms=10)
                    except RuntimeError as err:  # libBigWig says no more than this
                        raise OSError(errno.EIO, f"{err} ({s}.bw)") from None
                    self._zoom[s] = ZoomBins(self.chrom_sizes, self.resolution)
            if "bedgraph" in self.formats:
                for s in series:
                    self._fh[f"bg:{s}"] = open(self._path(f"{s}.bedGraph"), "w")
        except OSError as err:
            self.abort()
            raise SemisegError(f"cannot write outputs at {self.prefix}: {err.strerror}") from None
        except BaseException:  # an interrupt while the files open: no with-block to
            self.abort()  # abort them, so here (libBigWig's close of a bigWig cut short
            raise  # would print its own error at exit)

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Close and remove every temporary file; no output appears."""
        for fh in self._fh.values():
            fh.close()
        self._abort_bigwigs()
        self._fh, self._bw = {}, {}
        body = tmp_name(f"{self.prefix}.gff3.body")
        for path in list(self._tmp.values()) + [body]:
            if os.path.exists(path):
                os.remove(path)
        self._tmp = {}

    def close(self) -> None:
        """Finish every file and rename them into place."""
        if not self._tmp:
            return
        try:
            if "gff3" in self.formats:
                body_path = tmp_name(f"{self.prefix}.gff3.body")
                self._fh.pop("gff3").close()
                with open(self._tmp[f"{self.prefix}.gff3"], "w") as out:
                    out.write("##gff-version 3\n")
                    out.writelines(self._regions)
                    out.write(f"# {self.provenance}\n")
                    out.write(self._origin_lines())
                    out.write(self._comment_lines())
                    with open(body_path) as body:
                        out.writelines(body)
                os.remove(body_path)
            for fh in self._fh.values():
                fh.close()
            if self._bw:  # room for libBigWig's close, asked afresh
                self._space.check(0, 4 * self._bw_entries + 8192 * len(self._bw), fresh=True)
            self._finish_bigwigs()
            self._fh, self._bw = {}, {}
        except BaseException:
            self.abort()
            raise
        for final, tmp in self._tmp.items():
            os.replace(tmp, final)
        self._tmp = {}

    # ---------------------------------------------------------------- input checks
    def _check(self, chrom, segments, posteriors, boundary, gaps):
        if chrom not in self.order:
            raise ValueError(f"chromosome {chrom!r} is not in chrom_sizes")
        if self.order[chrom] <= self._last:
            raise ValueError(f"chromosome {chrom!r} added out of chrom_sizes order or twice")
        seg = np.asarray(segments, dtype=np.int64)
        if seg.ndim != 2 or seg.shape[1] != 3 or len(seg) == 0:
            raise ValueError(f"segments must be (S, 3) [start, end, label], got shape {seg.shape}")
        s, e, lab = seg[:, 0], seg[:, 1], seg[:, 2]
        if (e <= s).any():
            raise ValueError("segments must have start < end")
        if (s[1:] != e[:-1]).any():
            raise ValueError("segments must be sorted and contiguous (no gaps or overlaps)")
        if s[0] < 0 or e[-1] > self.chrom_sizes[chrom]:
            raise ValueError(
                f"segments {s[0]}-{e[-1]} run outside {chrom} (0-{self.chrom_sizes[chrom]})")
        if ((lab < -1) | (lab >= len(self.scheme))).any():
            raise ValueError(f"segment labels must be in [-1, {len(self.scheme)})")
        lo, hi = int(s[0]), int(e[-1])
        t = -(-(hi - lo) // self.resolution)
        if posteriors is not None:
            posteriors = np.asarray(posteriors, dtype=np.float32)
            if posteriors.shape != (t, len(self.scheme)):
                raise ValueError(f"posteriors must be ({t}, {len(self.scheme)}) for {chrom}:"
                                 f"{lo}-{hi} at resolution {self.resolution}, "
                                 f"got {posteriors.shape}")
        if boundary is not None:
            boundary = np.asarray(boundary, dtype=np.float32)
            if boundary.shape != (t,):
                raise ValueError(f"boundary must be ({t},), got {boundary.shape}")
        if gaps is None:
            gaps = (self.fasta.n_runs(chrom, self.gap_min) if self.fasta is not None
                    else np.zeros((0, 2), np.int64))
        gaps = np.asarray(gaps, dtype=np.int64).reshape(-1, 2)
        gaps = np.clip(gaps[(gaps[:, 1] > lo) & (gaps[:, 0] < hi)], lo, hi)
        return seg, lo, hi, posteriors, boundary, gaps

    # ---------------------------------------------------------------- add
    def add(self, chrom: str, segments: np.ndarray, posteriors: np.ndarray | None = None,
            boundary: np.ndarray | None = None, gaps: np.ndarray | None = None,
            run_posteriors: np.ndarray | None = None, entropy=None,
            sequence: str | None = None) -> None:
        """Write one chromosome (or one contiguous range of it).

        Args:
            chrom: a chromosome of ``chrom_sizes``, after those already added.
            segments: ``(S, 3) int`` ``[start, end, label]`` bp, sorted and contiguous;
                label -1 is written as ``gap``. Adjacent equal labels are merged.
            posteriors: ``(T, C) float32`` per-step label posteriors from
                ``segments[0, 0]`` at the writer's resolution (score column, bigWig).
            boundary: ``(T,) float32`` boundary posterior per step.
            gaps: ``(R, 2)`` N runs written as ``gap`` (None: from ``fasta`` if given).
            run_posteriors: ``(R, 3) float`` rows ``[start, end, probability]`` (bp): the
                exact probability that the run [start, end) is exactly right. When given,
                an output row equal to one of these runs gets it as its score (BED:
                round(1000 p); GFF3: p, with the mean label posterior in the
                ``mean_posterior`` attribute); other rows (cut by gaps, or NaN) get
                BED score 0 and GFF3 score ".". When None, the score is the mean label
                posterior over the row, as before.
            entropy: ``((T,), (T,))`` label and boundary entropy per step (needs the
                writer's ``entropy=True``).
            sequence: the chromosome's whole sequence (needed with ``proteins``): each
                gene's CDS, protein and start/stop codon rows.
        """
        seg, lo, hi, post, bnd, gaps = self._check(chrom, segments, posteriors, boundary, gaps)
        if self.proteins and sequence is None:
            raise ValueError("the writer writes proteins: add() needs the sequence")
        self._seq = sequence if self.proteins else None
        self._last = self.order[chrom]
        # gaps (label -1) override segments; equal neighbours merge
        n = len(self.scheme)
        rank = dict.fromkeys(range(n), 0) | {-1: 1}
        s, e, lab = _resolve(np.concatenate([seg[:, 0], gaps[:, 0]]),
                             np.concatenate([seg[:, 1], gaps[:, 1]]),
                             np.concatenate([seg[:, 2], np.full(len(gaps), -1)]), rank)
        r = self.resolution
        score = np.zeros(len(s), dtype=np.int64)
        mean = np.full(len(s), np.nan)
        if post is not None:
            # per segment (no (T, C) float64 copy: posteriors may be a whole chromosome)
            j0, j1 = (s - lo) // r, -(-(e - lo) // r)
            ok = lab >= 0
            for i in np.flatnonzero(ok).tolist():
                mean[i] = post[j0[i]:j1[i], lab[i]].mean(dtype=np.float64)
            score = np.where(ok, np.clip(np.rint(1000 * mean), 0, 1000), 0).astype(np.int64)
        exact = None
        # what the BED scores are, for the GFF3 header (evaluate's calibration)
        kind = ("run_posterior" if run_posteriors is not None else
                "mean_label_posterior" if post is not None else "none")
        self._score_kinds.add(kind)
        if run_posteriors is not None:
            rp = np.asarray(run_posteriors, dtype=np.float64).reshape(-1, 3)
            table = {(int(a), int(b)): float(v) for a, b, v in rp.tolist()}
            exact = np.array([table.get((a, b), np.nan) if lb >= 0 else np.nan
                              for a, b, lb in zip(s.tolist(), e.tolist(), lab.tolist())])
            score = np.where(np.isnan(exact), 0,
                             np.clip(np.rint(1000 * np.nan_to_num(exact)), 0, 1000)
                             ).astype(np.int64)
        if "bed" in self.formats:
            self._write_bed(chrom, s, e, lab, score)
        if "gff3" in self.formats:
            self._regions.append(f"##sequence-region {gff3_seqid(chrom)} 1 "
                                 f"{self.chrom_sizes[chrom]}\n")
            self._write_gff3(chrom, s, e, lab, mean, exact)
        if "bigwig" in self.formats or "bedgraph" in self.formats:
            t = -(-(hi - lo) // r)
            valid = np.ones(t, dtype=bool)
            paint(valid, 0, (gaps[:, 0] - lo) // r, -(-(gaps[:, 1] - lo) // r),
                  np.zeros(len(gaps), dtype=bool))
            series = {}
            if post is not None:
                for i, name in enumerate(self.scheme.names):
                    series[f"posterior.{name}"] = post[:, i]
            if bnd is not None:
                series["boundary"] = bnd
            if entropy is not None and self.entropy:
                series["entropy"], series["boundary_entropy"] = entropy
            self._write_signals(chrom, lo, hi, series, valid)

    def _write_bed(self, chrom, s, e, lab, score) -> None:
        sc = self.scheme
        lines = []
        for a, b, lb, v in zip(s.tolist(), e.tolist(), lab.tolist(), score.tolist()):
            if lb < 0:
                name, strand, rgb = GAP, ".", GAP_COLOR
            else:
                name, strand, rgb = sc.names[lb], sc.strands[lb], sc.colors[lb]
            lines.append(f"{chrom}\t{a}\t{b}\t{name}\t{v}\t{strand}\t{a}\t{b}\t"
                         f"{rgb[0]},{rgb[1]},{rgb[2]}\n")
        text = "".join(lines)
        self._fh["bed"].write(text)
        self._fh["browser"].write(text)
        if "stranded" not in self._fh:
            return
        both = []
        for row in lines:
            f = row.split("\t")
            if f[5] != ".":
                both.append(row)
                continue
            for strand in "+-":
                f[5] = strand
                both.append("\t".join(f))
        self._fh["stranded"].write("".join(both))

    # ---------------------------------------------------------------- GFF3
    def _write_gff3(self, chrom, s, e, lab, mean, exact=None) -> None:
        sc = self.scheme
        out = self._fh["gff3"]
        lines: list[str] = []
        seqid = gff3_seqid(chrom)

        def score(i):
            if exact is not None:  # the run posterior; the mean label posterior as attribute
                return ("." if np.isnan(exact[i]) else f"{exact[i]:.4f}",
                        None if np.isnan(mean[i]) else f"{mean[i]:.3f}")
            return "." if np.isnan(mean[i]) else f"{mean[i]:.3f}"

        def row(ftype, a, b, strand, attrs, sc_="." , phase="."):
            if isinstance(sc_, tuple):
                sc_, m = sc_
                if m is not None:
                    attrs = list(attrs) + [("mean_posterior", m)]
            attr = ";".join(f"{k}={','.join(map(_esc, v)) if isinstance(v, tuple) else _esc(v)}"
                            for k, v in attrs)  # a tuple: several values
            lines.append(f"{seqid}\tsemiseg\t{ftype}\t{a + 1}\t{b}\t{sc_}\t{strand}\t"
                         f"{phase}\t{attr}\n")

        roles = [sc.roles[lb] if lb >= 0 else None for lb in lab.tolist()]
        labs = lab.tolist()
        k = 0
        single = 0
        gene_mode = sc.kind == "gene_structure"
        while k < len(labs):
            lb, role = labs[k], roles[k]
            if lb < 0:
                single += 1
                row("gap", s[k], e[k], ".", [("ID", f"{chrom}:gap{single}"), ("Name", GAP)])
                k += 1
                continue
            if gene_mode and role in ("CDS", "UTR", "ncRNA"):
                coding = role != "ncRNA"
                strand = sc.strands[lb]
                j, last = gene_runs(labs, roles, sc.strands, k)
                # a gene that runs into the chromosome's end or a gap may go on beyond
                # it: a partial gene (NCBI's GFF3 attributes: partial, start_range and
                # end_range with '.' on the open side); so may one whose first or last
                # exon is cut off there by an intron of its strand (an intron running
                # from the sequence's start or to its end)
                i0 = k
                while i0 > 0 and roles[i0 - 1] == "intron" and sc.strands[labs[i0 - 1]] == strand:
                    i0 -= 1
                cut = (i0 == 0 or labs[i0 - 1] < 0,
                       e[j] >= self.chrom_sizes[chrom] or j + 1 == len(labs) or
                       labs[j + 1] < 0)
                if j > last and not cut[1]:  # trailing introns end before an intergenic
                    cut = (cut[0], e[last] >= self.chrom_sizes[chrom])
                self._gene(row, chrom, list(range(k, last + 1)), s, e, roles, strand,
                           coding, score, cut, mean)
                k = last + 1
                continue
            if gene_mode and (role == "intron" or lb == sc.background):
                if role == "intron":
                    single += 1
                    row("intron", s[k], e[k], sc.strands[lb],
                        [("ID", f"{chrom}:intron{single}"), ("Name", sc.names[lb])], score(k))
                k += 1
                continue
            single += 1
            row(sc.gff_types[lb], s[k], e[k], sc.strands[lb],
                [("ID", f"{chrom}:{sc.names[lb]}{single}"), ("Name", sc.names[lb]),
                 ("label", sc.names[lb])], score(k))
            k += 1
        out.write("".join(lines))

    def _gene(self, row, chrom, idx, s, e, roles, strand, coding, score,
              cut=(False, False), mean=None) -> None:
        self._gene_n += 1
        gid = f"{chrom}:gene{self._gene_n}"
        tid = f"{gid}.t1"
        a, b = int(s[idx[0]]), int(e[idx[-1]])
        # the gene's score: the mean posterior of its bases' labels (over its rows)
        gscore = "."
        if mean is not None:
            w = np.array([e[i] - s[i] for i in idx], dtype=np.float64)
            m = np.array([mean[i] for i in idx])
            ok = ~np.isnan(m)
            if ok.any():
                gscore = f"{float((m[ok] * w[ok]).sum() / w[ok].sum()):.3f}"
        partial = []
        if any(cut):
            partial = [("partial", "true")]
            partial += [("start_range", (".", str(a + 1)))] if cut[0] else []
            partial += [("end_range", (str(b), "."))] if cut[1] else []
        row("gene" if coding else "ncRNA_gene", a, b, strand,
            [("ID", gid), ("Name", gid)] + partial, gscore)
        row("mRNA" if coding else "ncRNA", a, b, strand,
            [("ID", tid), ("Parent", gid)] + partial, gscore)
        # exons: maximal runs of non-intron segments
        exons: list[list[int]] = []
        for i in idx:
            if roles[i] == "intron":
                continue
            if exons and exons[-1][1] == s[i]:
                exons[-1][1] = int(e[i])
            else:
                exons.append([int(s[i]), int(e[i])])
        for n, (xa, xb) in enumerate(exons, 1):
            row("exon", xa, xb, strand, [("ID", f"{tid}.exon{n}"), ("Parent", tid)])
        cds = [i for i in idx if roles[i] == "CDS"]
        # CDS phase (bases before the next codon's first base), in transcription order.
        # Codons are counted from the 5' end; for a gene cut at its 5' end only (its 3'
        # end whole, the last codon ending where the CDS ends), from the 3' end
        five, three = (cut[1], cut[0]) if strand == "-" else cut
        total = sum(int(e[i] - s[i]) for i in cds)
        offset = total % 3 if five and not three else 0
        phases = {}
        done = 0
        for i in (reversed(cds) if strand == "-" else cds):
            phases[i] = (offset - done) % 3
            done += int(e[i] - s[i])
        n_utr = n_intron = 0
        for i in idx:
            if roles[i] == "CDS":  # one ID for all CDS rows of the transcript (GFF3)
                row("CDS", s[i], e[i], strand, [("ID", f"{tid}.cds"), ("Parent", tid)],
                    score(i), str(phases[i]))
            elif roles[i] == "UTR":
                n_utr += 1
                if not cds:
                    ftype = "UTR"
                else:
                    before = s[i] < s[cds[0]]
                    ftype = "five_prime_UTR" if before == (strand != "-") else "three_prime_UTR"
                row(ftype, s[i], e[i], strand, [("ID", f"{tid}.utr{n_utr}"), ("Parent", tid)],
                    score(i))
            elif roles[i] == "intron":
                n_intron += 1
                row("intron", s[i], e[i], strand,
                    [("ID", f"{tid}.intron{n_intron}"), ("Parent", tid)], score(i))
        if self._seq is not None and coding and cds:
            self._codons(row, chrom, gid, tid, [(int(s[i]), int(e[i])) for i in cds],
                         strand, cut)

    def _codons(self, row, chrom, gid, tid, blocks, strand, cut) -> None:
        """A coding gene's start_codon / stop_codon rows and its .cds.fa and
        .proteins.fa records (geneseq.py)."""
        g = gene_seq(self._seq, blocks, strand, cut, self.code)
        if g.internal_stops:
            self.internal_stop_genes.append(tid)
        for ftype, pieces in (("start_codon", g.start_codon), ("stop_codon", g.stop_codon)):
            for a, b in pieces:  # a codon split by an intron: rows sharing one ID
                row(ftype, a, b, strand, [("ID", f"{tid}.{ftype}"), ("Parent", tid)])
        where = f"{chrom}:{blocks[0][0] + 1}-{blocks[-1][1]}({strand})"
        desc = (f"gene={gid} location={where} partial={g.partial} "
                f"internal_stops={g.internal_stops} genetic_code={self.code.number}")
        self._fh["cds"].write(fasta_record(tid, f"{desc} length={len(g.cds)}", g.cds))
        self._fh["proteins"].write(fasta_record(tid, f"{desc} length={len(g.protein)}",
                                                g.protein))


def gene_runs(labs: list, roles: list, strands, k: int) -> tuple[int, int]:
    """The runs of the gene whose first exonic run (role CDS, UTR or ncRNA) is run k of
    a chromosome's runs (labels `labs`, -1 for none, and their `roles`): (j, last), the
    last run of its strand's exonic or intron labels after k, and the last exonic one
    (an ncRNA gene holds ncRNA exons only). The GFF3's genes (OutputWriter) and the
    gene-score filter (genemodel/genefilter.py) group runs so."""
    exonic = ("ncRNA",) if roles[k] == "ncRNA" else ("CDS", "UTR")
    strand = strands[labs[k]]
    j = last = k
    while j + 1 < len(labs):
        l2, r2 = labs[j + 1], roles[j + 1]
        if l2 < 0 or strands[l2] != strand or r2 not in exonic + ("intron",):
            break
        j += 1
        if r2 != "intron":
            last = j
    return j, last


def write_outputs(prefix: str | os.PathLike, scheme: LabelScheme, chrom_sizes: Mapping[str, int],
                  segments: Mapping[str, np.ndarray], posteriors: Mapping | None = None,
                  boundary: Mapping | None = None, **kwargs) -> list[str]:
    """Write all chromosomes at once (dicts chrom -> array); returns the paths written.

    Keyword arguments are those of :class:`OutputWriter`.
    """
    posteriors, boundary = posteriors or {}, boundary or {}
    with OutputWriter(prefix, scheme, chrom_sizes, **kwargs) as w:
        paths = list(w._tmp)
        for chrom in chrom_sizes:
            if chrom in segments:
                w.add(chrom, segments[chrom], posteriors.get(chrom), boundary.get(chrom))
    return paths
