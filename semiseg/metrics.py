"""Segmentation metrics shared by training (validation) and evaluation.

All work on label arrays (one label index per position, -1 = unlabelled) or on a
confusion matrix; nothing here knows about files, genomes or models (numpy only, so
validation can call it on a GPU machine with torch alone).

- base level: a ``[truth, pred]`` confusion matrix, per-label F1 from it;
- segments (maximal runs of one label): exact matches and >= 50% reciprocal-overlap
  matches; boundaries (segment ends, not the sequence ends) matched one-to-one within a
  tolerance. Counts add up over sequences (``new_segment_counts``,
  ``add_segment_counts``); ``segment_f1`` turns them into F1 per label;
- genes (coding exon chains as keys): exon- and gene-level sensitivity, precision and
  F1 (``gene_level``), truth isoforms grouped into loci (``loci``).
"""

from __future__ import annotations

import math

import numpy as np

from .genome._util import runs


def confusion(pred, true, C: int) -> np.ndarray:
    """``(C, C)`` counts ``[truth, pred]`` over positions with ``true >= 0``; numpy arrays
    or torch tensors of equal shape."""
    ok = true >= 0
    idx = true[ok] * C + pred[ok]
    idx = idx.cpu().numpy() if hasattr(idx, "cpu") else np.asarray(idx)
    return np.bincount(idx, minlength=C * C).reshape(C, C)


def f1_scores(conf: np.ndarray) -> np.ndarray:
    """Per-label F1 from a [truth, pred] confusion matrix (nan for absent labels)."""
    tp = np.diag(conf).astype(float)
    denom = conf.sum(0) + conf.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / denom, np.nan)


def prf(tp: float, n_pred: float, n_true: float) -> tuple[float, float, float]:
    """Precision, recall and F1 from counts (nan where undefined)."""
    p = tp / n_pred if n_pred else float("nan")
    r = tp / n_true if n_true else float("nan")
    f = 2 * tp / (n_pred + n_true) if (n_pred + n_true) else float("nan")
    return p, r, f


def nanmean(values) -> float:
    """Mean of the values that are not nan (nan if none)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(v.mean()) if len(v) else float("nan")


def _overlap_matches(ps, pe, ts, te) -> tuple[int, int]:
    """Numbers of predicted and true segments with a >= 50% reciprocal-overlap partner."""
    hit_p = np.zeros(len(ps), bool)
    hit_t = np.zeros(len(ts), bool)
    j = 0
    for i in range(len(ps)):
        while j < len(ts) and te[j] <= ps[i]:
            j += 1
        k = j
        while k < len(ts) and ts[k] < pe[i]:
            ov = min(pe[i], te[k]) - max(ps[i], ts[k])
            if 2 * ov >= pe[i] - ps[i] and 2 * ov >= te[k] - ts[k]:
                hit_p[i] = hit_t[k] = True
            k += 1
    return int(hit_p.sum()), int(hit_t.sum())


def _boundary_matches(p: np.ndarray, t: np.ndarray, tol: int) -> int:
    """One-to-one matches between sorted boundary positions within +-tol (greedy, optimal
    on a line)."""
    i = j = n = 0
    while i < len(p) and j < len(t):
        if abs(int(p[i]) - int(t[j])) <= tol:
            n, i, j = n + 1, i + 1, j + 1
        elif p[i] < t[j]:
            i += 1
        else:
            j += 1
    return n


def new_segment_counts(C: int) -> dict[str, np.ndarray]:
    """Zeroed per-label counters for `add_segment_counts`."""
    return {k: np.zeros(C, np.int64) for k in ("n_pred", "n_true", "exact", "ov_pred",
                                               "ov_true", "b_pred", "b_true", "b_hit")}


def add_segment_counts(seg: dict, truth: np.ndarray, pred: np.ndarray, tolerance: int) -> None:
    """Add the segment and boundary counts of one sequence (label arrays of equal length,
    -1 = unlabelled) to `seg`: segments, exact matches, >= 50% reciprocal-overlap matches,
    boundaries and boundaries matched within `tolerance` positions, per label."""
    L = len(truth)
    trs, tre, trv = runs(truth)
    prs, pre, prv = runs(pred)
    for c in range(len(seg["n_pred"])):
        ts, te = trs[trv == c], tre[trv == c]
        ps, pe = prs[prv == c], pre[prv == c]
        seg["n_pred"][c] += len(ps)
        seg["n_true"][c] += len(ts)
        seg["exact"][c] += len(set(zip(ps.tolist(), pe.tolist()))
                               & set(zip(ts.tolist(), te.tolist())))
        hp, ht = _overlap_matches(ps, pe, ts, te)
        seg["ov_pred"][c] += hp
        seg["ov_true"][c] += ht
        pb = np.unique(np.concatenate([ps, pe]))
        tb = np.unique(np.concatenate([ts, te]))
        pb = pb[(pb > 0) & (pb < L)]
        tb = tb[(tb > 0) & (tb < L)]
        seg["b_pred"][c] += len(pb)
        seg["b_true"][c] += len(tb)
        seg["b_hit"][c] += _boundary_matches(pb, tb, tolerance)


def segment_f1(seg: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per-label F1 of >= 50% reciprocal-overlap segment matches and of boundaries
    (nan where a label has no segments on either side)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = seg["ov_pred"] / seg["n_pred"]
        r = seg["ov_true"] / seg["n_true"]
        ov = np.where((p + r) > 0, 2 * p * r / (p + r), 0.0)
        ov = np.where((seg["n_pred"] + seg["n_true"]) > 0, ov, np.nan)
        ov = np.where((seg["n_pred"] > 0) & (seg["n_true"] > 0), ov,
                      np.where((seg["n_pred"] + seg["n_true"]) > 0, 0.0, np.nan))
        nb = seg["b_pred"] + seg["b_true"]
        bf = np.where(nb > 0, 2 * seg["b_hit"] / nb, np.nan)
    return ov, bf



# --------------------------------------------------------------------------- genes
# A gene model here is a key (chrom, strand, cds): cds a tuple of sorted, disjoint
# (start, end) coding exons (semiseg/evaluate/genelevel.py reads them from files).


def stop_variants(key: tuple) -> set[tuple]:
    """The model itself and the model with its 3' end (the end of the last exon on +, the
    start of the first on -) moved 3 bp either way: the matching rule when stop codons
    cannot be normalised from the sequence (a stop codon inside or just after the CDS)."""
    chrom, strand, cds = key
    out = {key}
    for d in (-3, 3):
        c = list(cds)
        if strand == "+":
            c[-1] = (c[-1][0], c[-1][1] + d)
        else:
            c[0] = (c[0][0] - d, c[0][1])
        ok = all(s < e for s, e in c) and c[0][0] >= 0 and all(
            c[i][1] < c[i + 1][0] for i in range(len(c) - 1))
        if ok:
            out.add((chrom, strand, tuple(c)))
    return out


def loci(keys: list[tuple]) -> list[int]:
    """A locus number per model: models on one chromosome and strand whose coding exons
    overlap by >= 1 bp (directly or through others) share a locus."""
    parent = list(range(len(keys)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    order = sorted(range(len(keys)), key=lambda i: (keys[i][0], keys[i][1], keys[i][2][0][0]))
    active: list[int] = []  # models of the current chrom/strand whose span may still overlap
    for i in order:
        chrom, strand, cds = keys[i]
        active = [j for j in active if keys[j][0] == chrom and keys[j][1] == strand
                  and keys[j][2][-1][1] > cds[0][0]]
        for j in active:
            if any(s < e2 and s2 < e for s, e in cds for s2, e2 in keys[j][2]):
                parent[find(i)] = find(j)
        active.append(i)
    roots: dict[int, int] = {}
    return [roots.setdefault(find(i), len(roots)) for i in range(len(keys))]


def gene_level(truth: list[tuple], pred: list[tuple], variants=None) -> dict:
    """Exon- and gene-level sensitivity, precision and F1 (as gene-finder papers count).

    Exon level: the distinct coding exons (chrom, strand, start, end) of all truth models
    against those of all predicted models; an exon is right when both ends and the strand
    are. Gene level: a predicted model is right when its whole coding exon chain is that
    of a truth model (any isoform; it counts once however many it matches); precision =
    right predicted models / predicted models. Sensitivity counts truth loci (`loci`:
    isoforms and duplicates of a gene are one locus): a locus is found when one of its
    models is predicted exactly; precision and sensitivity make the F1.
    `variants(key)`: the set of keys that count as the same model (default: the key
    alone; `stop_variants` when stop codons were not normalised); exon ends follow it.
    """
    variants = variants or (lambda k: {k})
    t_var = [variants(k) for k in truth]
    p_keys = set(pred)
    t_all = set().union(*t_var) if t_var else set()

    def exons(key):
        return {(key[0], key[1], s, e) for s, e in key[2]}

    # exons: a truth exon is found when a variant of it (from a model it belongs to) is a
    # predicted exon; a predicted exon is right when it is an exon of a truth variant
    p_ex = set().union(*(exons(k) for k in pred)) if pred else set()
    t_ex_all = set().union(*(exons(v) for vs in t_var for v in vs)) if t_var else set()
    found: dict[tuple, bool] = {}
    for k, vs in zip(truth, t_var):
        for i, (s, e) in enumerate(k[2]):
            ex = (k[0], k[1], s, e)
            alts = {(v[0], v[1]) + v[2][i] for v in vs if len(v[2]) == len(k[2])}
            found[ex] = found.get(ex, False) or bool(alts & p_ex)
    ex_tp_pred = len(p_ex & t_ex_all)
    ex_sens = sum(found.values()) / len(found) if found else float("nan")
    ex_prec = ex_tp_pred / len(p_ex) if p_ex else float("nan")

    lo = loci(truth)
    n_loci = len(set(lo))
    locus_found = set()
    chains_found = set()
    for k, vs, locus in zip(truth, t_var, lo):
        if vs & p_keys:
            locus_found.add(locus)
            chains_found.add(k)
    g_tp_pred = sum(k in t_all for k in pred)
    g_sens = len(locus_found) / n_loci if n_loci else float("nan")
    g_prec = g_tp_pred / len(pred) if pred else float("nan")

    def f1(p, r):
        if math.isnan(p) or math.isnan(r):
            return float("nan")
        return 2 * p * r / (p + r) if p + r > 0 else 0.0

    return {
        "truth_models": len(truth), "truth_chains": len(set(truth)), "truth_loci": n_loci,
        "pred_models": len(pred),
        "exon": {"truth": len(found), "pred": len(p_ex), "truth_found": int(sum(found.values())),
                 "pred_right": ex_tp_pred, "sensitivity": ex_sens, "precision": ex_prec,
                 "f1": f1(ex_prec, ex_sens)},
        "gene": {"truth_loci": n_loci, "pred": len(pred), "loci_found": len(locus_found),
                 "chains_found": len(chains_found), "pred_right": g_tp_pred,
                 "sensitivity": g_sens, "precision": g_prec, "f1": f1(g_prec, g_sens)},
    }
