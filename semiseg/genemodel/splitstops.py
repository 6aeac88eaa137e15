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
    carry the phase across introns); a codon is three consecutive coding bases with
    offsets 0, 1, 2, read in the transcript's sense (reverse complement on the minus
    strand)."""
    coding, intronic, _ = _kinds(layout)
    frame = np.asarray(layout.frame)
    strand = np.asarray(layout.strand)
    S = len(lab)
    out = []
    t = 0
    while t < S:
        c = lab[t]
        if c < 0 or not (coding[c] or intronic[c]):
            t += 1
            continue
        s = strand[c]
        e = t
        while e < S and lab[e] >= 0 and (coding[lab[e]] or intronic[lab[e]]) \
                and strand[lab[e]] == s:
            e += 1
        pos = np.array([p for p in range(t, e) if coding[lab[p]]], dtype=np.int64)
        if len(pos) >= 3:
            off = (pos - frame[lab[pos]]) % 3
            for i in range(len(pos) - 2):
                if off[i] != 0 or off[i + 1] != 1 or off[i + 2] != 2:
                    continue
                p = pos[i:i + 3]
                if p[2] - p[0] == 2:
                    continue  # whole in an exon: the grammar read it already
                codon = "".join(BASES[k] if k < 4 else "N" for k in codes[p])
                if s == "-":
                    codon = "".join(COMPLEMENT[b] for b in reversed(codon))
                if codon in STOPS:
                    j = 0 if p[1] - p[0] > 1 else 1  # the intron after codon base j
                    out.append((t, e, int(p[j] + 1), int(p[j + 1] - 1)))
        t = e
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
                        stats: dict | None = None) -> np.ndarray:
    """`lab` (S,) internal labels of one sequence's posterior decode with its split stop
    codons taken out (module docstring). post, allowed, proj_start: (S, C) as the
    decode read them; codes (S,) the bases. Returns new labels (the same array object
    when nothing changed); `stats` counts 'found' and 'left'."""
    layout = head.layout
    _, _, outside = _kinds(layout)
    lab = np.asarray(lab).copy()
    ok = allowed.clone()
    dev = post.device
    start_out = torch.where(torch.as_tensor(outside[:ok.shape[-1]], device=dev), 0.0,
                            -torch.inf)
    found = 0
    for _ in range(MAX_ROUNDS):
        stops = split_stops(layout, lab, codes)
        if not stops:
            break
        found += 1
        gs, ge, left, right = stops[0]
        a, b = _locus(lab, outside, gs, ge)
        best = None
        for bar in (left, right):
            trial = ok.clone()
            trial[bar, lab[bar]] = False
            seg = _decode_locus(head, post, trial, proj_start, a, b, start_out, backend)
            if seg is not None and (best is None or seg[0] > best[0]):
                best = (seg[0], seg[1], bar)
        if best is None:
            break
        ok[best[2], lab[best[2]]] = False
        lab[a:b] = best[1]
    if stats is not None:
        stats["found"] = stats.get("found", 0) + found
        stats["left"] = stats.get("left", 0) + len(split_stops(layout, lab, codes))
    return lab


def _decode_locus(head, post, allowed, proj_start, a, b, start_out, backend):
    """(score, labels (b - a,)) of the posterior decode of [a, b), entered from and
    left to outside-gene labels where it is not the sequence's own start or end, or
    None when no structure is allowed."""
    from ..crf import viterbi

    S = post.shape[0]
    g = head.decode_posteriors(post[a:b][None])
    st = None if a == 0 else start_out
    en = None if b == S else start_out
    seg = viterbi(g, head.decode_tmask, head.decode_dmask,
                  torch.tensor([b - a], device=post.device), start=st, end=en,
                  allowed=allowed[a:b][None], proj_start=proj_start[a:b][None],
                  backend=backend)
    score = float(seg.score[0])
    if not np.isfinite(score):
        return None
    return score, seg.labels[0].cpu().numpy()
