"""Training windows around long introns (`windows.intron_windows`).

The training tiles are `windows.size` bp (10 kb in the gene config). An intron longer
than about half a tile is then never seen whole in one window with the exons on both
its sides: the windows inside it are all intron, and the windows at its ends hold one
exon each. So the model is never trained on the one decision that loses the fly
benchmark's long introns: one gene across a long intron against two genes (a stop
codon, intergenic sequence, a start codon) over the same bases (docs/gene_model.md,
"Where the second round's fly model lost"). With this on, each annotated intron longer
than `windows.size // 2` gets one more training window: the intron and `windows.size
// 4` bp on each side (its neighbouring exons and splice sites); overlapping ones are
merged, and each is clipped to the training regions (never into validation or held-out
sequence). Which introns are long is read off the training annotation, not set.
"""

from __future__ import annotations

import numpy as np
import torch


def intron_windows(transcripts, regions: list[tuple[str, int, int]], size: int,
                   window_type):
    """Windows (window_type(chrom, start, end)) around the introns longer than size // 2
    of `transcripts` (genome/gff.Transcript, any order), each intron with size // 4 bp
    of flank, overlapping ones merged, clipped to `regions` ((chrom, start, end) where
    training may read; pieces shorter than the intron and its flanks are dropped: a
    clipped window no longer holds both exons)."""
    long_len, flank = size // 2, size // 4
    by_chrom: dict[str, list[tuple[int, int]]] = {}
    for t in transcripts:
        introns = np.asarray(t.introns, dtype=np.int64).reshape(-1, 2)
        for a, b in introns.tolist():
            if b - a > long_len:
                by_chrom.setdefault(t.chrom, []).append((a - flank, b + flank))
    out = []
    for chrom, spans in by_chrom.items():
        merged: list[list[int]] = []
        for a, b in sorted(spans):
            if merged and a < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        for a, b in merged:
            for c, s, e in regions:
                if c == chrom and s <= a and b <= e:  # wholly inside one training region
                    out.append(window_type(chrom, a, b))
                    break
    return out


def _groups(order: list[int], lengths: list[int], size: int,
            batch_size: int) -> list[list[int]]:
    """The batches of `order` before shuffling: windows of at most `size` bp as they
    come, then longer ones longest first."""
    short = [i for i in order if lengths[i] <= size]
    long = sorted((i for i in order if lengths[i] > size), key=lambda i: -lengths[i])
    return ([short[i:i + batch_size] for i in range(0, len(short), batch_size)]
            + [long[i:i + batch_size] for i in range(0, len(long), batch_size)])


def batches(order: list[int], lengths: list[int], size: int, batch_size: int,
            gen) -> list[list[int]]:
    """The batches of an epoch's window order: windows of at most `size` bp in batches
    as they come; longer windows (intron_windows) in batches of their own, longest
    first, so that a batch's chain is not as long as its longest window for the sake of
    one window; then the batches in a random order (from `gen`). Without long windows,
    the order's consecutive batches, and `gen` is not drawn from."""
    out = _groups(order, lengths, size, batch_size)
    if all(lengths[i] <= size for i in order):
        return out
    perm = torch.randperm(len(out), generator=gen).tolist()
    return [out[p] for p in perm]


def batch_count(lengths: list[int], size: int, batch_size: int) -> int:
    """The number of batches `batches` makes of these windows."""
    return len(_groups(list(range(len(lengths))), lengths, size, batch_size))
