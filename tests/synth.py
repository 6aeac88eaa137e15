"""Write small genomic files (FASTA, bigWig, bedGraph, BAM) from numpy data, and small
synthetic tasks (GC islands): inputs whose content the tests know. (It lived in
semiseg/genome/ until issue 45; nothing but the tests used it.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def gc_island_genome(rng: np.random.Generator, lengths: Mapping[str, int],
                     run: tuple[int, int] = (200, 900)) -> tuple[dict, list]:
    """Random sequences of alternating 'off' (A, C, G, T) and 'on' (G, C only) runs of
    rng.integers(*run) bp: ({name: sequence}, [(name, start, end, label), ...]), a task
    whose truth a small model learns in seconds (the tests' toy genomes)."""
    seqs, bed = {}, []
    for name, n in lengths.items():
        s = rng.choice(list("ACGT"), n)
        pos, on = 0, False
        while pos < n:
            end = min(n, pos + int(rng.integers(*run)))
            if on:
                s[pos:end] = rng.choice(list("GC"), end - pos)
            bed.append((name, pos, end, "on" if on else "off"))
            pos, on = end, not on
        seqs[name] = "".join(s)
    return seqs, bed


def gc_island_task(folder: str | os.PathLike, rng: np.random.Generator,
                   lengths: Mapping[str, int], fasta: str = "g.fa",
                   run: tuple[int, int] = (200, 900)) -> dict:
    """gc_island_genome written to `folder` (FASTA `fasta`, truth.bed); returns the
    training config's `inputs` and `labels` for it (paths relative to `folder`)."""
    seqs, bed = gc_island_genome(rng, lengths, run)
    write_fasta(os.path.join(folder, fasta), seqs)
    with open(os.path.join(folder, "truth.bed"), "w") as fh:
        fh.writelines(f"{c}\t{s}\t{e}\t{n}\n" for c, s, e, n in bed)
    return {"inputs": {"fasta": fasta},
            "labels": {"annotation": "truth.bed",
                       "scheme": {"name": "gc", "kind": "bed", "background": "off",
                                  "labels": [{"name": "off"}, {"name": "on"}]}}}


def write_fasta(path: str | os.PathLike, records: Mapping[str, str], width: int = 60,
                bgzip: bool = False) -> str:
    """FASTA with lines of ``width`` letters; ``bgzip=True`` compresses it with BGZF."""
    path = os.fspath(path)
    text = "".join(
        f">{name}\n" + "".join(seq[i:i + width] + "\n" for i in range(0, len(seq), width))
        for name, seq in records.items()
    )
    if bgzip:
        import pysam

        plain = path + ".plain"
        with open(plain, "w") as fh:
            fh.write(text)
        pysam.tabix_compress(plain, path, force=True)
        os.remove(plain)
    else:
        with open(path, "w") as fh:
            fh.write(text)
    return path


def write_bigwig(path: str | os.PathLike, chrom_sizes: Mapping[str, int],
                 values: Mapping[str, np.ndarray]) -> str:
    """bigWig with one value per bp from ``values[chrom]``; NaN positions get no entry."""
    import pyBigWig

    path = os.fspath(path)
    bw = pyBigWig.open(path, "w")
    bw.addHeader(list(chrom_sizes.items()))
    for chrom in chrom_sizes:
        if chrom not in values:
            continue
        v = np.asarray(values[chrom], dtype=np.float64)
        ok = ~np.isnan(v)
        edges = np.diff(np.concatenate([[0], ok.astype(np.int8), [0]]))
        for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
            bw.addEntries(chrom, int(a), values=v[a:b], span=1, step=1)
    bw.close()
    return path


def write_bedgraph(path: str | os.PathLike, rows: Iterable[tuple[str, int, int, float]]) -> str:
    """bedGraph from ``(chrom, start, end, value)`` rows, written in the given order."""
    path = os.fspath(path)
    with open(path, "w") as fh:
        fh.writelines(f"{chrom}\t{s}\t{e}\t{v:g}\n" for chrom, s, e, v in rows)
    return path


def bedgraph_rows(chrom: str, values: np.ndarray) -> list[tuple[str, int, int, float]]:
    """Runs of equal, non-NaN values of a per-bp array as bedGraph rows."""
    v = np.asarray(values, dtype=np.float64)
    out = []
    n = len(v)
    change = np.flatnonzero((v[1:] != v[:-1]) & ~(np.isnan(v[1:]) & np.isnan(v[:-1]))) + 1
    bounds = np.concatenate([[0], change, [n]])
    for a, b in zip(bounds[:-1], bounds[1:]):
        if not np.isnan(v[a]):
            out.append((chrom, int(a), int(b), float(v[a])))
    return out


def write_bam(path: str | os.PathLike, chrom_sizes: Mapping[str, int],
              reads: Sequence[tuple], index: bool = True) -> str:
    """A coordinate-sorted BAM (and its index).

    Args:
        reads: ``(chrom, start, cigar, reverse, mapq, duplicate)`` tuples; ``cigar`` is a
            string such as ``"50M"`` or ``"20M100N30M"``.
    """
    import pysam

    path = os.fspath(path)
    names = list(chrom_sizes)
    header = {"HD": {"VN": "1.6", "SO": "coordinate"},
              "SQ": [{"SN": c, "LN": int(n)} for c, n in chrom_sizes.items()]}
    order = sorted(range(len(reads)), key=lambda i: (names.index(reads[i][0]), reads[i][1]))
    with pysam.AlignmentFile(path, "wb", header=header) as out:
        for k in order:
            chrom, start, cigar, reverse, mapq, dup = reads[k]
            a = pysam.AlignedSegment(out.header)
            a.query_name = f"r{k}"
            a.reference_id = names.index(chrom)
            a.reference_start = int(start)
            a.cigarstring = cigar
            qlen = a.infer_query_length()
            a.query_sequence = "A" * qlen
            a.query_qualities = pysam.qualitystring_to_array("I" * qlen)
            a.mapping_quality = int(mapq)
            a.flag = (16 if reverse else 0) | (1024 if dup else 0)
            out.write(a)
    if index:
        pysam.index(path)
    return path


def tiny_training(folder, crf: Mapping | None = None, train: Mapping | None = None):
    """A small CPU training set-up on gc_island_task's 4 kb chromosome (windows of 2 kb,
    no validation, a one-layer encoder at 10 bp): (Config, model, training Dataset),
    the model built under torch.manual_seed(0). `crf` and `train` are the config's
    sections."""
    import torch
    import yaml

    from semiseg import ui
    from semiseg.checkpoint import build_model
    from semiseg.config.load import load_config
    from semiseg.train.loop import _load_data

    cfg = {**gc_island_task(folder, np.random.default_rng(1), {"a": 4000}),
           "windows": {"chroms": ["a"], "size": 2000, "valid_fraction": 0.0},
           "model": {"channels": 8, "layers": 1, "kernel_size": 3, "stem_kernel": 3,
                     "max_dilation": 1, "resolution": 10, "dropout": 0.0},
           "crf": dict(crf or {"max_duration": 8}),
           "train": dict(train or {"epochs": 1, "batch_size": 2}), "device": "cpu"}
    path = os.path.join(folder, "cfg.yaml")
    with open(path, "w") as fh:
        fh.write(yaml.safe_dump(cfg))
    ui.set_quiet(True)
    c = load_config(path)
    _, _, scheme, columns, train_ds, _ = _load_data(c)
    torch.manual_seed(0)
    model, _ = build_model(c, len(columns), len(scheme.names))
    return c, model, train_ds
