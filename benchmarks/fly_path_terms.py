"""Why the fly gene model prefers its own gene structure to the true one: per truth locus
of some error kinds (benchmarks/fly_gene_errors.py), the Viterbi score of the best path
constrained to the TRUTH gene minus that of the best path constrained to the PREDICTED
gene, split by term of the semi-CRF score (FrameHead._terms, recomputed part by part).

    semiseg annotate --model semiseg/models/fly_gene_frames.pt --fasta \
        data/fly/chr2R_2M_6M.fa --regions BED --out /tmp/pt/valid --quiet
    python benchmarks/fly_path_terms.py --model semiseg/models/fly_gene_frames.pt \
        --pred /tmp/pt/valid.gff3 [--region tune|test] [--kinds "fewer introns,missed"]
        [--flank 2000] [--context 10000] [--strict-outside]

Predicted codes: FrameGold of the prediction, built as training builds gold codes
(train/data.py frame_gold_for). Truth codes: frame_gold of the truth transcript the
prediction shares most exons with (else the longest), with one transcript of each other
truth locus in the span: the locus's truth CDS and predicted genes of its strand over it,
grown over every gene crossing its edges. Window: span + --flank (edges at safe cuts),
encoded with --context more each side (float32, CPU). Outside the span both paths take
the predicted codes; a third path is free in the span (the model's own best). Unless
--strict-outside, intergenic / UTR / ncRNA codes allow any of those labels (the predicted
GFF3 has no UTRs: the comparison is of the coding structure).

Columns, truth minus pred in nats: total; enc (encoder channels, introns tied to the
background) = enc_cod (start/CDS/stop labels) + enc_nc (introns, outside); sites (site
matrices) by donor, acceptor, start, stop; content (coding Markov chain); orf (ORF
length); other (the rest of _terms' scores); struct = trans (transitions, start, end) +
dur (durations, frame-begin terms); cod_bp (coding bases); free (best free path minus
pred: 0 where Viterbi agrees with the prediction); nI: introns in the span (truth / pred
/ free). Each path's parts are checked to sum to its Viterbi score. Rows marked * (the
truth gene hosts a gene that one segmentation cannot hold with it) are left out of the
mean and median.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
from types import SimpleNamespace

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import fly_gene_errors as fge  # noqa: E402

from semiseg.annotate.annotator import Annotator  # noqa: E402
from semiseg.annotate.run import AnnotateOptions, _gene_model_settings  # noqa: E402
from semiseg.checkpoint import load_checkpoint  # noqa: E402
from semiseg.crf import viterbi  # noqa: E402
from semiseg.evaluate.genelevel import inside, normalise_stops, read_gene_models  # noqa: E402
from semiseg.genemodel.frames import UNKNOWN  # noqa: E402
from semiseg.genemodel.gold import GoldReport, frame_gold  # noqa: E402
from semiseg.genome import Fasta, GenomeData  # noqa: E402
from semiseg.genome.labels import read_annotation  # noqa: E402
from semiseg.train.data import frame_gold_for  # noqa: E402

CHROM = fge.CHROM
COLS = ["total", "enc", "enc_cod", "enc_nc", "sites", "donor", "acceptor", "start", "stop",
        "content", "orf", "other", "struct", "trans", "dur", "cod_bp", "free"]
CODING = ("start", "CDS", "stop")


def gold_for(path, ckpt, fa):
    """FrameGold of a GFF3, built as training builds it (cleaned, sequence-checked)."""
    cfg = ckpt.config
    cfg = dataclasses.replace(cfg, labels=dataclasses.replace(cfg.labels, annotation=path))
    ann = read_annotation(path, ckpt.scheme, fa.chrom_sizes, clean=True,
                          fetch=lambda c: fa.fetch(c, 0, fa.chrom_sizes[c]))
    return frame_gold_for(cfg, ckpt.scheme, ann, SimpleNamespace(fasta=fa))


def components(head, em, lengths):
    """The parts of FrameHead._terms' `scores` (each (B, T, C) over the internal labels,
    run tails included) and the full terms; the same steps as _terms, part by part."""
    t = head._terms(em, lengths)
    B, T, _ = em.shape
    R = em[..., :head.n_channels].float() * head.encoder_scale  # train.calibrate
    if head.tie is not None:
        R = R.clone()
        R[..., head.tie[:, 0]] = R[..., head.tie[:, 1]] + head.noncoding_bias
    codes = head.codes(em, lengths)
    idx = head.em_idx[torch.arange(T) % 3].expand(B, T, -1)
    parts = {"enc": torch.gather(R, 2, idx)}
    for name, mod, arg in (("sites", head.sites, ()), ("orf", head.orf_length, (lengths,)),
                           ("content", head.content, ())):
        parts[name] = (mod(codes, *arg).float() if mod is not None
                       else torch.zeros_like(parts["enc"]))
    if head.has_tails:
        parts = {k: v[..., head.base_idx] for k, v in parts.items()}
    parts["other"] = t["scores"] - sum(parts.values())  # upstream, intron_rate, branch
    return parts, t


def split_path(seg, parts, t, kind_of, b, lo, hi):
    """Per-term sums of one Viterbi path (batch row b) and its intron count in [lo, hi)."""
    segs = list(seg.segments[b])
    lab = seg.labels[b, :sum(d for _, d, _ in segs)]
    out = dict.fromkeys(COLS, 0.0)
    val = {k: v[b, torch.arange(len(lab)), lab].double() for k, v in parts.items()}
    kinds = np.array([kind_of[c] for c in lab.tolist()])
    out.update({k: float(v.sum()) for k, v in val.items()})
    coding = np.isin(kinds, CODING)
    out["enc_cod"] = float(val["enc"][torch.from_numpy(coding)].sum())
    out["enc_nc"] = out["enc"] - out["enc_cod"]  # introns and outside (introns tied)
    out["cod_bp"] = int(coding.sum())
    for s in ("donor", "acceptor", "start", "stop"):
        out[s] = float(val["sites"][torch.from_numpy(kinds == s)].sum())
    tr = t["transition"].reshape(-1, *t["transition"].shape[-2:])
    db, ps = t["duration_bias"], t["proj_start"][b]
    for i, (s, d, c) in enumerate(segs):
        out["dur"] += float(db[d - 1, c]) + float(ps[s, c])
        out["trans"] += (float(t["start"][c]) if i == 0
                         else float(tr[(d - 1) % len(tr), segs[i - 1][2], c]))
    out["trans"] += float(t["end"][segs[-1][2]])
    out["struct"] = out["trans"] + out["dur"]
    out["total"] = float(seg.score[b])
    parts_sum = sum(out[k] for k in ("enc", "sites", "content", "orf", "other", "struct"))
    if abs(parts_sum - out["total"]) > 1e-3 + 1e-5 * abs(out["total"]):
        raise AssertionError(f"parts sum {parts_sum:.3f} != Viterbi score {out['total']:.3f}")
    introns = sum(1 for s, d, c in segs if kind_of[c] == "donor" and lo <= s < hi)
    return out, introns


def truth_codes(gold, g, others, ws, we, fa, min_intron):
    """Gold codes of [ws, we) (frames relative to ws) from the truth transcript `g` and
    the other loci's transcripts `others` (frame_gold as FrameGold makes them), the truth
    annotation's outside labels around them; unknown bases intergenic, but free in the
    span of an other transcript that is no gold gene. None (and why) when `g` is none."""
    def shim(t):
        return SimpleNamespace(coding=True, strand=t.strand,
                               cds=[(a - ws, b - ws) for a, b in t.cds])
    lab, seq = gold._annotation.labels(CHROM, ws, we), fa.fetch(CHROM, ws, we)
    report = GoldReport()
    frame_gold(gold.layout, lab, [shim(g)], seq, min_intron=min_intron, report=report)
    if not report.kept:
        return None, ", ".join(report.partial)
    codes = frame_gold(gold.layout, lab, [shim(g)] + [shim(t) for t in others], seq,
                       min_intron=min_intron)
    free = np.zeros(len(codes), bool)
    for t in others:
        free[max(0, t.start - ws):t.end - ws] = True
    return np.where((codes == UNKNOWN) & ~free, 0, codes), ""


def relax_outside(layout, mask, codes):
    """Bases coded with an outside label (intergenic, UTR, ncRNA) may take any of them."""
    outside = np.asarray(layout.frame) < 0  # the outside labels and their run tails
    mask[(codes >= 0) & outside[np.maximum(codes, 0)]] |= outside
    return mask


def locus_row(locus, hits, env, args):
    """The delta row of one locus, or a string saying why it is skipped."""
    head, ann, lay, kind_of, fa, size, cuts, truth_gold, pred_gold, min_intron, every = env
    lo = min([g.start for g in locus] + [q.start for q in hits])
    hi = max([g.end for g in locus] + [q.end for q in hits])
    # the span grown over every gene crossing its edges (truth or predicted)
    while cross := [m for m in every if m.start < hi and lo < m.end
                    and not lo <= m.start <= m.end <= hi]:
        lo, hi = min([lo] + [m.start for m in cross]), max([hi] + [m.end for m in cross])
    ws, we = max(0, lo - args.flank), min(size, hi + args.flank)
    ws, we = int(np.flatnonzero(cuts[:ws + 1])[-1]), we + int(np.flatnonzero(cuts[we:])[0])
    # the truth transcript: the one sharing most CDS exons with the prediction (as
    # fly_gene_errors.classify picks it), or with no prediction the longest
    g = max(locus, key=lambda g: sum(len(set(g.cds) & set(q.cds)) for q in hits) if hits
            else sum(e - s for s, e in g.cds))
    # one transcript (the longest) of each other truth locus in the span and clear of g
    # (a gene nested in g's intron cannot be in one segmentation with it)
    others, nested = {}, False
    for m in every:
        if m.truth_locus is None or m.truth_locus is locus or not lo <= m.start < hi:
            continue
        if m.start <= g.start and g.end <= m.end:
            return f"nested in truth gene {m.id} (one segmentation holds only one of them)"
        if m.start < g.end and g.start < m.end:
            nested = True
        elif m.length > getattr(others.get(id(m.truth_locus)), "length", 0):
            others[id(m.truth_locus)] = m
    gc, why = truth_codes(truth_gold, g, list(others.values()), ws, we, fa, min_intron)
    if gc is None:
        return f"{g.id} is no gold gene ({why})"
    es = ws - (ws - max(0, ws - args.context)) // 3 * 3  # frames of es = those of ws
    ee = min(size, we + args.context)
    x = ann._load(CHROM, es, ee)
    with torch.no_grad():
        em, _ = ann._encode(x[None], [len(x)])
        parts, t = components(head, em, torch.tensor([ee - es]))
    a, b, L = ws - es, we - es, slice(lo - ws, hi - ws)
    pc = pred_gold.labels(CHROM, ws, we)
    tc, fc = pc.copy(), pc.copy()
    tc[L] = gc[L]
    fc[L] = UNKNOWN  # free at the locus: the model's own best structure there
    masks = [lay.gold_mask(c) if args.strict_outside else relax_outside(lay, lay.gold_mask(c), c)
             for c in (tc, pc, fc)]
    allowed = t["allowed"][:, a:b] & torch.as_tensor(np.stack(masks))
    terms = dict(transition=t["transition"], duration_bias=t["duration_bias"],
                 start=t["start"], end=t["end"], lengths=torch.tensor([b - a] * 3),
                 proj_start=t["proj_start"][:, a:b].expand(3, -1, -1))
    seg = viterbi(t["scores"][:, a:b].expand(3, -1, -1).contiguous(), allowed=allowed, **terms)
    bad = [w for w, v in zip(("truth", "pred", "free"), seg.score.tolist()) if v == -math.inf]
    if bad:  # the sequence mask at a base (else the grammar: transitions, durations)
        p = np.flatnonzero(~allowed[0].any(-1).numpy())
        return f"no {' or '.join(bad)} path" + (
            f" (the sequence mask forbids the true {lay.kind_names[lay.kind[tc[p[0]]]]} "
            f"frame {lay.frame[tc[p[0]]]} at {ws + p[0]:,})" if len(p) else "")
    parts = {k: v[:, a:b].expand(3, -1, -1) for k, v in parts.items()}
    (st, nt), (sp, np_), (sf, nf) = (split_path(seg, parts, terms, kind_of, i, L.start,
                                                L.stop) for i in range(3))
    d = {c: st[c] - sp[c] for c in COLS}
    d["free"] = sf["total"] - sp["total"]
    unknown = int((pc[L] == UNKNOWN).sum())  # a predicted gene the clean-up masked: free
    d["nI"] = (f"{nt}/{np_}/{nf}" + ("  * hosts a gene left out" if nested else "")
               + (f"  ({unknown} predicted bp unknown)" if unknown else ""))
    d["nested"] = nested
    return d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--pred", required=True, help="PREFIX.gff3 of semiseg annotate")
    ap.add_argument("--region", choices=sorted(fge.REGIONS), default="tune")
    ap.add_argument("--kinds", default="fewer introns,missed,split,a splice site off",
                    help="comma-separated kinds of fly_gene_errors.classify, or parts of "
                    "their names (\"a splice site off\")")
    ap.add_argument("--flank", type=int, default=2000)
    ap.add_argument("--context", type=int, default=10000)
    ap.add_argument("--strict-outside", action="store_true",
                    help="keep intergenic/UTR/ncRNA codes as they are")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    root = os.path.dirname(HERE)
    fa = Fasta(os.path.join(root, "data/fly/chr2R_2M_6M.fa"))
    region = fge.REGIONS[args.region]
    truth_gff = os.path.join(root, "data/fly/chr2R_2M_6M.gff3")
    def load(path):
        return inside(normalise_stops(read_gene_models(path), fa.fetch, fa.chrom_sizes)[0],
                      {CHROM: [region]})
    loci, pred = fge.loci_of(load(truth_gff)), load(args.pred)
    kinds = [fge.classify(m, pred, loci) for m in loci]
    asked = [w.strip() for w in args.kinds.split(",") if w.strip()]
    names = {k for k, _ in kinds} | {"missed", "split", "fewer introns", "more introns"}
    wanted = sorted({k for k, _ in kinds if any(w == k or (w in k and w not in names)
                                                 for w in asked)})

    ckpt = load_checkpoint(args.model)
    ann = Annotator(ckpt, GenomeData.from_config(ckpt.genome, fa), torch.device("cpu"),
                    window=10**9, context=0, max_decode_steps=10**9, batch_steps=10**9)
    head = ann.model.crf
    _gene_model_settings(head, ckpt, AnnotateOptions())  # annotate's settings on the head
    lay = head.layout
    kind_of = [lay.kind_names[lay.kind[c]].replace("~", "").rstrip("+-").split(":")[0]
               for c in range(len(lay))]
    truth_gold, pred_gold = gold_for(truth_gff, ckpt, fa), gold_for(args.pred, ckpt, fa)
    env = (head, ann, lay, kind_of, fa, fa.chrom_sizes[CHROM],
           pred_gold.safe_cuts(CHROM) & truth_gold.safe_cuts(CHROM), truth_gold, pred_gold,
           ckpt.scheme.min_intron, [SimpleNamespace(
               id=g.id, start=g.start, end=g.end, strand=g.strand, cds=g.cds, truth_locus=m,
               length=sum(b - a for a, b in g.cds)) for m in loci for g in m]
           + [SimpleNamespace(start=q.start, end=q.end, truth_locus=None) for q in pred])
    print(f"{CHROM}:{region[0]:,}-{region[1]:,}, {len(loci)} truth loci; kinds: "
          f"{'; '.join(wanted)}; flank {args.flank}, context {args.context}; outside "
          f"labels {'as coded' if args.strict_outside else 'free'}; truth minus pred, nats\n")
    print(f"{'locus':>23} {'str':>3} {'kind':>14} " + " ".join(f"{c:>8}" for c in COLS)
          + "  nI(T/P/F)")
    rows, skipped = [], []
    for locus, (kind, hit) in zip(loci, kinds):
        if kind not in wanted:
            continue
        hits = [] if hit is None else hit if isinstance(hit, list) else [hit]
        d = locus_row(locus, hits, env, args)
        span = (f"{min(g.start for g in locus):,}-{max(g.end for g in locus):,} "
                f"{locus[0].strand} {kind}")
        if isinstance(d, str):
            skipped.append(f"{span}: {d}")
            continue
        rows.append(d)
        short = kind.replace("as many introns, a splice site off", "splice off")
        print(f"{span.split()[0]:>23} {locus[0].strand:>3} {short[:14]:>14} "
              + " ".join(f"{d[c]:8.2f}" for c in COLS) + f"  {d['nI']}", flush=True)
    rows = [r for r in rows if not r["nested"]]  # * rows: the truth is no segmentation
    if rows:
        for f, lab in ((statistics.mean, "mean"), (statistics.median, "median")):
            print(f"{lab + f' of {len(rows)} (no *)':>42} "
                  + " ".join(f"{f([r[c] for r in rows]):8.2f}" for c in COLS))
    for s in skipped:
        print("skipped:", s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
