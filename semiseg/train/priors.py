"""Priors on the CRF head's parameters, added to the training loss.

`crf.duration_step_sd` (sd > 0): a Gaussian random walk over each label's learned
duration scores, score[d + 1] ~ N(score[d], sd^2). Its negative log-density (up to a
constant) is roughness / (2 sd^2), roughness being the head's `duration_roughness()`,
the sum of the squared steps. The training loss is a mean NLL per CRF step, so the
prior joins each batch's loss divided by the CRF steps of one epoch's training windows:
over an epoch the gradients then add up to those of (NLL of the epoch) + (prior), a MAP
estimate. Without it every length's score is free, and lengths seen a few times in the
training genes get scores of their own (the shipped fly model's CDS scores differ by
1.4 nats on average between neighbouring lengths).
"""

from __future__ import annotations


def duration_prior_weight(cfg, windows) -> float:
    """The factor of `duration_roughness()` in each batch's loss: 1 / (2 sd^2 N), N the
    CRF steps of the training windows `windows` (Window objects, bp); 0 when off."""
    sd = float(cfg.crf.duration_step_sd)
    if sd <= 0:
        return 0.0
    step_bp = cfg.inputs.bin_size * cfg.model.resolution
    steps = sum((w.end - w.start) // step_bp for w in windows)
    return 1.0 / (2.0 * sd * sd * max(1, steps))
