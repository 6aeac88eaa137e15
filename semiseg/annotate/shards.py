"""Annotation shards: a genome's chromosomes grouped into jobs of balanced total length.

A real assembly may hold a few long chromosomes and tens of thousands of short
scaffolds; one annotation job per sequence is then far too many jobs, and one job for
everything far too long. `plan_shards` groups consecutive sequences (FASTA order) into
shards: many short contigs share a shard, and a long chromosome stays whole in a shard
of its own (so it keeps exact whole-sequence decoding up to annotate.max_decode_steps).
Because every shard is a consecutive run of the FASTA, `semiseg merge` of the shards in
order gives the files of one annotation of the whole genome.

    semiseg shard --fasta G.fa --shards 64 --out DIR         # about total / 64 bp each
    semiseg shard --fasta G.fa --shard-size 50e6 --out DIR   # at most 50 Mb each
                                                             # (a longer chromosome alone)

writes DIR/shards.tsv (shard, chrom, length) and one DIR/SHARD.bed per shard (the whole
chromosomes, for `semiseg annotate --regions DIR/SHARD.bed`). The Snakefile calls
`plan_shards` when it is read, with the sizes from the FASTA index (.fai).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import SemisegError


def plan_shards(sizes: dict[str, int], shards: int | None = None,
                shard_size: int | None = None) -> list[list[str]]:
    """Consecutive groups of chromosome names (FASTA order), balanced by total length.

    Args:
        sizes: {chrom: length} in FASTA order.
        shards: at most this many groups of about total / shards bp each: a chromosome
            goes to group floor(shards * midpoint / total), where midpoint is the
            position of its centre along the concatenated genome; groups left empty
            (a chromosome longer than total / shards spans them) are dropped.
        shard_size: groups of at most this many bp (a longer chromosome alone): a new
            group starts when the next chromosome would not fit.
        Exactly one of `shards` and `shard_size`; with neither, one group per chromosome.

    Every chromosome is in exactly one group; the groups in order are the FASTA order.
    """
    if shards is not None and shard_size is not None:
        raise SemisegError("--shards and --shard-size: give one of them, not both")
    if shards is not None and shards < 1:
        raise SemisegError(f"--shards: expected a number >= 1, got {shards}")
    if shard_size is not None and shard_size < 1:
        raise SemisegError(f"--shard-size: expected a number of bp >= 1, got {shard_size}")
    if not sizes:
        raise SemisegError("shards: no chromosomes to shard")
    names = list(sizes)
    if shards is None and shard_size is None:
        return [[c] for c in names]
    groups: list[list[str]] = []
    if shards is not None:
        total = sum(sizes.values())
        buckets: dict[int, list[str]] = {}
        pos = 0
        for c in names:
            mid2 = 2 * pos + sizes[c]  # twice the centre: integer arithmetic throughout
            k = min(shards - 1, shards * mid2 // (2 * total)) if total else 0
            buckets.setdefault(k, []).append(c)
            pos += sizes[c]
        return [buckets[k] for k in sorted(buckets)]
    current, filled = [], 0
    for c in names:
        if current and filled + sizes[c] > shard_size:
            groups.append(current)
            current, filled = [], 0
        current.append(c)
        filled += sizes[c]
    groups.append(current)
    return groups


def shard_names(n: int) -> list[str]:
    """Zero-padded names that sort in shard order: 0000, 0001, ..."""
    width = max(4, len(str(n - 1)))
    return [f"{i:0{width}d}" for i in range(n)]


def fasta_sizes(fasta: str, chroms: list[str] | None = None) -> dict[str, int]:
    """{chrom: length} of a FASTA in file order (from its index, built when missing),
    restricted to `chroms` (an error names any that the FASTA lacks)."""
    from ..genome import Fasta, check_chroms

    if not os.path.isfile(fasta):
        raise SemisegError(f"--fasta: file not found: {fasta}")
    fa = Fasta(fasta)
    sizes = dict(fa.chrom_sizes)
    fa.close()
    from ..genome.escapes import check_bed_names  # the shards are BED files

    check_bed_names(sizes, fasta, set(chroms) if chroms else None)
    if chroms:
        check_chroms(chroms, sizes, fasta)
        keep = set(chroms)
        sizes = {c: n for c, n in sizes.items() if c in keep}
    return sizes


def write_shards(groups: list[list[str]], sizes: dict[str, int], out: str | Path) -> list[str]:
    """OUT/shards.tsv and OUT/SHARD.bed per shard, all written under temporary names and
    renamed once every one is complete; returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = shard_names(len(groups))
    files = {out / "shards.tsv": "shard\tchrom\tlength\n" + "".join(
        f"{s}\t{c}\t{sizes[c]}\n" for s, g in zip(names, groups) for c in g)}
    for s, g in zip(names, groups):
        files[out / f"{s}.bed"] = "".join(f"{c}\t0\t{sizes[c]}\n" for c in g)
    tmp = {p: p.with_name(p.name + ".tmp") for p in files}
    try:
        for p, text in files.items():
            tmp[p].write_text(text)
    except BaseException:
        for t in tmp.values():
            t.unlink(missing_ok=True)
        raise
    for p, t in tmp.items():
        os.replace(t, p)
    return [str(p) for p in files]
