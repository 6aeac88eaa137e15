"""Coding-content scores of the gene model's CRF head (`crf.content_scores`).

The classic gene finder's content sensor: a three-periodic Markov chain of order ORDER
for coding sequence (one table per codon position, read in the transcript's direction)
against a homogeneous one for sequence outside genes, both counted by `semiseg train` at
the training windows' gold labels (both strands, each in its own direction). At a base
t read as codon position j of a gene on strand s, the score is

    log P_coding(x_t | the ORDER bases before it, j) - log P_outside(x_t | the same bases)

(x and its context read on strand s), and the CDS labels' emissions get it times a
learned weight (initially 1). Summed along a coding segment these are the log-odds of
that reading frame against non-coding sequence: what tells a real gene from the ORF in
its shadow on the other strand, or in another frame, from a few hundred genes, where a
convolution would need far more. Bases whose context holds an N, or runs off the
sequence, score 0.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from ..genome.codes import reverse_complement_codes
from .devconst import ids_on
from .frames import INTRON_ANY

ORDER = 5
WORDS = 4 ** (ORDER + 1)
PSEUDO = 1.0


def word_ids(codes: Tensor) -> Tensor:
    """(B, T) base codes (A C G T = 0..3, else 4) -> (B, T) id of the (ORDER+1)-mer ending
    at each base (base-4, oldest base first), -1 where it runs off the start or holds an
    N."""
    B, T = codes.shape
    ids = torch.full((B, T), -1, dtype=torch.long, device=codes.device)
    n = T - ORDER
    if n <= 0:
        return ids
    acc = torch.zeros(B, n, dtype=torch.long, device=codes.device)
    bad = torch.zeros(B, n, dtype=torch.bool, device=codes.device)
    for k in range(ORDER + 1):
        part = codes[:, k:k + n]
        acc = acc * 4 + part.clamp(0, 3)
        bad |= (part < 0) | (part > 3)
    ids[:, ORDER:] = acc.masked_fill(bad, -1)
    return ids


def _reverse_complement(codes: Tensor) -> Tensor:
    """(B, T) codes of the minus strand read in its own direction."""
    return reverse_complement_codes(codes)


def _strand_words(onehots, golds):
    """Per training window and strand: (strand, word ids read in that strand's direction
    at each base (-1: none), the gold codes, the positions)."""
    for x, y in zip(onehots, golds):
        x = np.asarray(x, np.float32)[:, :4]
        y = np.asarray(y)
        code = torch.from_numpy(np.where(x.max(1) > 0.5, x.argmax(1), 4))[None]
        t = np.arange(len(y))
        for s in "+-":
            ids = (word_ids(code) if s == "+" else
                   word_ids(_reverse_complement(code)).flip(-1))[0].numpy()
            yield s, ids, y, t


def _cond(c: np.ndarray) -> np.ndarray:
    """log P(base | context) from word counts: PSEUDO added, normalised over the last
    base of each word."""
    c = (c + PSEUDO).reshape(*c.shape[:-1], WORDS // 4, 4)
    return np.log(c / c.sum(-1, keepdims=True)).reshape(*c.shape[:-2], WORDS)


def count_content(onehots, golds, layout) -> tuple[np.ndarray, dict]:
    """The log-odds table (3, WORDS): entry [j, w] for the word w = (context, base) read
    at codon position j, log P_coding(base | context, j) - log P_outside(base | context),
    from the gold CDS bases (codon positions from their frame) and the gold outside
    bases of the training windows, both strands; PSEUDO added to every count. Returns
    the table and {"coding": n, "outside": n} bases counted (zeros if either is 0)."""
    kinds = [layout.kind_names[k] for k in layout.kind]
    frame = np.asarray(layout.frame)
    cds = {s: np.asarray([i for i, k in enumerate(kinds) if k == f"CDS{s}"]) for s in "+-"}
    outside = np.asarray([i for i, k in enumerate(kinds) if k.startswith("outside:")])
    coding = np.zeros((3, WORDS))
    background = np.zeros(WORDS)
    for s, ids, y, t in _strand_words(onehots, golds):
        ok = ids >= 0
        if len(outside):
            sel = ok & np.isin(y, outside)
            background += np.bincount(ids[sel], minlength=WORDS)
        if s in layout.strands and len(cds[s]):
            sel = ok & np.isin(y, cds[s])
            pos = (t[sel] - frame[y[sel]]) % 3  # position in the left-to-right codon
            j = pos if s == "+" else 2 - pos
            np.add.at(coding, (j, ids[sel]), 1)
    n = {"coding": int(coding.sum()), "outside": int(background.sum())}
    if not n["coding"] or not n["outside"]:
        return np.zeros((3, WORDS), np.float32), n
    return (_cond(coding) - _cond(background)[None]).astype(np.float32), n


def intron_and_outside_codes(layout) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The gold codes of intron insides per strand (INTRON_ANY, any phase, and the
    phase-coded ones) and of outside bases."""
    kinds = [layout.kind_names[k] for k in layout.kind]
    intron = {s: np.asarray([INTRON_ANY[s]] + [i for i, k in enumerate(kinds)
                                               if k == f"intron{s}"]) for s in "+-"}
    outside = np.asarray([i for i, k in enumerate(kinds) if k.startswith("outside:")])
    return intron, outside


def count_intron_content(onehots, golds, layout) -> tuple[np.ndarray, dict]:
    """The intron log-odds table (WORDS,): log P_intron(base | context) - log
    P_outside(base | context), a homogeneous chain of the same order counted at the gold
    intron bases (between the splice bases, each intron read in its transcript's
    direction) against the gold outside bases, both strands; returns the table and
    {"intron": n, "outside": n} (zeros if either is 0)."""
    intron, outside = intron_and_outside_codes(layout)
    inside = np.zeros(WORDS)
    background = np.zeros(WORDS)
    for s, ids, y, _ in _strand_words(onehots, golds):
        ok = ids >= 0
        if len(outside):
            background += np.bincount(ids[ok & np.isin(y, outside)], minlength=WORDS)
        if s in layout.strands and len(intron[s]):
            inside += np.bincount(ids[ok & np.isin(y, intron[s])], minlength=WORDS)
    n = {"intron": int(inside.sum()), "outside": int(background.sum())}
    if not n["intron"] or not n["outside"]:
        return np.zeros(WORDS, np.float32), n
    return (_cond(inside) - _cond(background)).astype(np.float32), n


def strand_word_ids(codes: Tensor) -> dict[str, Tensor]:
    """(B, T) base codes -> per strand the word ids (word_ids) of the strand read in
    its own direction (the minus strand's from the reverse complement, not flipped)."""
    return {s: word_ids(codes if s == "+" else _reverse_complement(codes)) for s in "+-"}


def _read(ids: Tensor, table: Tensor, strand: str) -> Tensor:
    """Rows of `table` (WORDS, ...) at the word ids of one strand -> (B, T, ...) in the
    genome's order, 0 where the word runs off the sequence or holds an N."""
    sc = table.to(torch.float32)[ids.clamp(min=0)]
    sc = sc.masked_fill((ids < 0).view(*ids.shape, *[1] * (sc.dim() - ids.dim())), 0.0)
    return sc if strand == "+" else sc.flip(1)


def content_channels(codes: Tensor, table: Tensor, ids: dict | None = None
                     ) -> dict[str, Tensor]:
    """(B, T) base codes (A C G T = 0..3, else 4) and the (3, WORDS) table -> per strand
    a (B, T, 3) tensor: the score of each base read as codon position j = 0, 1, 2 of a
    gene on that strand (0 where the word runs off the sequence or holds an N). `ids`:
    strand_word_ids(codes) if already made."""
    ids = strand_word_ids(codes) if ids is None else ids
    return {s: _read(ids[s], table.T, s) for s in "+-"}


class ContentScores(nn.Module):
    """The coding-content scores (module docstring) as additive emissions of the CDS
    labels: the table is a buffer (saved with the model, set by train/loop.py), the weight a
    learned scalar shared by both strands. With `introns` (crf.intron_content) also the
    intron table's scores (count_intron_content) to the intron labels, times a weight of
    their own.

    Args:
        layout: the gene model's FrameLayout.
        introns: score intron bases too.
    """

    def __init__(self, layout, introns: bool = False):
        super().__init__()
        self.register_buffer("table", torch.zeros(3, WORDS))
        self.weight = nn.Parameter(torch.ones(()))
        self.strands = list(layout.strands)
        ch = {n: i for i, n in enumerate(layout.channels)}
        self.n_channels = len(layout.channels)
        self.cols = {s: [ch[f"CDS{s}.codon{j}"] for j in range(3)] for s in self.strands}
        self.intron_cols = {s: ch[f"intron{s}"] for s in self.strands
                            if introns and f"intron{s}" in ch}
        if self.intron_cols:
            self.register_buffer("intron_table", torch.zeros(WORDS))
            self.intron_weight = nn.Parameter(torch.ones(()))
        self.register_buffer("em_idx", torch.as_tensor(layout.expand_index()),
                             persistent=False)

    def set(self, table: np.ndarray, intron_table: np.ndarray | None = None) -> None:
        self.table.copy_(torch.as_tensor(table))
        if intron_table is not None and self.intron_cols:
            self.intron_table.copy_(torch.as_tensor(intron_table))

    def forward(self, codes: Tensor) -> Tensor:
        """codes (B, T) -> (B, T, C) additive emission scores of the internal labels."""
        B, T = codes.shape
        ids = strand_word_ids(codes)  # once for both tables
        sc = content_channels(codes, self.table, ids)
        q = torch.zeros(B, T, self.n_channels, device=codes.device)
        for s in self.strands:
            q[..., ids_on(self.cols[s], q.device)] = self.weight * sc[s]
        for s, col in self.intron_cols.items():
            q[..., col] = self.intron_weight * _read(ids[s], self.intron_table, s)
        idx = self.em_idx[torch.arange(T, device=codes.device) % 3].expand(B, T, -1)
        return torch.gather(q, 2, idx)
