"""Open-reading-frame features of a sequence, computed on the device from its one-hot.

A convolution sees a few hundred bases; whether a base lies in a long open reading
frame, and whether an ATG is the first one after the previous in-frame stop, depends on
kilobases. These features hand the gene encoder (model.GeneEncoder) that context
directly. For each strand s and each codon position j (0, 1, 2, counted in the
transcript's direction) a base t is read as the j-th base of a codon on strand s, and
three distances (in bp, along the transcript) are measured from that codon:

    up_stop    back to the nearest in-frame stop codon upstream of it
    down_stop  on to the nearest in-frame stop codon at or downstream of it (0: it is one)
    up_atg     back to the nearest in-frame start codon upstream of it

Plus strand: upstream is to the left, codons are ATG / TAA TAG TGA read left to right.
Minus strand: upstream is to the right, codons are their reverse complements (CAT / TTA
CTA TCA) read left to right. Where no such codon exists inside the sequence the distance
runs to the sequence's edge. Each distance d becomes log(1 + d) / log(1 + 4096), so
18 channels (strand +, -; j = 0, 1, 2; the three distances) in [0, ~1.5].
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..genome.codes import START_IDS, STOP_IDS
from .devconst import isin_ids

N_ORF = 18
_SCALE = 1.0 / math.log1p(4096.0)
# triplet ids: a*16 + b*4 + c with A C G T = 0 1 2 3
_ATG, _CAT = START_IDS["+"], START_IDS["-"]
_STOP_PLUS, _STOP_MINUS = STOP_IDS["+"], STOP_IDS["-"]   # TAA TAG TGA / TTA CTA TCA


NONE = -(1 << 40)


def _last_at_or_before(mask: Tensor) -> Tensor:
    """(B, T) bool -> (B, T) int64: the largest v <= u with v = u (mod 3) and mask[v],
    else NONE."""
    B, T = mask.shape
    T3 = -(-T // 3) * 3
    idx = torch.arange(T, device=mask.device).expand(B, T)
    val = torch.where(mask, idx, torch.full_like(idx, NONE))
    val = torch.nn.functional.pad(val, (0, T3 - T), value=NONE).view(B, T3 // 3, 3)
    # each residue class as a row of its own: a scan along the last dimension (on CUDA
    # the scan along a middle one runs each of the B x 3 rows in one thread, 0.5 ms a call)
    run = torch.cummax(val.transpose(1, 2).contiguous(), dim=2).values
    return run.transpose(1, 2).reshape(B, T3)[:, :T]


def _first_at_or_after(mask: Tensor) -> Tensor:
    """(B, T) bool -> (B, T) int64: the smallest v >= u with v = u (mod 3) and mask[v],
    else -NONE. (Mirroring u -> T-1-u keeps residue classes apart.)"""
    T = mask.shape[1]
    rev = _last_at_or_before(mask.flip(1)).flip(1)
    return torch.where(rev != NONE, (T - 1) - rev, torch.full_like(rev, -NONE))


def _shift(x: Tensor, by: int, fill: int) -> Tensor:
    """y[:, t] = x[:, t - by] (by may be negative), `fill` where that is outside."""
    if by == 0:
        return x
    y = torch.full_like(x, fill)
    if by > 0:
        y[:, by:] = x[:, :-by]
    else:
        y[:, :by] = x[:, -by:]
    return y


def orf_features(onehot: Tensor, lengths: Tensor) -> Tensor:
    """(B, T, 4) one-hot A C G T (anything else all-zero) and lengths (B,) ->
    (B, T, 18) float features (module docstring), zero past each sequence's end and
    where the codon read would begin before the sequence.

    Channel order: strand (+, -), then codon position j, then (up_stop, down_stop,
    up_atg). With u the codon's first base (left end) and L the length:
    plus   up_stop = u - max{v <= u-3 stop}   (none: u + 3)
           down_stop = min{v >= u stop} - u   (none: L - u)
           up_atg = u - max{v <= u-3 ATG}     (none: u + 3)
    minus  up_stop = min{v >= u+3 stop} - u   (none: L - u)
           down_stop = u - max{v <= u stop}   (none: u + 3)
           up_atg = min{v >= u+3 CAT} - u     (none: L - u)
    v ranging over codon starts with v = u (mod 3).
    """
    B, T, _ = onehot.shape
    dev = onehot.device
    code = torch.where(onehot.amax(-1) > 0.5, onehot.argmax(-1),
                       torch.full((B, T), 4, dtype=torch.long, device=dev))
    pos = torch.arange(T, device=dev)
    L = lengths.to(dev, torch.long)[:, None]
    code = torch.where(pos[None, :] < L, code, torch.full_like(code, 4))
    trip = torch.full((B, T), -1, dtype=torch.long, device=dev)
    if T >= 3:
        a, b, c = code[:, :-2], code[:, 1:-1], code[:, 2:]
        ok = (a < 4) & (b < 4) & (c < 4)
        trip[:, :-2] = torch.where(ok, a * 16 + b * 4 + c, torch.full_like(a, -1))

    def isin(ids):
        return isin_ids(trip, ids)

    u = pos[None, :].expand(B, T)

    def back(mask, strict):  # distance back to the last codon (none: u + 3)
        v = _last_at_or_before(mask)
        if strict:
            v = _shift(v, 3, NONE)
        return torch.where(v != NONE, u - v, u + 3)

    def ahead(mask, strict):  # distance on to the next codon (none: L - u)
        v = _first_at_or_after(mask)
        if strict:
            v = _shift(v, -3, -NONE)
        return torch.where(v != -NONE, v - u, L - u)

    stop_p, stop_m = isin(_STOP_PLUS), isin(_STOP_MINUS)
    plus = (back(stop_p, True), ahead(stop_p, False), back(trip == _ATG, True))
    minus = (ahead(stop_m, True), back(stop_m, False), ahead(trip == _CAT, True))
    feats = []
    for j in range(3):  # plus: codon start u = t - j
        feats += [_shift(d, j, 0) for d in plus]
    for j in range(3):  # minus: codon start u = t - (2 - j)
        feats += [_shift(d, 2 - j, 0) for d in minus]
    d = torch.stack(feats, -1).clamp(min=0).to(torch.float32)
    out = torch.log1p(d) * _SCALE
    return out * (pos[None, :, None] < L[:, :, None]).to(out.dtype)
