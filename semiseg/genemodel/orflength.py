"""ORF-length scores of the gene model's CRF head (`crf.orf_length_scores`).

Whether an open reading frame is a gene depends on its length: in random sequence one
codon in ~21 is a stop, so long ORFs are rare by chance, and genome annotations (SGD's
among them) call ORFs of 100 codons and more. A start codon's segment is 3 bp, but the
sequence fixes where its gene can end: for a gene without introns, at the first
in-frame stop codon downstream. So each start codon gets a learned score of the length
of the ORF it opens (bp from its first base to the end of that stop), and each stop
codon a learned score of the longest ORF it can close (bp from just after the previous
in-frame stop to its own end): functions of log-length, piecewise linear between
N_KNOTS knots from 3 bp to 30 kb (flat beyond), all zero at first. Where no such stop
lies inside the sequence, the length runs to the sequence's edge (a lower bound).

Like the site scores (genemodel/sites.py), each score stands at the codon's anchor (its first
base in the transcript's direction), where the codon's 3-bp segment collects it once.

`crf.upstream_start_scores` adds what a ribosome does: it scans the mRNA from its 5' end
and mostly initiates at the first AUG it meets (yeast chrII: 417 of 433 single-exon
genes start at the first in-frame ATG after the previous in-frame stop). Each start
codon gets a learned score of how many in-frame start codons lie upstream of it inside
its open reading frame (0, 1, 2, 3 or more; UpstreamStartScores), all zero at first.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..genome.codes import START_IDS, STOP_IDS
from .devconst import isin_ids
from .labelsum import kind_labels, label_sum
from .orf import NONE, _first_at_or_after, _last_at_or_before, _shift

N_KNOTS = 16
LOG_MIN, LOG_MAX = math.log(3.0), math.log(30000.0)
_ATG, _CAT = START_IDS["+"], START_IDS["-"]
_STOP_PLUS, _STOP_MINUS = STOP_IDS["+"], STOP_IDS["-"]   # TAA TAG TGA / TTA CTA TCA


def triplets(codes: Tensor) -> Tensor:
    """(B, T) base codes (A C G T = 0..3, else 4) -> (B, T) id of the codon read left to
    right from each base (a*16 + b*4 + c), -1 where it holds a non-ACGT base or runs off
    the end."""
    B, T = codes.shape
    trip = torch.full((B, T), -1, dtype=torch.long, device=codes.device)
    if T >= 3:
        a, b, c = codes[:, :-2], codes[:, 1:-1], codes[:, 2:]
        ok = (a < 4) & (b < 4) & (c < 4)
        trip[:, :-2] = torch.where(ok, a * 16 + b * 4 + c, torch.full_like(a, -1))
    return trip


def _codon_scan(codes: Tensor, lengths: Tensor | None) -> dict[str, Tensor]:
    """The codons and nearest in-frame stops both ORF scans read, (B, T) each: `trip`
    (triplets; past a sequence's end N), `u` (positions), `L` (lengths, (B, 1)), `stop+`,
    `stop-` (a stop of that strand begins at u), and for each u the same-residue stop
    `prv+`/`prv-` beginning at or before u - 3 (NONE: none) and `nxt+`/`nxt-` beginning at
    or after u + 3 (-NONE: none)."""
    B, T = codes.shape
    dev = codes.device
    u = torch.arange(T, device=dev).expand(B, T)
    L = (torch.full((B,), T, device=dev) if lengths is None else lengths.to(dev))[:, None]
    trip = triplets(codes.masked_fill(u >= L, 4))  # past a sequence's end: N
    out = {"trip": trip, "u": u, "L": L}
    for st, stops in (("+", _STOP_PLUS), ("-", _STOP_MINUS)):
        stop = isin_ids(trip, stops)
        out[f"stop{st}"] = stop
        out[f"prv{st}"] = _shift(_last_at_or_before(stop), 3, NONE)
        out[f"nxt{st}"] = _shift(_first_at_or_after(stop), -3, -NONE)
    return out


def orf_lengths(codes: Tensor, lengths: Tensor | None = None) -> dict[str, Tensor]:
    """Per base, float (B, T) lengths in bp (0 where no such codon is anchored):

        start+  an ATG beginning here: to the end of the first in-frame stop downstream
        stop+   a stop beginning here: from just after the previous in-frame stop
        start-  a CAT ending here (its anchor: the A of the ATG read on the minus
                strand): from its right end leftwards to the left end of the first
                in-frame TTA/CTA/TCA
        stop-   a TTA/CTA/TCA ending here: from its left end rightwards to just before
                the next in-frame TTA/CTA/TCA (the previous stop in the gene's direction)

    Missing stops: the length runs to the sequence's edge (`lengths` (B,) or T).
    """
    k = _codon_scan(codes, lengths)
    trip, u, L = k["trip"], k["u"], k["L"]
    zero = torch.zeros(trip.shape, device=trip.device)
    # plus start at u: first stop v >= u + 3 (same residue): length v + 3 - u
    start_p = torch.where(k["nxt+"] != -NONE, k["nxt+"] + 3 - u, L - u).float()
    # plus stop at u: previous stop v <= u - 3: length u - v (u + 3 with none)
    stop_pl = torch.where(k["prv+"] != NONE, u - k["prv+"], u + 3).float()
    # minus start, CAT at u (anchor u + 2): stop v <= u - 3: length u + 3 - v
    start_m = torch.where(k["prv-"] != NONE, u + 3 - k["prv-"], u + 3).float()
    # minus stop at u (anchor u + 2): next minus stop v >= u + 3: length v - u
    stop_mi = torch.where(k["nxt-"] != -NONE, k["nxt-"] - u, L - u).float()
    out = {"start+": torch.where(trip == _ATG, start_p, zero),
           "stop+": torch.where(k["stop+"], stop_pl, zero)}
    # minus codons: their anchor is the codon's right end (u + 2)
    out["start-"] = _shift(torch.where(trip == _CAT, start_m, zero), 2, 0.0)
    out["stop-"] = _shift(torch.where(k["stop-"], stop_mi, zero), 2, 0.0)
    return out


def _count_at_or_before(mask: Tensor) -> Tensor:
    """(B, T) bool -> (B, T) int64: the number of v <= u with v = u (mod 3) and mask[v]."""
    B, T = mask.shape
    T3 = -(-T // 3) * 3
    m = torch.nn.functional.pad(mask.long(), (0, T3 - T)).view(B, T3 // 3, 3)
    return m.cumsum(1).reshape(B, T3)[:, :T]


def upstream_starts(codes: Tensor, lengths: Tensor | None = None) -> dict[str, Tensor]:
    """Per base, (B, T) int64: at a start codon's anchor the number of in-frame start
    codons upstream of it (in the transcript's direction) and after the nearest in-frame
    stop codon upstream (the sequence's edge where there is none); -1 elsewhere.

        start+  an ATG beginning at u: ATGs at v = u (mod 3), s < v < u, s the last
                TAA/TAG/TGA beginning at or before u - 3
        start-  a CAT beginning at u (anchor u + 2): CATs at v = u (mod 3), u < v < s,
                s the first TTA/CTA/TCA beginning at or after u + 3
    """
    k = _codon_scan(codes, lengths)
    trip, T = k["trip"], codes.shape[1]
    atg, cat = trip == _ATG, trip == _CAT
    none = torch.full_like(trip, -1)
    # plus: ATGs at or before u minus u itself, minus those at or before the stop
    cnt = _count_at_or_before(atg)
    prv = k["prv+"]
    before_stop = torch.gather(cnt, 1, prv.clamp(min=0)) * (prv != NONE)
    plus = torch.where(atg, cnt - 1 - before_stop, none)
    # minus: the same on the mirrored sequence (v -> T - 1 - v keeps residues apart)
    cnt_r = _count_at_or_before(cat.flip(1)).flip(1)  # CATs at v >= u, v = u (mod 3)
    nxt = k["nxt-"]
    after_stop = torch.gather(cnt_r, 1, nxt.clamp(max=T - 1)) * (nxt != -NONE)
    minus = _shift(torch.where(cat, cnt_r - 1 - after_stop, none), 2, -1)
    return {"start+": plus, "start-": minus}


N_UPSTREAM = 4  # 0, 1, 2, 3 or more in-frame start codons upstream


def _codon_labels(layout, sites) -> list[tuple[str, list[int]]]:
    """(kind, its internal labels) of each site kind per strand, e.g. ("start+", [...])."""
    return [(f"{site}{st}", kind_labels(layout, f"{site}{st}"))
            for site in sites for st in layout.strands]


class UpstreamStartScores(nn.Module):
    """Learned start-codon scores of the number of in-frame start codons upstream in the
    same ORF (upstream_starts; module docstring), added to every frame of the start
    labels at the codon's anchor.

    Args:
        layout: the gene model's FrameLayout.
    """

    def __init__(self, layout):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(N_UPSTREAM))
        self.n_labels = len(layout.kind)
        self.targets = _codon_labels(layout, ("start",))

    def forward(self, codes: Tensor, lengths: Tensor | None = None) -> Tensor:
        """codes (B, T) -> (B, T, C) additive emission scores."""
        return label_sum(self.parts(codes, lengths), self.n_labels)

    def parts(self, codes: Tensor, lengths: Tensor | None = None) -> list:
        """The scores as (values (B, T), labels) pairs (labelsum.label_sum's)."""
        n = upstream_starts(codes, lengths)
        parts = []
        for key, labels in self.targets:
            k = n[key]
            parts.append((self.weight[k.clamp(0, N_UPSTREAM - 1)] * (k >= 0), labels))
        return parts


def hat_basis(length: Tensor) -> Tensor:
    """(...) lengths in bp (> 0) -> (..., N_KNOTS) piecewise-linear interpolation weights
    over knots evenly spaced in log-length (flat outside); rows sum to 1."""
    x = (length.clamp(min=1.0).log() - LOG_MIN) / (LOG_MAX - LOG_MIN) * (N_KNOTS - 1)
    x = x.clamp(0, N_KNOTS - 1)
    lo = x.floor().clamp(max=N_KNOTS - 2)
    frac = x - lo
    # the two weights written into zeros (the values of the masked sum
    # (knots == lo) * (1 - frac) + (knots == lo + 1) * frac, bit for bit, at a fifth
    # of its time on a chromosome: no (..., N_KNOTS) masks)
    at = lo.long()[..., None]
    out = torch.zeros(*length.shape, N_KNOTS, dtype=length.dtype, device=length.device)
    out.scatter_(-1, at, (1 - frac)[..., None])
    return out.scatter_(-1, at + 1, frac[..., None])


class OrfLengthScores(nn.Module):
    """Learned start- and stop-codon scores of ORF length (module docstring), added to
    the emissions of every frame of the start and stop labels at the codon's anchor.

    Args:
        layout: the gene model's FrameLayout.
    """

    def __init__(self, layout):
        super().__init__()
        self.knots = nn.Parameter(torch.zeros(2, N_KNOTS))  # start, stop
        self.n_labels = len(layout.kind)
        self.targets = [(0 if key.startswith("start") else 1, key, labels)
                        for key, labels in _codon_labels(layout, ("start", "stop"))]

    def forward(self, codes: Tensor, lengths: Tensor | None = None) -> Tensor:
        """codes (B, T) -> (B, T, C) additive emission scores."""
        return label_sum(self.parts(codes, lengths), self.n_labels)

    def parts(self, codes: Tensor, lengths: Tensor | None = None) -> list:
        """The scores as (values (B, T), labels) pairs (labelsum.label_sum's)."""
        ln = orf_lengths(codes, lengths)
        parts = []
        for i, key, labels in self.targets:
            v = ln[key]
            parts.append(((hat_basis(v.to(self.knots.dtype)) @ self.knots[i]) * (v > 0),
                          labels))
        return parts
