"""Stop codons split by an intron: found in a decoded gene structure and taken out.

The frame model's grammar reads codons in the genome only (genemodel/frames.py): a CDS
base's label forbids a stop codon that lies whole inside an exon, but a codon whose
bases an intron separates is never read, so a decoded transcript can hold an in-frame
stop across a splice junction (2-3 predicted genes per Mb of fly). Excluding them
exactly needs the codon's overhanging bases in the intron labels (six intron frames a
strand instead of three); this module does the cheaper thing after the decode.

For each split stop of a decoded structure, the gene's locus (the gene and
`LOCUS_MARGIN` bp either side, widened to the outside-gene bases around it and to the
frame period) is decoded again twice with the same posterior-decode grammar and
posteriors: once with the junction's left splice base barred from its label, once with
the right one; the better-scoring of the two replaces the locus (each is a structure
the grammar allows, so the score can only fall, and only the locus changes). Repeated
while stops remain, at most `MAX_ROUNDS` times a sequence; stops left after that stay
(annotate's warning names them).
"""

from __future__ import annotations

import numpy as np
import torch

from .frames import BASES

STOPS = {"TAA", "TAG", "TGA"}
COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N"}
LOCUS_MARGIN = 3000
MAX_ROUNDS = 8
CODING = ("start", "CDS", "stop")
INTRONIC = ("donor", "intron", "acceptor")


def _kinds(layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per internal label: coding (start / CDS / stop), intronic, outside genes."""
    names = [layout.kind_names[k] for k in layout.kind]
    coding = np.array([n[:-1] in CODING for n in names])
    intronic = np.array([n[:-1] in INTRONIC for n in names])
    outside = np.array([n.startswith("outside") for n in names])
    return coding, intronic, outside


def split_stops(layout, lab: np.ndarray, codes: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The stop codons split by an intron in the decoded internal labels `lab` (S,) of a
    sequence whose bases are `codes` (S,) (0-3 ACGT, 4 other): (gene start, gene end,
    the intron's first base, its last base), genome order, per split stop.

    A gene is a run of one strand's coding and intronic labels. Its coding bases, in
    genome order, each sit at codon offset (position - frame) mod 3 (the frame labels
    carry the phase across introns); a codon is three consecutive coding bases of one
    gene with offsets 0, 1, 2, read in the transcript's sense (reverse complement on
    the minus strand). Array operations throughout: it runs over whole chromosomes."""
    coding, intronic, _ = _kinds(layout)
    lab = np.asarray(lab)
    c = np.maximum(lab, 0)
    strand = np.array([{"+": 1, "-": 2}.get(x, 0) for x in layout.strand])[c]
    genic = (lab >= 0) & (coding[c] | intronic[c])
    key = np.where(genic, strand, 0)  # runs of one nonzero key are genes
    begin = genic & np.concatenate([[True], key[1:] != key[:-1]])
    gene = np.cumsum(begin) - 1  # gene index per position (where genic)
    starts = np.flatnonzero(begin)
    bounds = np.append(np.flatnonzero(key[1:] != key[:-1]) + 1, len(lab))
    ends = bounds[np.searchsorted(bounds, starts, side="right")]
    pos = np.flatnonzero((lab >= 0) & coding[c])
    if len(pos) < 3:
        return []
    off = (pos - np.asarray(layout.frame)[lab[pos]]) % 3
    g = gene[pos]
    i = np.flatnonzero((off[:-2] == 0) & (off[1:-1] == 1) & (off[2:] == 2)
                       & (g[:-2] == g[2:]) & (pos[2:] - pos[:-2] != 2))
    out = []
    for k in i:  # codons across an intron: few
        p = pos[k:k + 3]
        codon = "".join(BASES[b] if b < 4 else "N" for b in codes[p])
        if strand[p[0]] == 2:
            codon = "".join(COMPLEMENT[b] for b in reversed(codon))
        if codon in STOPS:
            j = 0 if p[1] - p[0] > 1 else 1  # the intron after codon base j
            out.append((int(starts[g[k]]), int(ends[g[k]]), int(p[j] + 1), int(p[j + 1] - 1)))
    return out


def _locus(lab: np.ndarray, outside: np.ndarray, gs: int, ge: int) -> tuple[int, int]:
    """[a, b) around the gene [gs, ge): LOCUS_MARGIN either side, then out to the next
    base the decode called outside genes (a on a multiple of 3, so the locus's frames
    are the sequence's)."""
    S = len(lab)
    out = np.append(outside, True)[lab]  # (a position with no label: as outside)

    def between(p):  # outside-gene bases on both sides of boundary p
        return out[p - 1] and out[p]
    a = max(0, gs - LOCUS_MARGIN)
    while a > 0 and not between(a):
        a -= 1
    a -= a % 3
    while a > 0 and not between(a):
        a -= 3
    a = max(0, a)
    b = min(S, ge + LOCUS_MARGIN)
    while b < S and not between(b):
        b += 1
    return a, b


def exclude_split_stops(head, lab: np.ndarray, post: torch.Tensor, allowed: torch.Tensor,
                        proj_start: torch.Tensor, codes: np.ndarray, backend: str = "auto",
                        stats: dict | None = None, scored: bool = False) -> np.ndarray:
    """`lab` (S,) internal labels of one sequence's posterior decode with its split stop
    codons taken out (module docstring): a new array. post, allowed, proj_start: (S, C)
    as the decode read them (`scored`: post is already head.decode_posteriors of the
    posteriors, which is per position; proj_start may be PeriodicRows); codes (S,) the
    bases; `stats` counts 'found' and 'left'. Each locus reads its own slice of
    `allowed` with the splice bases barred so far."""
    layout = head.layout
    _, _, outside = _kinds(layout)
    lab = np.asarray(lab).copy()
    start_out = torch.where(torch.as_tensor(outside, device=post.device), 0.0, -torch.inf)
    barred: list[tuple[int, int]] = []  # (position, label) no longer allowed
    found = 0
    for _ in range(MAX_ROUNDS):
        stops = split_stops(layout, lab, codes)
        if not stops:
            break
        found += 1
        gs, ge, left, right = stops[0]
        a, b = _locus(lab, outside, gs, ge)
        best = None
        for bar in ((left, int(lab[left])), (right, int(lab[right]))):
            ok = allowed[a:b].clone()
            for p, c in (*barred, bar):
                if a <= p < b:
                    ok[p - a, c] = False
            seg = _decode_locus(head, post, ok, proj_start, a, b, start_out, backend, scored)
            if seg is not None and (best is None or seg[0] > best[0]):
                best = (seg[0], seg[1], bar)
        if best is None:
            break
        barred.append(best[2])
        lab[a:b] = best[1]
    if stats is not None:
        stats["found"] = stats.get("found", 0) + found
        stats["left"] = stats.get("left", 0) + len(split_stops(layout, lab, codes))
    return lab


def _decode_locus(head, post, allowed, proj_start, a, b, start_out, backend, scored=False):
    """(score, labels (b - a,)) of the posterior decode of [a, b) (`allowed`: the
    locus's own), entered from and left to outside-gene labels where it is not the
    sequence's own start or end, or None when no structure is allowed."""
    from ..crf import viterbi

    S = post.shape[0]
    g = post[a:b][None] if scored else head.decode_posteriors(post[a:b][None])
    st = None if a == 0 else start_out
    en = None if b == S else start_out
    seg = viterbi(g, head.decode_tmask, head.decode_dmask,
                  torch.tensor([b - a], device=post.device), start=st, end=en,
                  allowed=allowed[None], proj_start=proj_start[a:b][None],
                  backend=backend)
    score = float(seg.score[0])
    if not np.isfinite(score):
        return None
    return score, seg.labels[0].cpu().numpy()
