"""Fit the encoder scale of a gene-model checkpoint trained before `train.calibrate`
existed (semiseg/genemodel/calibrate.py), on the validation windows of the run's own
config (the data paths it records, or --fasta / --annotation), and write the checkpoint
with it to OUT. `semiseg train` does this itself after the last epoch.

    python scripts/calibrate_checkpoint.py MODEL.pt OUT.pt [--fasta FA] [--annotation GFF]
        [--terms]

--terms: refit the head's counted-term weights and intron constants with the scale
(calibrate.fit_head_terms; an experiment). --orf: keep the checkpoint's calibration and
add the ORF-length weight fitted with it (calibrate.fit_orf_weight, train.calibrate_orf).
--symmetric-introns: instead of a fit, add the
strand-symmetric tied-intron constants (genemodel/symmetry.py, train.symmetric_introns)
to the checkpoint's calibration as it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from semiseg.checkpoint import build_model, load_checkpoint, save_checkpoint  # noqa: E402
from semiseg.genemodel.calibrate import (  # noqa: E402
    TERMS,
    fit_encoder_scale,
    fit_head_terms,
    fit_orf_weight,
    record_orf_weight,
)
from semiseg.train.loop import _load_data  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--fasta", nargs="+")
    ap.add_argument("--annotation")
    ap.add_argument("--terms", nargs="*", default=None,
                    help="refit these head parameters too (none named: calibrate.TERMS)")
    ap.add_argument("--symmetric-introns", action="store_true")
    ap.add_argument("--orf", action="store_true", help="add the fitted ORF-length weight")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    ckpt = load_checkpoint(a.model)
    if a.symmetric_introns:
        _symmetric(ckpt, a.model, a.out)
        return
    cfg = ckpt.config
    if a.fasta:
        cfg = dataclasses.replace(cfg, inputs=dataclasses.replace(cfg.inputs, fasta=a.fasta))
    if a.annotation:
        cfg = dataclasses.replace(cfg, labels=dataclasses.replace(cfg.labels,
                                                                  annotation=a.annotation))
    *_, valid_ds = _load_data(cfg)
    model, _ = build_model(ckpt)
    device = torch.device(a.device)
    model.to(device)
    if a.orf:
        _orf(ckpt, model, valid_ds, device, cfg, a.out)
        return
    if a.terms is None:
        fit = fit_encoder_scale(model, valid_ds, device, cfg.train.batch_size)
    else:
        fit = fit_head_terms(model, valid_ds, device, cfg.train.batch_size,
                             terms=tuple(a.terms) or TERMS)
    if fit is None:
        sys.exit("no validation windows in the run's config (or not a gene model)")
    state = dict(ckpt.data)
    state["calibration"] = fit
    save_checkpoint(state, a.out)
    print(f"{a.model}: encoder scale {fit['encoder_scale']:.3f} on {fit['windows']} windows "
          f"(NLL per base {fit['nll_before']:.5f} -> {fit['nll_after']:.5f}, "
          f"{fit['evaluations']} evaluations) -> {a.out}")
    for name, value in fit.get("params", {}).items():
        print(f"  {name}: {value}")


def _orf(ckpt, model, valid_ds, device, cfg, out: str) -> None:
    """The checkpoint (its calibration applied, as annotate loads it) with the
    ORF-length weight fitted and added to its calibration."""
    fit = fit_orf_weight(model, valid_ds, device, cfg.train.batch_size)
    if fit is None:
        sys.exit("no validation windows or no ORF-length scores (crf.orf_length_scores)")
    state = dict(ckpt.data)
    cal = dict(state.get("calibration") or {})
    record_orf_weight(cal, fit)
    state["calibration"] = cal
    save_checkpoint(state, out)
    print(f"ORF-length weight {fit['orf_weight']:.3f} (NLL per base {fit['nll_before']:.5f}"
          f" -> {fit['nll_after']:.5f}, {fit['evaluations']} evaluations) -> {out}")


def _symmetric(ckpt, path: str, out: str) -> None:
    from semiseg.genemodel.symmetry import symmetric_intron_bias

    model, _ = build_model(ckpt)
    bias = symmetric_intron_bias(model.crf)
    if bias is None:
        sys.exit(f"{path}: no tied introns on two strands (crf.tie_noncoding)")
    state = dict(ckpt.data)
    cal = dict(state.get("calibration") or {})
    cal["params"] = dict(cal.get("params") or {}, **{"crf.noncoding_bias": bias})
    state["calibration"] = cal
    save_checkpoint(state, out)
    print(f"{path}: tied-intron constants {model.crf.noncoding_bias.tolist()} -> {bias} "
          f"-> {out}")


if __name__ == "__main__":
    main()
