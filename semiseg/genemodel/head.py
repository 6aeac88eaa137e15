"""The frame-aware gene model's CRF head (its encoder is model.GeneEncoder).

`FrameHead` turns encoder channels into the internal labels of
:class:`semiseg.genemodel.frames.FrameLayout` (start / CDS / stop / intron in three frames
per strand, plus the scheme's other labels), adds the gene-structure rules (periodic
transitions, fixed start / stop codon and splice-site durations, the sequence's stop and
start codons and GT..AG splice sites as an `allowed` mask, codons aligned to their frame),
runs the exact semi-CRF, and hands back *scheme* labels: callers
see the same methods as `SemiCRF` (nll, decode, marginals) with emissions that carry the
one-hot sequence in their last four channels.

Learned scores are per kind, not per frame (the frame of a window is arbitrary): one
transition table over kinds, one duration table (K, kinds), start/end scores per kind,
all expanded to the internal labels. Splice sites are scored by the 1-bp donor and
acceptor labels' own channels, and with `site_scores` also by counted position weight
matrices of splice sites, start and stop codons (sites.SiteScores), whose learned
weights are the only per-site parameters; with `orf_length_scores` start and stop codons
also score the length of the open reading frame they open or close
(orflength.OrfLengthScores), and with `upstream_start_scores` start codons the number of
in-frame start codons upstream in their ORF (orflength.UpstreamStartScores); with
`content_scores` CDS bases get the log-odds of a
counted coding Markov chain (content.ContentScores).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..crf import Segmentation, log_partition, marginals, viterbi
from ..errors import SemisegError
from . import goldpath
from .content import ContentScores
from .frames import MISALIGNED, SPLICE_LEFT, SPLICE_RIGHT, FrameLayout
from .labelsum import label_add
from .orflength import OrfLengthScores, UpstreamStartScores
from .seqmask import donor_motif_mask, sequence_allowed
from .sites import SiteScores

SEQ = 4  # the one-hot A, C, G, T carried at the end of the emissions


# long_introns: the second intron tail's first transition into it and its score per
# tail piece at initialisation (log-scores; learned from there)
LONG_INTRON_INIT = (-1.0, 0.1)

class FrameHead(nn.Module):
    """Semi-CRF head with reading frames (see the module docstring).

    Args:
        layout: the internal labels of the scheme.
        max_duration: K in bp.
        start_end: learn scores for the first and last segment's kind.
        site_scores: add the site matrices' scores (sites.SiteScores; train/tables.py counts
            the matrices) to the emissions; site_order and site_windows: the matrices'
            order and windows (crf.site_order, crf.site_windows).
        orf_length_scores: add learned scores of ORF length to start and stop codons
            (orflength.OrfLengthScores).
        upstream_start_scores: add a learned score of the number of in-frame start
            codons upstream in the ORF to start codons (orflength.UpstreamStartScores).
        content_scores: add the coding-content log-odds (content.ContentScores; train/tables.py
            counts the table) to the CDS labels.
        intron_content: with content_scores, also the intron-content log-odds to the
            intron labels (content.ContentScores).
        tie_noncoding: each strand's intron channel is the background label's channel
            plus a learned constant (`noncoding_bias`), not an encoder output of its own.

    With run tails in the layout (crf.run_tails, FrameLayout.add_tails) each run of an
    outside label, coding bases or an intron inside has one segmentation, and its
    long-run score is the learned score of the tail pieces (their own kind's duration,
    transition and start / end entries).
    """

    # set by annotate on the head it decodes with (an ensemble passes them on)
    ANNOTATE_SETTINGS = ("intron_penalty", "branch_penalty", "donor_motif", "intron_rate")

    def __init__(self, layout: FrameLayout, max_duration: int, start_end: bool = True,
                 site_scores: bool = False, orf_length_scores: bool = False,
                 content_scores: bool = False, upstream_start_scores: bool = False,
                 tie_noncoding: bool = False, intron_content: bool = False,
                 site_order: int = 0, site_windows: dict | None = None):
        super().__init__()
        self._gold_cache = None  # goldpath.GoldPaths of the windows met (CPU training)
        self.register_buffer("tie", None, persistent=False)
        if tie_noncoding:
            # (intron channel, background channel) per coding strand with an intron label
            bg = next(kn[len("outside:"):] for k, kn in enumerate(layout.kind_names)
                      if kn.startswith("outside:") and layout.strand[layout.kind.index(k)] == ".")
            pairs = [(layout.channels.index(f"intron{st}"), layout.channels.index(bg))
                     for st in layout.strands if f"intron{st}" in layout.channels]
            if pairs:
                self.register_buffer("tie", torch.as_tensor(pairs), persistent=False)
                self.noncoding_bias = nn.Parameter(torch.zeros(len(pairs)))
        self.content = (ContentScores(layout, introns=intron_content) if content_scores
                        else None)
        self.sites = (SiteScores(layout, site_order, site_windows) if site_scores
                      else None)
        self.orf_length = OrfLengthScores(layout) if orf_length_scores else None
        self.upstream = UpstreamStartScores(layout) if upstream_start_scores else None
        self.layout = layout
        self.num_labels = len(set(layout.scheme_label))
        self.max_duration = K = max_duration
        # learned scores per parameter kind: per kind, and with exon types (crf.exon_types)
        # per exon type of the coding bases (FrameLayout.param_kinds)
        pnames, pkind = layout.param_kinds()
        NK = len(pnames)
        self.n_channels = len(layout.channels)
        self.transition = nn.Parameter(torch.zeros(NK, NK))
        self.duration = nn.Parameter(torch.zeros(K, NK))
        self._init_long_introns(pnames)
        self.start = nn.Parameter(torch.zeros(NK)) if start_end else None
        self.end = nn.Parameter(torch.zeros(NK)) if start_end else None
        self.register_buffer("em_idx", torch.as_tensor(layout.expand_index()),
                             persistent=False)
        self.register_buffer("begin_penalty", torch.where(
            torch.as_tensor(layout.begin_mask()), 0.0, MISALIGNED), persistent=False)
        kinds = [layout.kind_names[k][:-1] for k in layout.kind]
        frames = torch.as_tensor(layout.frame)
        # boundary events (marginals), the edges of genes and exons: a gene's left end is
        # the first base of a plus-strand start or a minus-strand stop codon (held in the
        # frame t mod 3), its right end the last base of a plus-strand stop or a
        # minus-strand start codon (frame (t - 2) mod 3); a splice base is an intron's
        # first base (left end) or last base (right end) by itself
        strand = layout.strand
        first = torch.tensor([(kinds[c], strand[c]) in (("start", "+"), ("stop", "-"))
                              for c in range(len(kinds))])
        last = torch.tensor([(kinds[c], strand[c]) in (("stop", "+"), ("start", "-"))
                             for c in range(len(kinds))])
        left = torch.tensor([kinds[c] == SPLICE_LEFT.get(layout.strand[c], ("",))[0]
                             for c in range(len(kinds))])
        right = torch.tensor([kinds[c] == SPLICE_RIGHT.get(layout.strand[c], ("",))[0]
                              for c in range(len(kinds))])
        r = torch.arange(3)[:, None]
        self.register_buffer("begins", ((first & (frames == r)) | left).float(),
                             persistent=False)
        self.register_buffer("ends", ((last & (frames == (r - 2) % 3)) | right).float(),
                             persistent=False)
        self.register_buffer("kind", torch.as_tensor(pkind), persistent=False)
        tmask = torch.as_tensor(layout.transition_mask(), dtype=torch.float32)
        self.register_buffer("tmask", tmask, persistent=False)
        self.register_buffer("dmask", torch.as_tensor(layout.duration_mask(K), dtype=torch.float32),
                             persistent=False)
        # per kind, the lengths d whose score and the next one's both count: some label
        # of the kind may last d and d + 1 (duration_roughness)
        usable = torch.zeros(K, NK, dtype=torch.bool)
        for c, k in enumerate(pkind):
            usable[:, k] |= torch.isfinite(self.dmask[:, c])
        self.register_buffer("rough_pairs", (usable[1:] & usable[:-1]).float(),
                             persistent=False)
        # the posterior decode's grammar: only the masks score it, so chains of segments
        # of at most chain_duration(K) bp give the same label sequences (genemodel/frames.py);
        # run tails (crf.run_tails) are left out of it, their posteriors added to their
        # labels' (decode_posteriors): it finds the same scheme-label sequences
        kc = layout.chain_duration(K)
        dd = layout.duration_mask(kc)
        dd[:, layout.is_tail()] = -math.inf
        self.register_buffer("decode_tmask", torch.as_tensor(
            layout.transition_mask(tails=False), dtype=torch.float32), persistent=False)
        self.register_buffer("decode_dmask", torch.as_tensor(dd, dtype=torch.float32),
                             persistent=False)
        self.register_buffer("base_idx", torch.as_tensor(layout.base), persistent=False)
        self.register_buffer("tail_end", torch.as_tensor(layout.end_mask(),
                                                         dtype=torch.float32), persistent=False)
        self.has_tails = layout.has_tails
        self._init_decode_groups(layout)
        self.register_buffer("collapse_idx", torch.as_tensor(layout.scheme_label),
                             persistent=False)
        self.register_buffer("intron_inside", torch.tensor(
            [layout.kind_names[layout.kind[b]] in ("intron+", "intron-")
             for b in layout.base]), persistent=False)
        self._init_settings()
        self.register_buffer("intron_begin", left.float(), persistent=False)

    def _init_settings(self) -> None:
        """The settings annotate (and train.calibrate) set on a trained head; training
        leaves each at its neutral value."""
        # train.calibrate: the encoder's emissions times this (calibrate.py: fitted on
        # the validation windows after training, recorded in the checkpoint)
        self.encoder_scale = 1.0
        # annotate.intron_penalty: a log-score taken from each intron (its left splice
        # base) when annotating
        self.intron_penalty = 0.0
        # annotate.intron_rate: a log-score added to every base inside an intron when
        # annotating (per bp: a 10 kb intron gains 10,000 x rate)
        self.intron_rate = 0.0
        # annotate.branch_penalty: a log-score taken from each intron whose acceptor has
        # no branch point near the consensus (sites.SiteScores.weak_branch); inf: such
        # acceptors are masked out (no intron may end there)
        self.branch_penalty = 0.0
        # annotate.donor_motif: introns must begin with this IUPAC motif ("": GT only)
        self.donor_motif = ""
        # annotate.split_stops: take stop codons split by an intron out of decoded genes
        # (genemodel/splitstops.py). Its counts, per process
        self.split_stops = False
        self.split_stop_counts: dict = {}

    def _init_long_introns(self, pnames: list[str]) -> None:
        """The second intron tails (crf.long_introns) apart from the first from the
        start (else the two, scored alike, would learn alike): a rarer way in and a
        flatter tail (LONG_INTRON_INIT)."""
        with torch.no_grad():
            for k, n in enumerate(pnames):
                if n.startswith("intron="):
                    self.duration[:, k] = LONG_INTRON_INIT[1]
                    self.transition[:, k] = LONG_INTRON_INIT[0]
                    self.transition[k, k] = 0.0

    def duration_roughness(self) -> Tensor:
        """Sum over kinds of the squared step from one length's duration score to the
        next, over lengths some label of the kind may last (crf.duration_step_sd's
        prior; a run tail's single length has no step)."""
        step = self.duration[1:] - self.duration[:-1]
        return (step.square() * self.rough_pairs).sum()

    def _init_decode_groups(self, layout: FrameLayout) -> None:
        """The posterior decode's score per label (decode_posteriors): the posteriors of
        its group summed, a group being a label with its run tails and, with exon types,
        the same kind and frame in every exon type (the decode finds the exon's type from
        its ends, and its bases count as coding whatever the type); run tails score 0."""
        first: dict = {}
        group = [first.setdefault((layout.kind[b], layout.frame[b]), b) for b in layout.base]
        assert all(group[r] == r <= j for j, r in enumerate(group)), "decode groups"
        keep = ~layout.is_tail()
        # decode_posteriors' plan (None: every label its own group, no tails): a group's
        # first label comes first, so its sum is that label's column plus the others' in
        # label order, added one layer at a time (layer k: each group's k-th further
        # member); then kept members take their group's sum (copies: destination and
        # source columns) and the rest are zeroed
        layers: list = []
        count: dict = {}
        for j, r in enumerate(group):
            if r != j:
                k = count[r] = count.get(r, -1) + 1
                if k == len(layers):
                    layers.append(([], []))
                layers[k][0].append(r)
                layers[k][1].append(j)
        copies = [(c, r) for c, r in enumerate(group) if r != c and keep[c]]
        self._decode_plan = None if not layers else (
            layers, [[c for c, _ in copies], [r for _, r in copies]] if copies else None,
            [c for c in range(len(group)) if not keep[c]])
        self._plan_on: dict = {}  # the plan as index tensors, per device

    # ------------------------------------------------------------------ inputs
    def _terms(self, emissions: Tensor, lengths: Tensor | None, hidden=None) -> dict:
        B, T, _ = emissions.shape
        R = emissions[..., :self.n_channels].float()
        if torch.is_tensor(self.encoder_scale) or self.encoder_scale != 1.0:
            R = R * self.encoder_scale  # a tensor while calibrate.fit_head_terms fits it
        if self.tie is not None:  # introns score as the background, plus a constant
            R = R.clone()
            R[..., self.tie[:, 0]] = R[..., self.tie[:, 1]] + self.noncoding_bias
        codes = self.codes(emissions, lengths)
        allowed = sequence_allowed(self.layout, codes)
        if self.donor_motif:  # one mask per strand, for that strand's donor labels
            for strand in self.layout.strands:
                donors = [c for c, k in enumerate(self.layout.kind)
                          if self.layout.kind_names[k] == "donor" + strand]
                ok = donor_motif_mask(codes, self.donor_motif, strand)
                allowed[..., donors] &= ok[..., None]
        r = torch.arange(T, device=emissions.device) % 3
        idx = self.em_idx[r].expand(B, T, -1)
        scores = torch.gather(R, 2, idx)
        if self.sites is not None:  # (label_add: + label_sum(parts), the same bits)
            scores = label_add(scores, self.sites.parts(codes))
        if self.orf_length is not None:
            scores = label_add(scores, self.orf_length.parts(codes, lengths))
        if self.upstream is not None:
            scores = label_add(scores, self.upstream.parts(codes, lengths))
        if self.content is not None:
            scores = scores + self.content(codes).to(scores.dtype)
        if self.intron_rate:
            scores = scores + self.intron_rate * self.intron_inside.to(scores.dtype)
        if self.branch_penalty:
            if self.sites is None:
                raise SemisegError("annotate.branch_penalty needs a model trained with "
                                   "crf.site_scores: true (the branch-point matrix)")
            weak = self.sites.weak_branch(codes)
            if math.isinf(self.branch_penalty):  # a rule: no intron ends there at all
                allowed = allowed & (weak == 0)
            else:
                scores = scores - self.branch_penalty * weak.to(scores.dtype)

        if self.has_tails:  # a run tail scores as its label (sites, content, ORF terms
            scores = scores[..., self.base_idx]  # are by kind); seqmask allows it alike
        k = self.kind
        tr = self.transition[k][:, k][None] + self.tmask
        if self.intron_penalty:
            tr = tr - self.intron_penalty * self.intron_begin
        db = self.duration[:, k] + self.dmask
        return dict(scores=scores, transition=tr, duration_bias=db, lengths=lengths,
                    start=None if self.start is None else self.start[k],
                    end=self._end(k),
                    proj_start=self.proj_start_pattern()[r].expand(B, T, -1),
                    allowed=allowed)

    def proj_start_pattern(self) -> Tensor:
        """The rows of `_terms`' proj_start: its row t is this (3, labels) tensor's row
        t mod 3 (the frame penalty of a segment opening out of frame)."""
        return self.begin_penalty

    def codes(self, emissions: Tensor, lengths: Tensor | None) -> Tensor:
        """The bases (B, T) the emissions carry: 0-3 ACGT, 4 anything else."""
        T = emissions.shape[1]
        onehot = emissions[..., self.n_channels:self.n_channels + SEQ]
        codes = torch.where(onehot.amax(-1) > 0.5, onehot.argmax(-1), torch.full_like(
            onehot[..., 0], 4, dtype=torch.int64))
        if lengths is not None:  # past a sequence's end: N (a codon there is not a stop)
            past = torch.arange(T, device=codes.device)[None, :] >= lengths[:, None]
            codes = codes.masked_fill(past, 4)
        return codes

    def _stop_codes(self, emissions: Tensor, lengths: Tensor | None) -> Tensor | None:
        """The bases, where the decode takes split stop codons out (split_stops), else
        None (nothing to compute)."""
        return self.codes(emissions, lengths) if self.split_stops else None

    def _end(self, k: Tensor) -> Tensor | None:
        """The last segment's score per internal label: the learned one, and no run
        tail (FrameLayout.end_mask)."""
        end = None if self.end is None else self.end[k]
        if not self.has_tails:
            return end
        return self.tail_end if end is None else end + self.tail_end

    # ------------------------------------------------------------------ methods
    def log_partition(self, emissions, lengths=None, hidden=None, *, backend="auto"):
        t = self._terms(emissions, lengths)
        return log_partition(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"),
                             backend=backend, **t)

    def nll(self, emissions: Tensor, labels: Tensor, lengths=None, hidden=None, *,
            backend="auto") -> Tensor:
        """log Z - log Z(gold) per sequence; `labels` are gold codes (genemodel/frames.py)."""
        t = self._terms(emissions, lengths)
        B, T = labels.shape
        gold = self.layout.gold_mask(labels) & t["allowed"]
        if lengths is not None:
            pad = torch.arange(T, device=labels.device)[None, :] >= lengths[:, None]
            gold |= pad[..., None]
        paths = self._gold_paths(t, gold, labels, emissions, lengths)
        clamped = [b for b in range(B) if paths[b] is None]  # summed by the chain

        def gold_part(v):  # the clamped sequences' rows (all of them: v itself, no copy)
            return v if len(clamped) == B else v[clamped]

        sc, tr, db = t["scores"], t["transition"], t["duration_bias"]
        two = {k: (None if t[k] is None else torch.cat([t[k], gold_part(t[k])]))
               for k in ("lengths", "proj_start")}
        z = log_partition(torch.cat([sc, gold_part(sc)]), tr, db, start=t["start"],
                          end=t["end"], allowed=torch.cat([t["allowed"], gold_part(gold)]),
                          backend=backend, **two)
        log_z, log_gold = z[:B], z[B:]
        if len(clamped) < B:  # the others' one gold path, scored directly (goldpath.py)
            summed = iter(log_gold.unbind())  # the clamped ones, in batch order
            log_gold = torch.stack([next(summed) if paths[b] is None else
                                    goldpath.path_score(t, b, paths[b]).to(log_z.dtype)
                                    for b in range(B)])
        return torch.where(torch.isneginf(log_gold), torch.full_like(log_z, float("inf")),
                           log_z - log_gold)

    def _gold_paths(self, t, gold, labels, emissions, lengths) -> list:
        """Each sequence's one gold path (goldpath.py), None where its gold is summed by
        the clamped log-partition: every sequence on a GPU, of a model without run tails
        (crf.run_tails), or with goldpath off."""
        B, T = labels.shape
        if not (goldpath.ENABLED and self.has_tails and emissions.device.type == "cpu"):
            return [None] * B  # (without run tails a run has many segmentations)
        if self._gold_cache is None:
            self._gold_cache = goldpath.GoldPaths()
        n = lengths if lengths is not None else torch.full((B,), T, dtype=torch.int64)
        return self._gold_cache.lookup(t, gold, labels, self.codes(emissions, lengths), n)

    def decode_internal(self, emissions, lengths=None, hidden=None, *, backend="auto"):
        """The Viterbi path over the internal labels (a Segmentation)."""
        t = self._terms(emissions, lengths)
        with torch.no_grad():
            return viterbi(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"),
                           backend=backend, **t)

    def _posteriors(self, t: dict, backend: str) -> Tensor:
        """Internal-label marginals (B, T, C) (crf.marginals; zeros for a sequence the
        grammar forbids)."""
        return marginals(t["scores"], t["transition"], t["duration_bias"], t["lengths"],
                         start=t["start"], end=t["end"], proj_start=t["proj_start"],
                         allowed=t["allowed"], backend=backend)[0]

    def decode(self, emissions, lengths=None, hidden=None, *, backend="auto") -> Segmentation:
        """The gene structure with the most expected correct bases (posterior decoding).

        The highest-scoring single segmentation (`decode_internal`) is a poor summary of
        this model: a run of one label has a great many segmentations into chained
        segments, so the likelihood spreads a run's probability over them, and one path
        of another label can outscore each of them while being far less probable in
        sum. Instead the segmentation that obeys every gene-structure rule (the same
        transitions, durations and sequence mask, with no learned scores) and has the
        largest sum of internal-label posteriors over its bases is returned (maximum
        expected accuracy), collapsed to scheme labels (runs of one label merged).
        `score` is that expected number of correct bases.
        """
        t = self._terms(emissions.detach(), lengths)
        return self._collapsed(self._decode_posteriors(
            t, self._posteriors(t, backend), backend, self._stop_codes(emissions, lengths)))

    def decode_with_marginals(self, emissions, lengths=None, hidden=None, *,
                              backend="auto"):
        """`decode` and `marginals` from one posterior pass: (Segmentation, label
        marginals, boundary marginals), what annotation needs, at half the cost."""
        t = self._terms(emissions.detach(), lengths)
        g = self._posteriors(t, backend)
        return (self._collapsed(self._decode_posteriors(
                    t, g, backend, self._stop_codes(emissions, lengths))),
                *self._marginals_from(g, lengths))

    def _collapsed(self, seg: Segmentation) -> Segmentation:
        """The internal-label segmentation in scheme labels: its segments are the runs
        of the collapsed labels (internal segments of one scheme label merged, as
        merge_runs does), marked on the device and listed only when read."""
        lab = seg.labels
        out = torch.where(lab >= 0, self.collapse_idx[lab.clamp(min=0)], lab)
        change = torch.ones_like(out, dtype=torch.bool)
        change[:, 1:] = out[:, 1:] != out[:, :-1]
        return Segmentation(score=seg.score, labels=out, seg_start=change & (out >= 0),
                            lengths=seg.lengths)

    def decode_posteriors(self, post: Tensor) -> Tensor:
        """Internal-label posteriors as the posterior decode scores them: each label's
        group summed (its run tails and, with exon types, its kind and frame in every
        type: _init_decode_groups), run tails' own columns 0."""
        if self._decode_plan is None:
            return post
        # the certified decode hands the stitched posteriors over on the host; per layer
        # one gather-add-scatter over the rows (the same sums, in the same order, as
        # adding every column into zeros: 3x faster than index_add_ over 58 columns)
        layers, copies, zero = self._plan(post.device)
        out = post.clone()
        for dst, src in layers:
            out[..., dst] = out[..., dst] + post[..., src]
        if copies is not None:
            out[..., copies[0]] = out[..., copies[1]]
        out[..., zero] = 0.0
        return out

    def _plan(self, device) -> tuple:
        """decode_posteriors' plan as index tensors on `device` (made once a device)."""
        if device not in self._plan_on:
            layers, copies, zero = self._decode_plan
            ix = lambda v: torch.as_tensor(v, dtype=torch.int64, device=device)  # noqa: E731
            self._plan_on[device] = ([(ix(d), ix(s)) for d, s in layers],
                                     copies and (ix(copies[0]), ix(copies[1])), ix(zero))
        return self._plan_on[device]

    def _decode_posteriors(self, t: dict, post: Tensor, backend: str,
                           codes: Tensor | None = None) -> Segmentation:
        """The posterior decode's segmentation over the internal labels; given the
        sequences' bases `codes` (B, T) (_stop_codes), its stop codons split by an
        intron taken out (genemodel/splitstops.py)."""
        with torch.no_grad():
            seg = viterbi(self.decode_posteriors(post), self.decode_tmask,
                          self.decode_dmask, t["lengths"],
                          allowed=t["allowed"], proj_start=t["proj_start"], backend=backend)
            if codes is None:
                return seg
            return self._without_split_stops(seg, t, post, codes, backend)

    def _without_split_stops(self, seg: Segmentation, t: dict, post: Tensor, codes: Tensor,
                             backend: str) -> Segmentation:
        from .splitstops import exclude_split_stops

        labels = seg.labels.clone()
        cpu_codes = codes.cpu().numpy()
        for b, L in enumerate(t["lengths"].tolist() if t["lengths"] is not None
                              else [labels.shape[1]] * len(labels)):
            new = exclude_split_stops(self, labels[b, :L].cpu().numpy(), post[b, :L],
                                      t["allowed"][b, :L], t["proj_start"][b, :L],
                                      cpu_codes[b, :L], backend, self.split_stop_counts)
            labels[b, :L] = torch.as_tensor(new, device=labels.device)
        # (segment starts: the old ones and every label change; a changed locus keeps
        # the old starts inside runs, which the collapse to scheme labels ignores)
        change = torch.ones_like(labels, dtype=torch.bool)
        change[:, 1:] = labels[:, 1:] != labels[:, :-1]
        starts = seg._starts if seg._starts is not None else torch.zeros_like(change)
        return Segmentation(score=seg.score, labels=labels,
                            seg_start=starts | (change & (labels >= 0)),
                            lengths=seg.lengths)

    def decode_posterior_internal(self, emissions, lengths=None, *, backend="auto"):
        """`decode`'s segmentation over the internal labels (a Segmentation)."""
        t = self._terms(emissions.detach(), lengths)
        return self._decode_posteriors(t, self._posteriors(t, backend), backend,
                                       self._stop_codes(emissions, lengths))

    def marginals(self, emissions, lengths=None, hidden=None, *, backend="auto"):
        """Scheme-label marginals (B, T, C) and gene-structure boundary marginals (B, T).

        boundary[t]: the probability that a gene or an intron begins at t or ends at t - 1
        (where the scheme's label changes: a gene's edges are the outer ends of its start
        and stop codons), summed over those events and capped at 1; exact except where
        two such events meet (adjacent genes), which are counted twice. boundary[0] = 1.
        """
        t = self._terms(emissions.detach(), lengths)
        return self._marginals_from(self._posteriors(t, backend), lengths)

    def _marginals_from(self, g_sc: Tensor, lengths) -> tuple[Tensor, Tensor]:
        B, T, _ = g_sc.shape
        post = torch.zeros(B, T, self.num_labels, device=g_sc.device)
        post.index_add_(2, self.collapse_idx, g_sc)
        r = torch.arange(T, device=g_sc.device) % 3
        begin = (g_sc * self.begins[r]).sum(-1)
        end = (g_sc * self.ends[r]).sum(-1)
        bnd = begin.clone()
        bnd[:, 1:] += end[:, :-1]
        bnd[:, 0] = 1.0  # a sequence's first base always begins a segment (docs/contract.md)
        if lengths is not None:
            pad = torch.arange(T, device=bnd.device)[None, :] >= lengths[:, None].to(bnd.device)
            bnd = bnd.masked_fill(pad, 0.0)
        return post.clamp(0, 1), bnd.clamp(0, 1)
