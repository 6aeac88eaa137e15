"""`semiseg merge`: join the annotations of disjoint sets of sequences (the shards or
chromosomes of `annotate --regions/--chroms`) into one set of files, in the order given.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC
from pathlib import Path

from ..errors import SemisegError
from ..genome._util import close_silenced, deferred_signals
from .outputset import ANNOTATION_FILES, OutputSet, output_folder


def check_parts(parts: list[str]) -> None:
    """SemisegError unless the parts come from one model, label scheme and resolution
    (their GFF3 headers, semiseg/genome/origin.py) and hold disjoint sequences (BED column 1)."""
    from ..genome import bed_rows
    from ..genome.origin import prediction_origin, same_scheme

    first = None
    for p in parts:
        o = prediction_origin(f"{p}.gff3")
        if o is None:
            raise SemisegError(f"merge: {p}.gff3 does not say what made it (no '# semiseg "
                               "VERSION model=...' header line); annotate it again")
        if first is None:
            first = (p, o)
            continue
        q, f = first
        for what, a, b in (("model", f.model, o.model), ("label scheme", f.scheme_name,
                           o.scheme_name), ("resolution", f.resolution, o.resolution)):
            if a != b:
                raise SemisegError(f"merge: {q} and {p} come from different runs ({what} "
                                   f"{a} vs {b}); merge only parts of one model's annotation")
        if f.scheme is not None and o.scheme is not None and not same_scheme(f.scheme,
                                                                              o.scheme):
            raise SemisegError(f"merge: {q} and {p} were written with different definitions "
                               f"of label scheme {o.scheme_name!r}")
    where: dict[str, str] = {}
    for p in parts:
        seen = set()
        for _, f in bed_rows(f"{p}.bed"):
            if f[0] in seen:
                continue
            seen.add(f[0])
            if f[0] in where:
                what = "given twice" if where[f[0]] == p else f"also in {where[f[0]]}"
                raise SemisegError(f"merge: sequence {f[0]!r} of {p} is {what}: parts must "
                                   "hold disjoint sequences (one part per shard or "
                                   "chromosome)")
            where[f[0]] = p


def merge(parts: list[str], out: str) -> list[str]:
    """Join annotations of disjoint chromosome sets (PART.bed, ... from `annotate --chroms`)
    into one (OUT.bed, ...), in the order given. Used by the Snakefile's gather step.
    The set is written as a whole (annotate/outputset.py): all of it or nothing, replacing OUT's
    previous set."""
    import glob

    if not parts:
        raise SemisegError("merge: no inputs")
    for p in parts:
        for suffix in ("bed", "browser.bed", "gff3", "summary.tsv", "boundary.bw"):
            if not os.path.isfile(f"{p}.{suffix}"):
                raise SemisegError(f"merge: {p}.{suffix} is missing (not a complete annotation)")
    check_parts(parts)
    labels = sorted(f[len(parts[0]) + len(".posterior."):-len(".bw")]
                    for f in glob.glob(f"{glob.escape(parts[0])}.posterior.*.bw"))
    with output_folder(Path(out).parent):  # made here: removed again if left empty
        return _write_merged(parts, out, labels)


def _write_merged(parts: list[str], out: str, labels: list[str]) -> list[str]:
    """merge's files OUT.*: written as a whole into a staging folder, then moved into
    place replacing OUT's previous set, under OUT.lock (annotate/outputset.py)."""
    tmp: dict[str, str] = {}
    outputs = OutputSet(out, legacy=ANNOTATION_FILES).__enter__()

    def target(suffix: str) -> str:
        final = f"{out}.{suffix}"
        tmp[final] = f"{outputs.prefix}.{suffix}"
        return tmp[final]

    try:
        for suffix in ("bed", "browser.bed"):
            with open(target(suffix), "w") as fh:
                for i, p in enumerate(parts):
                    with open(f"{p}.{suffix}") as src:
                        for line in src:
                            header = line.startswith(("#", "track", "browser"))
                            # PREFIX.bed stays plain BED9 (even from parts written by
                            # older versions); the browser BED keeps the first track line
                            if not header or (i == 0 and suffix == "browser.bed"):
                                fh.write(line)
        _merge_gff3(parts, target("gff3"))
        _merge_summary(parts, target("summary.tsv"))
        extra = [s for s in ("entropy.bw", "boundary_entropy.bw")
                 if all(os.path.isfile(f"{p}.{s}") for p in parts)]
        if all(os.path.isfile(f"{p}.samples.bed") for p in parts):
            with open(target("samples.bed"), "w") as fh:
                for i, p in enumerate(parts):
                    with open(f"{p}.samples.bed") as src:
                        fh.writelines(line for line in src if i == 0 or not line.startswith("#"))
        # the stranded BED and the genes' CDS and protein FASTA (IDs carry the chromosome,
        # so the parts' records stay distinct): the parts' rows in order, where every part
        # has the file
        for suffix in ("stranded.bed", "cds.fa", "proteins.fa"):
            if all(os.path.isfile(f"{p}.{suffix}") for p in parts):
                header = ("#", "track", "browser") if suffix.endswith(".bed") else ()
                with open(target(suffix), "w") as fh:
                    for i, p in enumerate(parts):
                        with open(f"{p}.{suffix}") as src:
                            fh.writelines(ln for ln in src
                                          if i == 0 or not (header and ln.startswith(header)))
        for suffix in ["boundary.bw"] + extra + [f"posterior.{n}.bw" for n in labels]:
            _merge_bigwig(parts, suffix, target(suffix))
        if all(os.path.isfile(f"{p}.json") for p in parts):
            _sidecar(parts, target("json"), [f for f in tmp if not f.endswith(".json")])
    except BaseException:
        outputs.__exit__(*sys.exc_info())  # the staging folder goes (OSError: one line)
        raise
    outputs.__exit__(None, None, None)  # the set moves into place
    return list(tmp)


def _merge_gff3(parts: list[str], path: str) -> None:
    """The parts' GFF3: the first part's header lines, every part's sequence-region lines
    after the gff-version line, then every part's features in order."""
    heads, regions, body = [], [], []
    for i, p in enumerate(parts):
        with open(f"{p}.gff3") as src:
            for line in src:
                if line.startswith("##sequence-region"):
                    regions.append(line)
                elif line.startswith("#"):
                    if i == 0 and line not in heads:
                        heads.append(line)
                else:
                    body.append(line)
    gff_version = [h for h in heads if h.startswith("##gff-version")]
    with open(path, "w") as fh:
        fh.writelines(gff_version + regions + [h for h in heads if h not in gff_version]
                      + body)


def _merge_summary(parts: list[str], path: str) -> None:
    """The parts' summary.tsv: segments and bp per label added up, fractions anew."""
    counts: dict[str, list[int]] = {}
    comment = ""
    for p in parts:
        with open(f"{p}.summary.tsv") as src:
            for line in src:
                if line.startswith("#"):
                    comment = comment or line
                    continue
                f = line.rstrip("\n").split("\t")
                if f[0] == "label":
                    continue
                c = counts.setdefault(f[0], [0, 0])
                c[0] += int(f[1])
                c[1] += int(f[2])
    total = sum(c[1] for c in counts.values()) or 1
    with open(path, "w") as fh:
        fh.write(comment + "label\tsegments\tbp\tfraction\n")
        fh.writelines(f"{n}\t{segs}\t{bp}\t{bp / total:.6f}\n"
                      for n, (segs, bp) in counts.items())


def _merge_bigwig(parts: list[str], suffix: str, path: str) -> None:
    """The parts' PART.SUFFIX bigWigs as one, chromosomes in the parts' order, with zoom
    levels down to whole chromosomes as annotate writes them."""
    import pyBigWig

    from ..genome.zooms import add_zoom_levels

    sources = [pyBigWig.open(f"{p}.{suffix}") for p in parts]
    try:
        header, seen = [], set()
        for s in sources:
            header += [(c, n) for c, n in s.chroms().items() if c not in seen]
            seen.update(s.chroms())
        _write_bigwig(path, header, sources)
        # zoom levels down to whole chromosomes, as annotate writes them (read
        # back from the merged file; docs/outputs.md)
        add_zoom_levels(path, dict(header))
    finally:
        for s in sources:
            s.close()


def _write_bigwig(path: str, header: list, sources: list) -> None:
    """The sources' intervals into a new bigWig at `path`. libBigWig's calls run with
    signals deferred (a write cut by a signal fails); an interrupt between them closes the
    file with stderr silenced (the staging folder is removed after), so the user's one
    line stays `semiseg: interrupted`."""
    import pyBigWig

    with deferred_signals():
        bw = pyBigWig.open(path, "w")
    try:
        with deferred_signals():
            bw.addHeader(header)
        for s in sources:
            for c in s.chroms():
                iv = s.intervals(c) or ()
                if iv:
                    with deferred_signals():
                        bw.addEntries([c] * len(iv), [a for a, _, _ in iv],
                                      ends=[b for _, b, _ in iv],
                                      values=[float(v) for _, _, v in iv])
    except BaseException:
        close_silenced(bw)
        raise
    with deferred_signals():
        bw.close()


def _sidecar(parts: list[str], path: str, files: list[str]) -> None:
    """OUT.json: how the merge was made (command line, date, version), every part's own
    provenance sidecar (PART.json, as annotate wrote it) and the merged files."""
    import json
    import shlex
    import sys
    from datetime import datetime

    from .. import __version__

    docs = []
    for p in parts:
        with open(f"{p}.json") as src:
            try:
                docs.append({"prefix": p, **json.load(src)})
            except (json.JSONDecodeError, TypeError):
                why = "not a provenance sidecar (a JSON object)"
                raise SemisegError(f"merge: {p}.json is {why}") from None
    doc = {"command": shlex.join(sys.argv), "date": datetime.now(UTC).isoformat(
        timespec="seconds"), "version": __version__, "merged": docs,
        "files": [os.path.basename(f) for f in files]}
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")
