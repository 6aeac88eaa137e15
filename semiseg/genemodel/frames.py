"""Reading frames: the internal labels of a frame-aware gene model and the sequence rules.

A gene-structure scheme's coding labels (role CDS, one per strand) become, inside the
model, six *kinds* per strand, each in three frames:

    start_f     3 bp: an ATG in frame f (minus strand: CAT, the start codon read backwards)
    CDS_f       coding bases; never the last base (in transcript direction) of a
                frame-f stop codon, so no CDS run holds one (seqmask.py)
    stop_f      3 bp: a frame-f stop codon (TAA TAG TGA; minus strand TTA CTA TCA)
    donor_g     1 bp: an intron's first base in transcript direction, the G of GT (minus
                strand: the C of AC, its last base left to right)
    intron_g    the inside of an intron
    acceptor_g  1 bp: an intron's last base in transcript direction, the G of AG (minus
                strand: the C of CT, its first base left to right)

For start, CDS and stop, f is the absolute frame: the position mod 3 at which the
segment's codons start, counted from the start of the sequence decoded. For the three
intron kinds g is the frame the coding sequence would continue in right after the
segment. Every other scheme label (intergenic, UTR, ncRNA) is one *outside* internal
label. Introns exist inside the model even when the scheme has no intron label: they
then collapse to the background label, as do their splice-site bases.

Transitions are periodic with P = 3 (docs/contract.md: `transition[(d-1) mod 3, src, dst]`, d the
duration of the destination segment), which carries the frame through introns of any
length: into a donor, intron or acceptor segment from CDS_f (or from another of the
three with frame f) the new frame is g = f + d (mod 3); out of an intron into CDS the
frame is kept. A plus-strand gene reads, left to right, outside -> start_f -> CDS_f ...
-> stop_f -> outside, with each intron CDS -> donor -> intron ... -> acceptor -> CDS; a
minus-strand one outside -> stop_f -> CDS_f ... -> start_f -> outside, with introns CDS
-> acceptor -> intron ... -> donor -> CDS. Chains CDS_f -> CDS_f (and outside ->
outside, intron -> intron) let features be longer than K. Start and stop codons are
never split by an intron, and every intron is GT..AG (the splice-site bases are looked
up in the sequence, each 1-bp splice label looking one base into the intron).

Gold labels are per position internal label codes (:data:`UNKNOWN` = any label,
``INTRON_ANY[strand]`` = any frame of that strand's intron inside), made by
:func:`~semiseg.genemodel.gold.frame_gold` (genemodel/gold.py) from the transcripts of
an annotation. Frames in gold codes are absolute (chromosome coordinates);
:meth:`FrameLayout.shift` makes them relative to a window's start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import SemisegError

UNKNOWN = -1
INTRON_ANY = {"+": -2, "-": -3}
KINDS = ("start", "CDS", "stop", "donor", "intron", "acceptor")
# exon types (crf.exon_types), in the transcript's sense (so the same on both strands):
# the coding bases of an exon that holds the start codon (FIRST) and / or the stop codon
# (LAST); an internal exon lies between two introns
EXONS = ("single", "initial", "internal", "terminal")
FIRST = (0, 1)
LAST = (0, 3)
INTRONIC = ("donor", "intron", "acceptor")
# the splice-site kind at an intron's left / right end (genome order), and its two bases
# (the splice label's own base and its neighbour inside the intron), per strand
SPLICE_LEFT = {"+": ("donor", "GT"), "-": ("acceptor", "CT")}
SPLICE_RIGHT = {"+": ("acceptor", "AG"), "-": ("donor", "AC")}
# a start or stop codon may begin only at a position of its frame: elsewhere its
# segments get this boundary score (proj_start), finite as docs/contract.md asks, and far below
# any score a real segmentation reaches
MISALIGNED = -1.0e4
BASES = "ACGT"  # base codes 0..3; 4 = anything else (N)


@dataclass
class FrameLayout:
    """Internal labels of the frame model for a label scheme, and the tables that map
    between them, the scheme's labels and the encoder's output channels.

    Attributes:
        names: internal label names (e.g. ``CDS+_1``).
        kind: per internal label, its kind index into :attr:`kind_names`.
        frame: per internal label, its frame 0..2 (-1 for outside labels).
        strand: per internal label, ``+``, ``-`` or ``.``.
        scheme_label: per internal label, the scheme label it collapses to.
        kind_names: ``outside:<label>`` for each outside label, then ``start+``, ``CDS+``,
            ``stop+``, ``donor+``, ``intron+``, ``acceptor+`` (and the ``-`` ones) for
            each coding strand.
        channels: names of the encoder's output channels (see :meth:`expand_index`).
    """

    names: list[str] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    frame: list[int] = field(default_factory=list)
    strand: list[str] = field(default_factory=list)
    scheme_label: list[int] = field(default_factory=list)
    kind_names: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    strands: list[str] = field(default_factory=list)
    min_intron: int = 1
    # run tails (crf.run_tails): per internal label, the label whose run it continues
    # (itself for every other label); see add_tails
    base: list[int] = field(default_factory=list)
    # exon types (crf.exon_types): per internal label, its index into EXONS for coding
    # bases (CDS and their run tails), -1 elsewhere and for every label without types
    exon: list[int] = field(default_factory=list)

    @classmethod
    def from_scheme(cls, scheme, tails: bool = False, exon_types: bool = False,
                    long_introns: bool = False) -> FrameLayout:
        """The layout of a gene_structure scheme. tails: run tails (add_tails);
        exon_types: the coding bases in four labels per frame, one per exon type
        (EXONS: single, initial, internal, terminal), each with its own length and
        transition scores (param_kinds), the grammar keeping each exon's type from the
        codon or splice site on either side. long_introns (with tails): a second run
        tail per intron label (add_tails)."""
        if scheme.kind != "gene_structure":
            raise SemisegError(f"crf.frames: reading frames need a gene_structure label "
                               f"scheme; {scheme.name!r} is of kind {scheme.kind!r}")
        lay = cls(min_intron=max(1, int(scheme.min_intron)))
        coding = [s for s in ("+", "-") if any(r == "CDS" and st in (s, ".")
                                               for r, st in zip(scheme.roles, scheme.strands))]
        if not coding:
            raise SemisegError(f"crf.frames: the label scheme {scheme.name!r} has no label of "
                               "role CDS, so there is no reading frame to model")
        if scheme.background is None:
            raise SemisegError(f"crf.frames: the label scheme {scheme.name!r} needs a "
                               "background label (outside genes)")
        for i, (n, r) in enumerate(zip(scheme.names, scheme.roles)):
            if r in ("CDS", "intron"):
                continue
            k = len(lay.kind_names)
            lay.kind_names.append(f"outside:{n}")
            lay.channels.append(n)
            lay._add(n, k, -1, scheme.strands[i], i)
        lay.strands = coding
        for s in coding:
            cds = scheme.role_label("CDS", s)
            intron = scheme.role_label("intron", s)
            intron = scheme.background if intron is None else intron
            for kname in KINDS:
                k = len(lay.kind_names)
                lay.kind_names.append(f"{kname}{s}")
                types = range(len(EXONS)) if exon_types and kname == "CDS" else (-1,)
                for e in types:
                    for f in range(3):
                        lay._add(f"{kname}{s}_{f}" + (f".{EXONS[e]}" if e >= 0 else ""), k, f,
                                 s, intron if kname in INTRONIC else cds, exon=e)
            lay.channels += [f"CDS{s}.codon{j}" for j in range(3)]
            lay.channels += [f"{k}{s}" for k in KINDS if k != "CDS"]
        if tails:
            lay.add_tails(long_introns)
        return lay

    def _add(self, name, kind, frame, strand, scheme_label, base=None, exon=-1):
        self.base.append(len(self.names) if base is None else base)
        self.exon.append(exon)
        self.names.append(name)
        self.kind.append(kind)
        self.frame.append(frame)
        self.strand.append(strand)
        self.scheme_label.append(scheme_label)

    # ------------------------------------------------------------ run tails
    def add_tails(self, long_introns: bool = False) -> None:
        """One segmentation per labelling for the runs that chain (outside labels, coding
        bases and intron insides): each such label X gets a tail label ``X~`` (kind
        ``outside~:N``, ``CDS~S`` or ``intron~S``) whose segments last exactly
        `tail_duration` bp. A run of X is then tails only, then one piece of X of its own
        length range: a run of L bp has
        exactly one segmentation, and its score over long lengths is the learned score
        of one tail piece per `tail_duration` bp, a geometric length tail, instead of a
        count of the many ways to chain pieces (whose log, per base, differs by label).
        Tail labels are appended after every other label, so the others keep their
        indices (gold codes never name a tail: gold_mask allows a label's tail wherever
        it allows the label).

        long_introns: each intron label also gets a second tail label ``X=`` (kind
        ``intron=S``), of the same duration and with scores of its own; a run's tails are
        all of one kind, so an intron's length tail is a mixture of two geometric ones
        (one run, two segmentations: its log-partition sums them), and a few long
        introns can have a flatter tail than the many short ones."""
        if self.has_tails:
            return
        for c in range(len(self.names)):
            kname = self.kind_names[self.kind[c]]
            if not (kname.startswith("outside:") or kname[:-1] in ("intron", "CDS")):
                continue
            tail = kname.replace("outside:", "outside~:") if kname.startswith(
                "outside:") else f"{kname[:-1]}~{kname[-1]}"
            if tail not in self.kind_names:
                self.kind_names.append(tail)
            self._add(self.names[c] + "~", self.kind_names.index(tail), self.frame[c],
                      self.strand[c], self.scheme_label[c], base=c, exon=self.exon[c])
        if long_introns:
            for c in range(len(self.names)):
                kname = self.kind_names[self.kind[c]]
                if self.base[c] != c or kname[:-1] != "intron":
                    continue
                tail = f"intron={kname[-1]}"
                if tail not in self.kind_names:
                    self.kind_names.append(tail)
                self._add(self.names[c] + "=", self.kind_names.index(tail), self.frame[c],
                          self.strand[c], self.scheme_label[c], base=c)

    @property
    def has_tails(self) -> bool:
        return any(b != c for c, b in enumerate(self.base))

    def is_tail(self) -> np.ndarray:
        return np.asarray(self.base) != np.arange(len(self))

    def end_mask(self) -> np.ndarray:
        """(C,) float: -inf for run tails (a run ends with its own label's piece, also
        at a sequence's end: else a run reaching the end would have two segmentations),
        0 elsewhere; added to the last segment's `end` score."""
        return np.where(self.is_tail(), -np.inf, 0.0)

    def _min_piece(self, c: int, K: int) -> int:
        """The shortest segment of chaining label c (its tail's base)."""
        kname = self.kind_names[self.kind[self.base[c]]]
        return self._intron_inside(K) if kname[:-1] == "intron" else 1

    def tail_duration(self, c: int, K: int) -> int:
        """The one duration of tail label c: K - m + 1, m the shortest piece of its base
        (so that n tails and a last piece of m..K bp give each length once)."""
        return K - self._min_piece(c, K) + 1

    @property
    def has_exon_types(self) -> bool:
        return any(e >= 0 for e in self.exon)

    def param_kinds(self) -> tuple[list[str], list[int]]:
        """The learned parameters' kinds: (names, per internal label its index). The
        kinds themselves, and with exon types each (coding kind, exon type) its own
        (``CDS+.internal``, ``CDS~+.internal``), so each exon type has its own length,
        transition, start and end scores; emissions stay per kind."""
        names = list(self.kind_names)
        idx = []
        for k, e in zip(self.kind, self.exon):
            if e < 0:
                idx.append(k)
                continue
            n = f"{self.kind_names[k]}.{EXONS[e]}"
            if n not in names:
                names.append(n)
            idx.append(names.index(n))
        return names, idx

    def _run_kind(self) -> list[int]:
        """Per label, the kind of its base (a tail and its label are one run kind)."""
        return [self.kind[b] for b in self.base]

    def __len__(self) -> int:
        return len(self.names)

    def kind_of(self, name: str) -> int:
        return self.kind_names.index(name)

    def index(self, kind: str, frame: int = -1, exon: int = -1) -> int:
        """Internal label of a kind name (``CDS+``) in a frame (and, with exon types, of an
        exon type), or of ``outside:<label>``."""
        return self._find(self.kind_of(kind), -1 if kind.startswith("outside") else frame,
                          exon)

    # ------------------------------------------------------------ emissions
    def expand_index(self) -> np.ndarray:
        """Channel gather by position mod 3: emission[r, c] (a (3, C) int64 table) is the
        encoder channel that scores internal label c at a position t with t mod 3 = r.
        A CDS label's channel is the codon position of t, counted in the gene's reading
        direction, so both strands' channels mean the same thing (and swap exactly under
        reverse complement); every other kind has one channel.
        """
        C = len(self)
        ch = {n: i for i, n in enumerate(self.channels)}
        em = np.zeros((3, C), np.int64)
        for c in range(C):
            kname = self.kind_names[self.kind[self.base[c]]]  # a tail scores as its label
            f, s = self.frame[c], self.strand[c]
            for r in range(3):
                if kname.startswith("outside:"):
                    em[r, c] = ch[kname[8:]]
                elif kname[:-1] == "CDS":
                    pos = (r - f) % 3  # position in the forward-strand codon
                    em[r, c] = ch[f"CDS{s}.codon{pos if s == '+' else 2 - pos}"]
                else:
                    em[r, c] = ch[kname]
        return em

    def channel_swap(self) -> np.ndarray:
        """Permutation of the encoder channels under reverse complement (+ <-> -)."""
        ch = {n: i for i, n in enumerate(self.channels)}
        return np.asarray([ch.get(n.translate(str.maketrans("+-", "-+")), ch[n])
                           for n in self.channels], np.int64)

    def begin_mask(self) -> np.ndarray:
        """(3, C) bool: whether a segment of label c may begin at a position t with
        t mod 3 = r (start and stop codons only at a codon start of their frame)."""
        m = np.ones((3, len(self)), bool)
        for c in range(len(self)):
            if self.kind_names[self.kind[c]][:-1] in ("start", "stop"):
                m[:, c] = np.arange(3) == self.frame[c]
        return m

    # ------------------------------------------------------------ structure
    def transition_mask(self, tails: bool = True) -> np.ndarray:
        """(3, C, C) float: 0 where `transition[(d-1) % 3, src, dst]` is allowed, -inf
        where the gene structure forbids it. With run tails (add_tails) a run of a
        chaining label is tails, then its one last piece: tail -> tail or last piece of
        the same run, with the rule between the two labels; nothing else leaves a tail;
        a last piece does not chain. `tails=False`: the grammar without tails (tails
        forbidden, labels chain freely), for decodes scored by posteriors alone."""
        m = self._base_transition_mask()  # every label under its base's rule
        if not self.has_tails:
            return m
        tail = self.is_tail()
        if not tails:
            m[:, tail, :] = -np.inf
            m[:, :, tail] = -np.inf
            return m
        run = np.asarray(self._run_kind())
        chaining = np.isin(run, run[tail])
        same = run[:, None] == run[None, :]
        m[:, tail[:, None] & ~same] = -np.inf  # a tail goes on in its run only
        kind = np.asarray(self.kind)
        # ...and in its own tail kind (long_introns: one of two per run)
        m[:, tail[:, None] & tail[None, :] & (kind[:, None] != kind[None, :])] = -np.inf
        m[:, ~tail[:, None] & same & chaining[:, None]] = -np.inf  # a last piece ends it
        return m

    def _base_transition_mask(self) -> np.ndarray:
        C = len(self)
        m = np.full((3, C, C), -np.inf)
        kn = [self.kind_names[k] for k in self._run_kind()]  # a tail as its label
        for a in range(C):
            for b in range(C):
                ka, kb = kn[a], kn[b]
                fa, fb = self.frame[a], self.frame[b]
                oa, ob = ka.startswith("outside:"), kb.startswith("outside:")
                sa, sb = ka[-1], kb[-1]
                for r in range(3):
                    d = r + 1  # any duration with (d-1) % 3 == r
                    ok = False
                    if oa and ob:
                        ok = True
                    elif oa:  # into a gene
                        ok = kb in ("start+", "stop-")
                    elif ob:  # out of a gene
                        ok = ka in ("stop+", "start-")
                    elif sa != sb:
                        ok = False
                    elif not self._exon_rule(ka[:-1], kb[:-1], sa, self.exon[a],
                                             self.exon[b]):
                        ok = False
                    else:
                        x, y = ka[:-1], kb[:-1]
                        plus = sa == "+"
                        left, right = SPLICE_LEFT[sa][0], SPLICE_RIGHT[sa][0]
                        if (x, y) in ((("start", "CDS"), ("CDS", "stop")) if plus
                                      else (("stop", "CDS"), ("CDS", "start"))):
                            ok = fa == fb
                        elif (x, y) in (("CDS", "CDS"), (right, "CDS")):
                            ok = fa == fb
                        elif (x, y) in (("CDS", left), (left, "intron"),
                                        ("intron", "intron"), ("intron", right)):
                            ok = fb == (fa + d) % 3
                    if ok:
                        m[r, a, b] = 0.0
        return m

    @staticmethod
    def _exon_rule(x: str, y: str, strand: str, ea: int, eb: int) -> bool:
        """Whether exon types allow kind x (type ea) -> kind y (type eb), left to right on
        one strand: coding bases keep their type through a chain; after a codon (start
        on +, stop on -) come an exon's first coding bases, after a splice site those of
        an exon after an intron; before a codon (stop on +, start on -) an exon's last,
        before a splice site those of an exon before an intron. -1: no types."""
        near, far = (FIRST, LAST) if strand == "+" else (LAST, FIRST)  # codon left / right
        codon_l, codon_r = ("start", "stop") if strand == "+" else ("stop", "start")
        if x == "CDS" and y == "CDS":
            return ea == eb
        if y == "CDS" and eb >= 0:
            return (eb in near) == (x == codon_l)
        if x == "CDS" and ea >= 0:
            return (ea in far) == (y == codon_r)
        return True

    def duration_mask(self, K: int) -> np.ndarray:
        """(K, C) float: start and stop codons last 3 bp, splice sites 1 bp, an intron's
        inside segment at least max(2, min_intron - 2) bp (the scheme's `min_intron`
        counts the splice bases too) when K reaches that, else any length (chained
        pieces of K or less must add up to every length); -inf elsewhere."""
        m = np.zeros((K, len(self)))
        inside = self._intron_inside(K)
        for c, k in enumerate(self.kind):
            if self.base[c] != c:  # a run tail: exactly tail_duration
                m[:, c] = -np.inf
                m[self.tail_duration(c, K) - 1, c] = 0.0
                continue
            kname = self.kind_names[k][:-1]
            if kname == "intron":
                m[:inside - 1, c] = -np.inf
            fixed = {"start": 3, "stop": 3, "donor": 1, "acceptor": 1}.get(kname)
            if fixed is not None:
                m[:, c] = -np.inf
                if K >= fixed:
                    m[fixed - 1, c] = 0.0
        return m

    def _intron_inside(self, K: int) -> int:
        """The shortest intron inside segment duration_mask(K) allows."""
        inside = max(2, self.min_intron - 2)
        return inside if inside <= K else 1

    def chain_duration(self, K: int) -> int:
        """The smallest K' <= K whose duration_mask(K') gives, with segments chained, the
        same per-base internal label sequences as duration_mask(K).

        Runs of a free length chain: CDS_f -> CDS_f and outside -> outside at any length;
        an intron's pieces each last at least m = `_intron_inside` bp and each piece's
        label is the frame after it, so a run keeps one label exactly when every piece
        after its first is a multiple of 3 bp long. Pieces of m..K' bp, all but the first
        a multiple of 3, add up to every length from m on when K' >= 3 * ceil(m / 3) +
        m - 1 (the first piece fills any gap); 3-bp codons and 1-bp splice bases fit.
        Where only those masks score a segmentation (the posterior decode: no learned
        transition or duration scores), a decode with K' finds the same best label
        sequence as with K at a fraction of the cost (its ring holds K' steps)."""
        m = self._intron_inside(K)
        return min(K, max(3, 3 * -(-m // 3) + m - 1))

    # ------------------------------------------------------------ frames of windows
    def shift(self, codes: np.ndarray, offset: int) -> np.ndarray:
        """Gold codes with absolute frames -> frames relative to a sequence starting at
        `offset` (frame f becomes (f - offset) mod 3)."""
        table = self._frame_table((-offset) % 3)
        return np.where(codes >= 0, table[np.maximum(codes, 0)], codes)

    def _frame_table(self, delta: int) -> np.ndarray:
        out = np.arange(len(self))
        for c in range(len(self)):
            if self.frame[c] >= 0:
                out[c] = self._find(self.kind[c], (self.frame[c] + delta) % 3, self.exon[c])
        return out

    def _find(self, kind: int, frame: int, exon: int = -1) -> int:
        for i, (k, f, e) in enumerate(zip(self.kind, self.frame, self.exon)):
            if k == kind and f == frame and e == exon:
                return i
        raise KeyError(kind, frame, exon)

    def flip(self, codes: np.ndarray) -> np.ndarray:
        """Gold codes of the reverse complement of a sequence of len(codes) bases: the
        positions reversed, + and - swapped, a codon's frame f -> (len - f) mod 3 and a
        splice base's g -> (len - g + 1) mod 3 (its frame is that of the coding sequence
        on its right, which becomes the left). Intron insides are INTRON_ANY in gold."""
        n = len(codes)
        table = np.arange(len(self))
        for c in range(len(self)):
            kname = self.kind_names[self.kind[c]]
            other = kname.translate(str.maketrans("+-", "-+"))
            if self.frame[c] < 0:
                if self.strand[c] in ("+", "-"):
                    table[c] = self._outside_twin(c)
                continue
            extra = 1 if kname[:-1] in ("donor", "acceptor") else 0
            table[c] = self._find(self.kind_names.index(other),
                                  (n - self.frame[c] + extra) % 3, self.exon[c])
        rev = codes[::-1]
        special = {INTRON_ANY["+"]: INTRON_ANY["-"], INTRON_ANY["-"]: INTRON_ANY["+"]}
        out = np.where(rev >= 0, table[np.maximum(rev, 0)], rev)
        for a, b in special.items():
            out = np.where(rev == a, b, out)
        return out

    def _outside_twin(self, c: int) -> int:
        name = self.kind_names[self.kind[c]][8:]
        other = {"+": "-", "-": "+"}[self.strand[c]]
        for i in range(len(self)):
            if self.frame[i] < 0 and self.strand[i] == other:
                n2 = self.kind_names[self.kind[i]][8:]
                if n2[:-1] == name[:-1]:
                    return i
        return c

    def gold_mask(self, codes):
        """(..., C) bool: the internal labels each gold code allows. A tensor of codes
        gives a tensor on its device (no copy through the host); an array, an array."""
        as_array = not isinstance(codes, torch.Tensor)
        x = torch.as_tensor(codes) if as_array else codes
        table = self._gold_tables(x.device)
        m = (x[..., None] == table["labels"]) | (x == UNKNOWN)[..., None]
        for code, runs in table["introns"]:
            m |= (x == code)[..., None] & runs
        if self.has_tails:  # a tail wherever its label is allowed
            m |= m[..., table["base"]]
        return m.numpy() if as_array else m

    def _gold_tables(self, device) -> dict:
        """gold_mask's constants on `device`, made once per device (a new small tensor
        on a GPU each call would wait for the device)."""
        cache = self.__dict__.setdefault("_gold_cache", {})
        key = (device, tuple(self.base), tuple(self.kind), tuple(self.strands))
        if key not in cache:  # keyed by the layout too: a copy may add run tails
            run = torch.as_tensor(self._run_kind())
            introns = [(code, run == self.kind_of(f"intron{s}"))
                       for s, code in INTRON_ANY.items() if s in self.strands]
            cache[key] = {"labels": torch.arange(len(self)).to(device),
                          "introns": [(c, r.to(device)) for c, r in introns],
                          "base": torch.as_tensor(self.base).to(device)}
        return cache[key]

    def collapse(self, codes: np.ndarray) -> np.ndarray:
        """Gold codes -> scheme labels (-1 where unknown)."""
        table = np.asarray(self.scheme_label + [0], np.int64)
        out = np.where(codes >= 0, table[np.maximum(codes, 0)], -1)
        for s, code in INTRON_ANY.items():
            if s in self.strands:
                out = np.where(codes == code,
                               self.scheme_label[self._find(self.kind_of(f"intron{s}"), 0)],
                               out)
        return out


# ---------------------------------------------------------------- sequence rules
def base_codes(seq: str | bytes) -> np.ndarray:
    """A DNA string -> int8 codes (A C G T = 0..3, anything else 4), case-insensitive."""
    lut = np.full(256, 4, np.int8)
    for i, b in enumerate(BASES):
        lut[ord(b)] = lut[ord(b.lower())] = i
    raw = seq.encode() if isinstance(seq, str) else seq
    return lut[np.frombuffer(raw, np.uint8)]


def merge_runs(segments, to_scheme) -> list[tuple[int, int, int]]:
    """(start, duration, internal label) segments -> scheme-label runs, neighbours of
    one scheme label merged."""
    out: list[list[int]] = []
    for s0, d, c in segments:
        lab = int(to_scheme[c])
        if out and out[-1][2] == lab:
            out[-1][1] += d
        else:
            out.append([int(s0), int(d), lab])
    return [tuple(x) for x in out]
