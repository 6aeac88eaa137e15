"""Gene signals at the base: position weight matrices counted at the training genes.

A genome has few introns (yeast chrII: 23 usable ones) and a few hundred genes, too few
for a convolution to learn splice sites or a start codon's context from the CRF's
gradient alone. What a gene finder does instead is count: the bases around the training
sites, read in the transcript's direction, give a position weight matrix whose
log-odds against the genome's base frequencies score any candidate site.

Sites and their windows (transcript direction; offsets from the site's *anchor*, its
first base in the transcript's direction):

    donor      -3 .. +7    the intron's first base (the G of GT)
    acceptor  -24 .. +3    the intron's last base (the G of AG)
    start      -9 .. +5    the A of the ATG
    stop       -6 .. +5    the stop codon's first base

An intron's branch point lies upstream of its acceptor at a varying distance, so it gets
no fixed window: `count_branch_pwm` takes the 7-mer most over-represented (against the
windows' own 7-mer frequencies) in the BRANCH_FAR bases before the training acceptors,
aligns each intron's closest match to it (BRANCH_NEAR to BRANCH_FAR bases upstream of
the acceptor) and counts a 7-column matrix; an acceptor's branch score is the best
matrix score in that range (yeast chrII: TACTAAC, found in most introns).

Two users: `splice.SpliceSignals` feeds donor and acceptor scores to the gene encoder as
input channels (`model.splice_features`), and `SiteScores` adds each site's score, times
a learned weight per site, to its labels' emissions in the CRF head
(`crf.site_scores`; the branch score goes to the acceptor labels), so that a site's
evidence reaches the segment score directly.
`count_site_pwms` reads the gold frame codes of the training windows
(genemodel/frames.py) and their one-hot sequence.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from ..genome.codes import STARTS, STOPS, codon_id
from .devconst import isin_ids
from .labelsum import kind_labels, label_sum

# bases before the anchor, bases from the anchor on (anchor included)
SITES = {"donor": (3, 8), "acceptor": (24, 4), "start": (9, 6), "stop": (6, 6)}
PSEUDO = 0.5
BRANCH_WIDTH, BRANCH_NEAR, BRANCH_FAR = 7, 10, 80
BRANCH_MIN_MATCH = BRANCH_WIDTH - 1  # weak_branch: fewer consensus bases than this
# triplet ids of a codon read left to right: a*16 + b*4 + c with A C G T = 0 1 2 3
_TRIPLETS = {"start": {s: (STARTS[s],) for s in "+-"}, "stop": STOPS}
_trip_id = codon_id


def windows(onehot: np.ndarray, pos: np.ndarray, before: int, after: int,
            minus: bool) -> np.ndarray:
    """(n, before + after, 4) one-hot windows in the transcript's direction around `pos`
    (plus: pos - before .. pos + after - 1; minus: the reverse complement of
    pos - after + 1 .. pos + before), zero where they leave the sequence."""
    L = before + after
    out = np.zeros((len(pos), L, 4), np.float32)
    T = len(onehot)
    for i, p in enumerate(pos):
        lo = p - before if not minus else p - after + 1
        a, b = max(lo, 0), min(lo + L, T)
        if a >= b:
            continue
        w = np.zeros((L, 4), np.float32)
        w[a - lo:b - lo] = onehot[a:b]
        out[i] = w[::-1, ::-1] if minus else w  # A C G T reversed is the complement
    return out


def anchors(gold: np.ndarray, codes, minus: bool) -> np.ndarray:
    """Anchor positions of a site kind in one window's gold codes: the first base in the
    transcript's direction of each run of `codes` (plus: a run's left end; minus: its
    right end). 1-bp sites are runs of one."""
    hit = np.isin(gold, codes)
    if not hit.any():
        return np.zeros(0, np.int64)
    prev = np.concatenate([[False], hit[:-1]])
    nxt = np.concatenate([hit[1:], [False]])
    return np.flatnonzero(hit & ~(nxt if minus else prev))


def site_windows(windows: dict | None = None) -> dict:
    """Each site's (bases before its anchor, bases from it on): SITES with `windows`
    ({site: (before, after)}, crf.site_windows) replacing some."""
    out = dict(SITES)
    for k, v in (windows or {}).items():
        out[k] = (int(v[0]), int(v[1]))
    return out


def count_site_pwms(onehots, golds, layout, sites=tuple(SITES), order: int = 0,
                    sizes: dict | None = None) -> tuple[dict, dict]:
    """Log-odds matrices {site: (4 ** (order + 1), L)} and site counts {site: n} from
    training windows.

    onehots: per window a (T, 4) array (A, C, G, T); golds: per window its gold frame
    codes (T,). Both strands' sites count into one matrix (read in the transcript's
    direction). order 0: each base alone, against the windows' base composition (rows
    A C G T). order 1: each base given the base before it in the transcript's direction
    (the window's first base given the base before the window), against the same
    conditional frequencies of both strands of the windows (row prev * 4 + base).
    Site counts get PSEUDO per cell. A site never seen gets a matrix of zeros (no
    evidence either way). `sizes` replaces SITES' windows (site_windows).
    """
    if order not in (0, 1):
        raise ValueError(f"site matrices of order {order}: only 0 and 1")
    win = site_windows(sizes)
    kinds = [layout.kind_names[k] for k in layout.kind]
    codes = {f"{s}{st}": np.asarray([i for i, k in enumerate(kinds) if k == f"{s}{st}"])
             for s in sites for st in "+-"}
    R = 4 ** (order + 1)
    counts = {s: np.zeros((sum(win[s]), R)) for s in sites}
    n = {s: 0 for s in sites}
    bg = np.zeros(R)
    for x, y in zip(onehots, golds):
        x = np.asarray(x, np.float32)[:, :4]
        y = np.asarray(y)
        bg += _pair_counts(x) if order else x.sum(0)
        for s in sites:
            for st in "+-":
                c = codes[f"{s}{st}"]
                if not len(c):
                    continue
                pos = anchors(y, c, st == "-")
                if not len(pos):
                    continue
                before, after = win[s]
                w = windows(x, pos, before + order, after, minus=st == "-")
                if order:  # (n, L + 1, 4) -> pairs (n, L, 16) of (base before, base)
                    w = (w[:, :-1, :, None] * w[:, 1:, None, :]).reshape(len(pos), -1, 16)
                counts[s] += w.sum(0)
                n[s] += len(pos)
    if order:  # P(base | base before), from both strands' pairs
        bg = bg.reshape(4, 4) + 1.0
        bg = (bg / bg.sum(1, keepdims=True)).reshape(-1)
    else:
        bg = (bg + 1.0) / (bg.sum() + 4.0)
    mats = {}
    for s in sites:
        if not n[s]:
            mats[s] = np.zeros((R, sum(win[s])), np.float32)
            continue
        c = (counts[s] + PSEUDO).reshape(len(counts[s]), -1, 4)  # (L, contexts, base)
        p = (c / c.sum(-1, keepdims=True)).reshape(len(c), R)
        mats[s] = np.log(p / bg[None, :]).T.astype(np.float32)  # (R, L)
    return mats, n


def _pair_counts(x: np.ndarray) -> np.ndarray:
    """(T, 4) one-hot -> (16,) counts of adjacent pairs (base, next base) on both
    strands (the minus strand's pairs: the reverse complement's)."""
    if len(x) < 2:
        return np.zeros(16)
    plus = np.einsum("ta,tb->ab", x[:-1], x[1:])
    minus = plus.T[::-1, ::-1]  # (b, a) read on the other strand: (comp b, comp a)
    return (plus + minus).reshape(-1)


def _kmer_ids(x: np.ndarray, k: int) -> np.ndarray:
    """(T, 4) one-hot -> (T - k + 1,) ids of the k-mers starting at each base (base-4
    number), -1 where one holds a base other than A, C, G, T."""
    code = np.where(x.max(1) > 0.5, x.argmax(1), -1)
    n = len(code) - k + 1
    if n <= 0:
        return np.zeros(0, np.int64)
    ids = np.zeros(n, np.int64)
    bad = np.zeros(n, bool)
    for j in range(k):
        c = code[j:j + n]
        ids = ids * 4 + np.maximum(c, 0)
        bad |= c < 0
    return np.where(bad, -1, ids)


def count_branch_pwm(onehots, golds, layout) -> tuple[np.ndarray, str]:
    """The branch-point matrix (4, BRANCH_WIDTH) of the training introns and its seed
    k-mer ("" and zeros when fewer than 3 introns, or no k-mer is in at least a fifth of
    them and over-represented).

    The region of an intron is the BRANCH_FAR bases before its acceptor in the
    transcript's direction; motif starts BRANCH_NEAR..BRANCH_FAR bases upstream of the
    acceptor. Seed: the k-mer (k = BRANCH_WIDTH) present in the most regions relative to
    the number expected from its frequency in the training windows (both strands).
    Matrix: each region's closest match to the seed (fewest mismatches, then nearest the
    acceptor), counted with PSEUDO per base, log-odds against the base composition.
    """
    k = BRANCH_WIDTH
    kinds = [layout.kind_names[c] for c in layout.kind]
    regions, bg, kmer_bg = [], np.zeros(4), np.zeros(4 ** k)
    for x, y in zip(onehots, golds):
        x = np.asarray(x, np.float32)[:, :4]
        y = np.asarray(y)
        bg += x.sum(0)
        for xx in (x, x[::-1, ::-1]):  # both strands' k-mers
            ids = _kmer_ids(np.ascontiguousarray(xx), k)
            kmer_bg += np.bincount(ids[ids >= 0], minlength=4 ** k)
        for st in "+-":
            codes = [i for i, n in enumerate(kinds) if n == f"acceptor{st}"]
            if not codes:
                continue
            pos = anchors(y, codes, st == "-")
            if len(pos):
                regions += list(windows(x, pos, BRANCH_FAR, 0, minus=st == "-"))
    zero = np.zeros((4, k), np.float32)
    if len(regions) < 3:
        return zero, ""
    starts = BRANCH_FAR - BRANCH_NEAR + 1  # motif starts per region
    present = np.zeros(4 ** k)
    region_ids = []
    for r in regions:
        ids = _kmer_ids(r, k)[:starts]
        region_ids.append(ids)
        present[np.unique(ids[ids >= 0])] += 1
    freq = kmer_bg / max(1.0, kmer_bg.sum())
    enrich = (present + 0.5) / (len(regions) * starts * freq + 0.5)
    enrich[present < max(2, len(regions) / 5)] = 0
    if enrich.max() <= 2.0:
        return zero, ""
    seed = int(enrich.argmax())
    seed_bases = np.array([(seed >> (2 * (k - 1 - j))) & 3 for j in range(k)])
    counts = np.zeros((k, 4))
    for r in regions:
        code = np.where(r.max(1) > 0.5, r.argmax(1), -1)
        best, at = k + 1, -1
        for i in range(starts):  # nearest the acceptor wins ties
            mism = int((code[i:i + k] != seed_bases).sum())
            if mism <= best:
                best, at = mism, i
        counts += r[at:at + k]
    bg = (bg + 1.0) / (bg.sum() + 4.0)
    c = counts + PSEUDO
    p = c / c.sum(1, keepdims=True)
    return (np.log(p / bg[None, :]).T.astype(np.float32),
            "".join("ACGT"[b] for b in seed_bases))


def branch_scores(x: Tensor, pwm: Tensor, minus: bool) -> Tensor:
    """(B, 4, T) one-hot -> (B, T): for an acceptor at t, the best branch-matrix score of
    a motif starting BRANCH_NEAR..BRANCH_FAR bases upstream of t in the transcript's
    direction (plus: to the left; minus: to the right); 0 stands for windows off the
    sequence."""
    s = pwm_scores(x, pwm, 0, minus)  # a motif's score at its first base (transcript dir)
    span = BRANCH_FAR - BRANCH_NEAR + 1
    if not minus:  # max over s[t - FAR .. t - NEAR]
        padded = nn.functional.pad(s, (BRANCH_FAR, 0))
        m = nn.functional.max_pool1d(padded[:, None], span, stride=1)[:, 0]
        return m[:, :s.shape[1]]
    padded = nn.functional.pad(s, (0, BRANCH_FAR))  # max over s[t + NEAR .. t + FAR]
    m = nn.functional.max_pool1d(padded[:, None], span, stride=1)[:, 0]
    return m[:, BRANCH_NEAR:BRANCH_NEAR + s.shape[1]]


def pwm_scores(x: Tensor, pwm: Tensor, before: int, minus: bool) -> Tensor:
    """(B, 4, T) one-hot (float) -> (B, T): at each base t, the matrix's score of the
    window anchored at t (read on the minus strand: the reverse complement), zero-padded
    off the sequence. A matrix of 16 rows is of order 1 (count_site_pwms): row prev * 4
    + base over the pairs (base before, base), the base before read in the transcript's
    direction too."""
    order = {4: 0, 16: 1}[pwm.shape[0]]
    L = pwm.shape[1]
    chans = x if order == 0 else _pairs(x)
    if minus:  # the site read on the other strand: the matrix reverse-complemented
        pwm = _complement_rows(pwm, order).flip(1)
        before = L - 1 - before - order  # a minus pair (comp b, comp a) is the plus one after
    w = pwm.to(x.dtype)[None]  # (1, rows, L)
    return nn.functional.conv1d(nn.functional.pad(chans, (before, L - 1 - before)), w)[:, 0]


def _pairs(x: Tensor) -> Tensor:
    """(B, 4, T) one-hot -> (B, 16, T): channel a * 4 + b at t is base a at t - 1 and b at
    t (nothing at t = 0)."""
    B, _, T = x.shape
    prv = nn.functional.pad(x[:, :, :-1], (1, 0))
    return (prv[:, :, None, :] * x[:, None, :, :]).reshape(B, 16, T)


def _complement_rows(pwm: Tensor, order: int) -> Tensor:
    """The rows of a matrix read on the other strand: order 0, base a -> its complement
    3 - a (A C G T reversed); order 1, the pair (a, b) of the plus strand is the pair
    (3 - b, 3 - a) in the minus strand's direction."""
    if order == 0:
        return pwm.flip(0)
    L = pwm.shape[1]
    return pwm.view(4, 4, L).flip(0, 1).transpose(0, 1).reshape(16, L)


class SiteScores(nn.Module):
    """The CRF head's site scores (`crf.site_scores`): for each site kind and strand, its
    matrix score at the anchor, times a learned weight per kind (both strands share it,
    initially 1: the log-odds as a gene finder adds them), added to the emissions of that
    kind's internal labels (every frame); the acceptor labels also get the branch score
    (branch_scores) times its own weight. A start or stop codon's score is placed only
    where that codon begins (its anchor), so a 3-bp codon segment collects it once.

    Args:
        layout: the gene model's FrameLayout.
        order: 0, independent bases; 1, each base given the one before it
            (crf.site_order; count_site_pwms).
        windows: {site: (before, after)} replacing SITES' (crf.site_windows).
    """

    def __init__(self, layout, order: int = 0, windows: dict | None = None):
        super().__init__()
        self.names = [*SITES, "branch"]
        self.order, self.windows = order, site_windows(windows)
        for s in SITES:
            self.register_buffer(f"pwm_{s}", torch.zeros(4 ** (order + 1),
                                                         sum(self.windows[s])))
        self.register_buffer("pwm_branch", torch.zeros(4, BRANCH_WIDTH))
        self.weight = nn.Parameter(torch.ones(len(self.names)))
        self.n_labels = len(layout.kind)
        # (score name, strand, the internal labels it is added to)
        self.targets = [(s, st, kind_labels(layout, f"{'acceptor' if s == 'branch' else s}{st}"))
                        for s in self.names for st in layout.strands]

    def set(self, mats: dict) -> None:
        """Copy counted matrices ({site: (4, L)}: count_site_pwms, and "branch":
        count_branch_pwm) into the buffers."""
        for s, m in mats.items():
            getattr(self, f"pwm_{s}").copy_(torch.as_tensor(m))

    def weak_branch(self, codes: Tensor) -> Tensor:
        """codes (B, T) -> (B, T, C) float: 1 at the acceptor labels of each strand where
        no 7-mer BRANCH_NEAR..BRANCH_FAR bases upstream (transcript direction) matches
        the branch matrix's consensus (its best base per column; yeast TACTAAC) at
        BRANCH_MIN_MATCH or more bases, else 0; all 0 when no branch matrix was counted.
        (annotate.branch_penalty takes a log-score from such introns.)"""
        B, T = codes.shape
        if not bool(self.pwm_branch.any()):
            return torch.zeros(B, T, self.n_labels, device=codes.device)
        x = nn.functional.one_hot(codes.clamp(max=4), 5)[..., :4].transpose(1, 2).float()
        cons = nn.functional.one_hot(self.pwm_branch.argmax(0), 4).T.float()  # (4, width)
        parts = []
        for s, st, labels in self.targets:
            if s == "branch":  # (one per strand: never no pairs)
                matches = branch_scores(x, cons, st == "-")  # bases matched, best motif
                parts.append(((matches < BRANCH_MIN_MATCH - 0.5).float(), labels))
        return label_sum(parts, self.n_labels)

    def forward(self, codes: Tensor) -> Tensor:
        """codes (B, T) int64 (A C G T = 0..3, anything else 4) -> (B, T, C) additive
        emission scores."""
        return label_sum(self.parts(codes), self.n_labels)

    def parts(self, codes: Tensor) -> list:
        """The scores as (values (B, T), labels) pairs (labelsum.label_sum's)."""
        B, T = codes.shape
        x = nn.functional.one_hot(codes.clamp(max=4), 5)[..., :4].transpose(1, 2).float()
        trip = torch.full((B, T), -1, dtype=torch.long, device=codes.device)
        if T >= 3:
            a, b, c = codes[:, :-2], codes[:, 1:-1], codes[:, 2:]
            ok = (a < 4) & (b < 4) & (c < 4)
            trip[:, :-2] = torch.where(ok, a * 16 + b * 4 + c, torch.full_like(a, -1))
        parts = []
        for s, st, labels in self.targets:
            if s == "branch":
                sc = branch_scores(x, self.pwm_branch, st == "-")
            else:
                sc = pwm_scores(x, getattr(self, f"pwm_{s}"), self.windows[s][0], st == "-")
            if s in _TRIPLETS:  # only at the anchor of such a codon
                at = isin_ids(trip, [_trip_id(t) for t in _TRIPLETS[s][st]])
                if st == "-":  # the codon's anchor is its right end
                    at = torch.nn.functional.pad(at[:, :-2], (2, 0)) if T >= 3 else at & False
                sc = sc * at
            parts.append((self.weight[self.names.index(s)] * sc, labels))
        return parts
