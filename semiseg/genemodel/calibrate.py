"""Held-out calibration of the gene model's encoder scale (`train.calibrate`).

The gene model's head adds counted terms (site matrices, the coding-content chain, ORF
lengths) to the encoder's emissions, each with a learned weight, and the transitions and
durations are learned beside them. All of it is fitted on the training windows, where
the encoder, the part with by far the most parameters, fits best: the head learns to
trust the encoder more than it earns on sequence it has not seen. On fly (three seeds of
configs/gene_structure.yaml) the validation windows' negative log-likelihood was lowest
with the encoder's emissions scaled by 0.85-0.9, and annotation with 0.85 called more of
the true genes (benchmarks/RESULTS-log.md, "The encoder's scale fitted on held-out
windows").

So after training one scalar `encoder_scale`, multiplying every encoder emission of the
head (FrameHead._terms), is fitted on the validation windows by their CRF negative
log-likelihood (the training loss itself), everything else fixed: a golden-section search
over [LO, HI]. The checkpoint records it under "calibration" (best.pt is written again);
`semiseg annotate` applies it (checkpoint._segmenter) and names it in its log.

`fit_head_terms` (an experiment, `scripts/calibrate_checkpoint.py --terms`; not a
training option) refits the scale together with the head's other scalars learned
beside the encoder (TERMS) and records them under "calibration"/"params", which loading
applies too. On fly it lowered the validation NLL and every F1 (RESULTS-log, "Eighth
round"), so `train.calibrate` fits the scale alone.

`train.calibrate_orf` then fits one weight in [0, 1] on the ORF-length curves
(orflength.OrfLengthScores, built for single-exon genes: a stop codon's curve reads the
genomic ORF it closes, which for a gene's last exon is that exon) the same way, the
encoder scale fitted first (fit_orf_weight); the weighted curves go under
"calibration"/"params". On fly's three folds it took every fold's weight to 0 and every
F1 but gene F1 (level) rose; on the test region it did not hold (RESULTS-log, "The
ORF-length scores weighed on held-out windows"), so it is off by default.
"""

from __future__ import annotations

import math

import torch

LO, HI, TOL = 0.3, 1.5, 0.005
ORF_TOL = 0.02  # the ORF weight's search, over [0, 1]
MAX_WINDOWS = 512  # validation windows used at most (spread over the set)


@torch.no_grad()
def _emissions(model, dataset, device, batch_size: int) -> list:
    """The encoder's emissions of the validation windows (float32 on the host), with
    their lengths and gold labels, in batches."""
    n = len(dataset)
    idx = list(range(n))
    if n > MAX_WINDOWS:
        idx = [round(i * (n - 1) / (MAX_WINDOWS - 1)) for i in range(MAX_WINDOWS)]
    out = []
    for i in range(0, len(idx), batch_size):
        x, lengths, y = dataset.batch(idx[i:i + batch_size])
        em, _, _ = model(x.to(device), lengths.to(device))
        out.append((em.float().cpu(), lengths.cpu(), y.cpu()))
    return out


def _nll_sum(head, cached: list, device, norm: float = 1.0, scale=None) -> tuple[float, int]:
    """The cached windows' NLL summed / `norm`, and their bases; windows whose gold the
    grammar forbids are left out. With gradients on, one backward per batch of its sum /
    norm (they accumulate). `scale`: a callable giving the encoder scale, made anew for
    each batch (a batch's backward frees its graph)."""
    total, bases = 0.0, 0
    for em, lengths, y in cached:
        if scale is not None:
            head.encoder_scale = scale()
        nll = head.nll(em.to(device), y.to(device), lengths.to(device)).double()
        ok = torch.isfinite(nll)
        loss = nll[ok].sum() / norm
        if loss.requires_grad:
            loss.backward()
        total += float(loss.detach())
        bases += int(lengths[ok.cpu()].sum())
    return total, bases


@torch.no_grad()
def validation_nll(head, cached: list, scale: float, device) -> float:
    """The windows' negative log-likelihood per base with the encoder scaled by `scale`
    (windows whose gold the grammar forbids are left out)."""
    old = head.encoder_scale
    head.encoder_scale = scale
    try:
        total, bases = _nll_sum(head, cached, device)
    finally:
        head.encoder_scale = old
    return total / max(bases, 1)


def fit_encoder_scale(model, dataset, device, batch_size: int = 8) -> dict | None:
    """The encoder scale with the smallest validation NLL (golden-section search over
    [LO, HI] to TOL), or None without validation windows or a gene-model head. Returns
    {"encoder_scale", "nll_before", "nll_after", "windows", "evaluations"}; the model's
    head keeps its scale (1 when trained)."""
    head = getattr(model, "crf", None)
    if dataset is None or len(dataset) == 0 or not hasattr(head, "encoder_scale"):
        return None
    was = model.training
    model.eval()
    try:
        cached = _emissions(model, dataset, device, batch_size)
        seen: dict[float, float] = {}

        def f(s: float) -> float:
            s = round(s, 6)
            if s not in seen:
                seen[s] = validation_nll(head, cached, s, device)
            return seen[s]

        golden_min(f, LO, HI, TOL)
        best = min(seen, key=seen.get)
        before = f(1.0)
        if before <= seen[best]:  # the search did not beat the model as trained
            best = 1.0
    finally:
        model.train(was)
    return {"encoder_scale": float(best), "nll_before": before, "nll_after": seen[best],
            "windows": sum(len(lengths) for _, lengths, _ in cached),
            "evaluations": len(seen)}


def golden_min(f, a: float, b: float, tol: float) -> None:
    """Golden-section search for a minimum of `f` on [a, b] to `tol` (f memoises)."""
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    while b - a > tol:
        if f(c) <= f(d):
            b, d = d, c
            c = b - g * (b - a)
        else:
            a, c = c, d
            d = a + g * (b - a)


def fit_orf_weight(model, dataset, device, batch_size: int = 8) -> dict | None:
    """The weight w in [0, 1] on the head's ORF-length curves (knots * w) with the
    smallest validation NLL (golden-section search to ORF_TOL, the ends tried too;
    everything else as the model is, its encoder scale included), or None without
    validation windows or ORF-length scores. Returns {"orf_weight", "nll_before",
    "nll_after", "evaluations", "params": {"crf.orf_length.knots": the weighted knots}};
    w = 1 where no weight beats the curves as trained. The model is left as it was."""
    head = getattr(model, "crf", None)
    orf = getattr(head, "orf_length", None)
    if dataset is None or len(dataset) == 0 or orf is None:
        return None
    was = model.training
    model.eval()
    knots = orf.knots
    k0 = knots.detach().clone()
    try:
        cached = _emissions(model, dataset, device, batch_size)
        seen: dict[float, float] = {}

        @torch.no_grad()
        def f(w: float) -> float:
            w = round(min(max(w, 0.0), 1.0), 6)
            if w not in seen:
                knots.copy_(k0 * w)
                total, bases = _nll_sum(head, cached, device)
                seen[w] = total / max(bases, 1)
            return seen[w]

        before = f(1.0)
        f(0.0)
        golden_min(f, 0.0, 1.0, ORF_TOL)
        best = min(seen, key=seen.get)
        if not seen[best] < before:
            best = 1.0
    finally:
        with torch.no_grad():
            knots.copy_(k0)
        model.train(was)
    return {"orf_weight": float(best), "nll_before": before, "nll_after": seen[best],
            "evaluations": len(seen),
            "params": {"crf.orf_length.knots": (k0 * best).cpu().tolist()}}


def after_training(model, cfg, valid_ds, device) -> tuple[dict, list[str]]:
    """What `semiseg train` records for a trained gene model (its best weights loaded):
    with train.calibrate the fitted encoder scale (fit_encoder_scale; with
    train.calibrate_introns the tied introns' per-strand constants then fitted with it, from
    that scale, fit_head_terms, and applied to the model for the next step), with
    train.symmetric_introns the strand-symmetric tied-intron constants
    (symmetry.symmetric_intron_bias, under "params"). Returns the checkpoint's
    "calibration" record ({} when there is nothing to record) and lines for the log."""
    cal: dict = {}
    lines = []
    if cfg.train.calibrate:
        introns = (cfg.train.calibrate_introns
                   and getattr(model.crf, "noncoding_bias", None) is not None)
        # the scale alone (a golden-section search); with calibrate_introns the
        # constants and the scale then fitted together (L-BFGS) from that scale. Not
        # from the trained scale 1: there the joint fit stopped at 1.00 for most fly
        # runs (their scale alone: 0.85-0.91, a lower validation NLL), losing the scale
        # fit of the recipe that was measured and adopted (RESULTS-log, "Sixteenth round")
        fit = fit_encoder_scale(model, valid_ds, device, cfg.train.batch_size)
        if fit is not None and introns:
            trained, model.crf.encoder_scale = model.crf.encoder_scale, fit["encoder_scale"]
            try:
                joint = fit_head_terms(model, valid_ds, device, cfg.train.batch_size,
                                       terms=("noncoding_bias",))
            finally:
                model.crf.encoder_scale = trained
            if not LO <= joint["encoder_scale"] <= HI:
                # the joint fit left the scale's range (a model that barely reads its
                # encoder): the scale alone, in range, and the constants as trained
                lines.append(f"calibration: the tied-intron constants' fit took the "
                             f"encoder scale to {joint['encoder_scale']:.3g}, outside "
                             f"[{LO}, {HI}]: the scale is fitted alone")
            else:
                joint["nll_before"] = fit["nll_before"]  # as trained (scale 1)
                joint["evaluations"] += fit["evaluations"]
                fit = joint
        if fit is None:
            lines.append("calibration: no validation windows; the encoder scale stays 1")
        else:
            cal.update(fit)
            lines.append(f"calibration: encoder scale {fit['encoder_scale']:.3f} on "
                         f"{fit['windows']} validation windows (NLL per base "
                         f"{fit['nll_before']:.5f} -> {fit['nll_after']:.5f}, "
                         f"{fit['evaluations']} evaluations)")
            for name, value in (fit.get("params") or {}).items():
                param = model.get_parameter(name)
                was = ", ".join(f"{b:.5f}" for b in param.tolist())
                with torch.no_grad():
                    param.copy_(torch.as_tensor(value, dtype=param.dtype))
                lines.append(f"calibration: {name} {was} -> "
                             + ", ".join(f"{b:.5f}" for b in param.tolist()))
    if cfg.train.calibrate and cfg.train.calibrate_orf:
        lines += _orf_weight(model, cfg, valid_ds, device, cal)
    if cfg.train.symmetric_introns:
        from .symmetry import symmetric_intron_bias

        bias = symmetric_intron_bias(model.crf)
        if bias is not None:
            was = ", ".join(f"{b:.5f}" for b in model.crf.noncoding_bias.tolist())
            cal["params"] = dict(cal.get("params") or {}, **{"crf.noncoding_bias": bias})
            lines.append(f"symmetric introns: tied-intron constants per strand {was} -> "
                         + ", ".join(f"{b:.5f}" for b in bias))
    return cal, lines


def record_orf_weight(cal: dict, fit: dict) -> None:
    """A fit_orf_weight result recorded in the calibration `cal` (its weight, and its
    weighted curves merged into the params others recorded)."""
    cal["orf_weight"] = fit["orf_weight"]
    cal["params"] = dict(cal.get("params") or {}, **fit["params"])


def _orf_weight(model, cfg, valid_ds, device, cal: dict) -> list[str]:
    """train.calibrate_orf: fit_orf_weight with the fitted encoder scale in place, its
    weighted curves added to `cal`'s params and applied to the model; the log's lines."""
    head = model.crf
    trained = head.encoder_scale
    head.encoder_scale = cal.get("encoder_scale", trained)
    try:
        fit = fit_orf_weight(model, valid_ds, device, cfg.train.batch_size)
    finally:
        head.encoder_scale = trained
    if fit is None:
        return ["calibration: no validation windows or no ORF-length scores; the ORF "
                "weight stays 1"]
    record_orf_weight(cal, fit)
    with torch.no_grad():
        head.orf_length.knots.copy_(torch.as_tensor(fit["params"]["crf.orf_length.knots"]))
    return [f"calibration: ORF-length weight {fit['orf_weight']:.2f} (NLL per base "
            f"{fit['nll_before']:.5f} -> {fit['nll_after']:.5f}, {fit['evaluations']} "
            "evaluations)"]


# train.calibrate: "terms": the head parameters refitted with the encoder scale, each a
# weight or a constant learned beside the encoder on the training windows (the model's
# names, under `crf.`): the coding-content chain's weight, the site matrices' weights and
# the tied introns' per-base constants (the long-intron against intergenic balance)
TERMS = ("content.weight", "sites.weight", "noncoding_bias")
MAX_ITER = 40


def fit_head_terms(model, dataset, device, batch_size: int = 8,
                   max_iter: int = MAX_ITER, terms: tuple = TERMS) -> dict | None:
    """The encoder scale and the head's TERMS that minimise the validation windows'
    NLL together (`terms`: names under the head; L-BFGS from the trained values, the
    scale as exp(u), everything else
    fixed), or None as fit_encoder_scale. Returns fit_encoder_scale's keys plus
    "params" ({model parameter name: value as a list}); the model is left as trained.
    When the fit does not lower the NLL the trained values are returned."""
    head = getattr(model, "crf", None)
    if dataset is None or len(dataset) == 0 or not hasattr(head, "encoder_scale"):
        return None
    named = {n: p for n, p in head.named_parameters() if n in terms}
    was, grads = model.training, {p: p.requires_grad for p in model.parameters()}
    trained = {n: p.detach().clone() for n, p in named.items()}
    scale0 = float(head.encoder_scale)
    model.eval()
    try:
        cached = _emissions(model, dataset, device, batch_size)
        with torch.no_grad():
            before, bases = _nll_sum(head, cached, device)
        bases = max(bases, 1)
        before /= bases
        for p in model.parameters():
            p.requires_grad_(False)
        u = torch.tensor(math.log(scale0), dtype=torch.float32, device=device,
                         requires_grad=True)
        for p in named.values():
            p.requires_grad_(True)
        opt = torch.optim.LBFGS([u, *named.values()], lr=1.0, max_iter=max_iter,
                                line_search_fn="strong_wolfe")
        calls = [0]

        def closure() -> float:
            opt.zero_grad()
            calls[0] += 1
            return _nll_sum(head, cached, device, bases, scale=u.exp)[0]

        opt.step(closure)
        after = validation_nll(head, cached, float(u.detach().exp()), device)
        fitted = {n: p.detach().clone() for n, p in named.items()}
        scale = float(u.detach().exp())
        if not after < before:  # the fit did not beat the model as trained
            fitted, scale, after = trained, scale0, before
    finally:
        with torch.no_grad():
            for n, p in named.items():
                p.copy_(trained[n])
        for p, g in grads.items():
            p.requires_grad_(g)
        head.encoder_scale = scale0
        model.train(was)
    return {"encoder_scale": scale, "nll_before": before, "nll_after": after,
            "windows": sum(len(lengths) for _, lengths, _ in cached),
            "evaluations": calls[0] + 2,
            "params": {f"crf.{n}": v.cpu().tolist() for n, v in fitted.items()}}

