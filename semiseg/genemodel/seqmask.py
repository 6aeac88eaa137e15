"""The gene model's sequence mask: where each internal label (semiseg.genemodel.frames'
FrameLayout) may stand, from the bases alone (stop and start codons in each frame, splice
dinucleotides). Built in torch on the device of the bases, so the gene model's CRF
inputs never leave the GPU."""

from __future__ import annotations

import torch

from ..genome.codes import STARTS, STOPS, reverse_complement
from ..genome.iupac import IUPAC
from .devconst import isin_ids
from .frames import BASES, SPLICE_LEFT, SPLICE_RIGHT, FrameLayout


def _codon_ids(codes: torch.Tensor) -> torch.Tensor:
    """Id (0..63, or -1 with an N) of the triplet starting at each position (-1 past the end)."""
    n = codes.shape[-1]
    out = torch.full(codes.shape, -1, dtype=torch.int64, device=codes.device)
    if n >= 3:
        a, b, c = (codes[..., i:n - 2 + i] for i in range(3))
        ok = (a < 4) & (b < 4) & (c < 4)
        out[..., :n - 2] = torch.where(ok, a * 16 + b * 4 + c, -1)
    return out


def _ids(words) -> list[int]:
    return [BASES.index(w[0]) * 16 + BASES.index(w[1]) * 4 + BASES.index(w[2]) for w in words]


def sequence_allowed(layout: FrameLayout, codes):
    """(..., T, C) bool: where each internal label may cover a position, from the bases
    (..., T) of the sequence as decoded (frames relative to its first base), a tensor of
    base codes (frames.base_codes); the mask is on its device.

    A frame-f stop codon of the genome forbids CDS_f on its last base in the gene's
    direction (plus strand: the right one; minus strand: the left one), and stop_f is
    allowed only on its bases. One base is enough: a CDS run that holds the whole
    triplet holds that base. A CDS run that holds only its first two (in the gene's
    direction) ends there, so a donor covers the third: a codon split by an intron,
    whose genomic triplet is no codon at all (plus: TA|GT.., minus: ..AC|TA); forbidding
    every base of the triplet made such genes impossible. On the acceptor side no
    triplet across the AG (minus: CT) reads a stop.
    start_f only on the bases of a frame-f start codon. A codon that runs past
    either end of the sequence, or holds an N, is not a stop (partial genes are fine).
    A splice-site label is allowed only on the first base of its intron-end
    dinucleotide (plus strand: G of GT at the left end, G of AG at the right end;
    minus strand: C of CT at the left end, C of AC at the right end), looking one base
    into the intron, which therefore must be inside the sequence.
    """
    codes = codes.long()
    dev = codes.device
    T = codes.shape[-1]
    trip = _codon_ids(codes)
    t = torch.arange(T, device=dev)
    words = {}  # frame f -> the id of the frame-f triplet holding each base (-1: none)
    last = {}  # frame f, strand -> whether t is the triplet's last base in that direction
    for f in range(3):
        cs = t - ((t - f) % 3)  # first base of the frame-f triplet holding t
        inside = (cs >= 0) & (cs + 3 <= T)
        words[f] = torch.where(inside, trip[..., cs.clamp(0, max(T - 1, 0))], -1)
        last[f, "+"], last[f, "-"] = t == cs + 2, t == cs
    out = torch.ones(codes.shape + (len(layout),), dtype=torch.bool, device=dev)
    for c in range(len(layout)):
        f = layout.frame[c]
        kname = layout.kind_names[layout.kind[layout.base[c]]]  # a run tail: its label's
        kind, s = kname[:-1], kname[-1]
        if f < 0 or kind == "intron":
            continue
        if kind in ("donor", "acceptor"):
            out[..., c] = splice_sites(codes, s, kind)
            continue
        if kind == "start":
            out[..., c] = words[f] == _ids([STARTS[s]])[0]
            continue
        stop = isin_ids(words[f], _ids(STOPS[s]))
        out[..., c] = stop if kind == "stop" else ~(stop & last[f, s])
    return out


def donor_motif_mask(codes: torch.Tensor, motif: str, strand: str) -> torch.Tensor:
    """(..., T) bool: where a donor label of `strand` may stand if the intron must begin
    with `motif` (IUPAC, read on the gene's strand from the intron's first base, which
    the donor label covers): plus strand, the bases t.. t+m-1 match it; minus strand,
    the bases t-m+1 .. t match its reverse complement. A motif running past either end
    of the sequence, or over an N (unless the motif has N there), does not match."""
    m = motif if strand == "+" else reverse_complement(motif)
    n, T = len(m), codes.shape[-1]
    out = torch.zeros(codes.shape, dtype=torch.bool, device=codes.device)
    if T < n:
        return out
    ok = torch.ones(codes.shape[:-1] + (T - n + 1,), dtype=torch.bool, device=codes.device)
    for i, ch in enumerate(m):
        if ch == "N":
            continue
        word = codes[..., i:T - n + 1 + i]
        ok &= isin_ids(word, [BASES.index(b) for b in IUPAC[ch]])
    if strand == "+":
        out[..., :T - n + 1] = ok
    else:
        out[..., n - 1:] = ok
    return out


def splice_sites(codes: torch.Tensor, strand: str, kind: str) -> torch.Tensor:
    """(..., T) bool: the positions where a splice label of this kind may stand: the
    first base of its dinucleotide at an intron's left end, the second at its right."""
    out = torch.zeros(codes.shape, dtype=torch.bool, device=codes.device)
    for side, at in ((SPLICE_LEFT, slice(None, -1)), (SPLICE_RIGHT, slice(1, None))):
        name, pair = side[strand]
        if name == kind:  # the dinucleotide pair[0] pair[1] starting at each t < T - 1
            out[..., at] = ((codes[..., :-1] == BASES.index(pair[0]))
                            & (codes[..., 1:] == BASES.index(pair[1])))
    return out
