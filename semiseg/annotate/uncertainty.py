"""Uncertainty outputs of `semiseg annotate`: run posteriors, entropy tracks, samples.

Used by annotate/run.py only (a helper room, no job imports another job).

- Run posteriors (the BED score and the GFF3 score column): each output row of
  PREFIX.bed is a maximal run of one label of the Viterbi labels (labels_to_segments
  merges consecutive segments of one label). Its score is the exact probability that
  this run is exactly right: every position of it has the label, and the positions just
  before and after it (where they exist) have another label
  (`semiseg.crf.run_posteriors`). It is computed under the CRF of the sequence that was
  decoded: the whole chromosome or region when it is decoded as one sequence; with
  windowed decoding, the window whose kept centre contains the run's midpoint, and only
  when the run lies inside that window without touching a window edge that is not a
  sequence edge (otherwise, and for rows cut by gap/N runs, there is no exact value: NaN,
  BED score 0 and GFF3 score ".").
- Entropy tracks, from the per-position marginals (already stitched from window
  centres): label entropy -sum_c p log p and boundary entropy (the binary entropy of
  P(a segment starts here)), in nats.
- Samples: exact posterior samples of the decoded sequence (`semiseg.crf.sample`).
  With windowed decoding, sample n is the concatenation of the kept centres of sample n
  of each window (exact within each window, not across the window junctions).
"""

from __future__ import annotations

import numpy as np
import torch

from ..crf import position_entropy, run_posteriors, sample
from ..genemodel.frames import merge_runs
from ..genome._util import runs


def _crf_args(crf, em: torch.Tensor, hid, lengths: torch.Tensor) -> tuple[tuple, dict]:
    t = crf._terms(em, lengths, hid)
    args = (t.pop("scores"), t.pop("transition"), t.pop("duration_bias"))
    return args, t


def has_run_posteriors(crf) -> bool:
    """Whether runs of crf's labels have an exact posterior here: not for the
    reading-frame model, where a run of a scheme label is many internal labellings
    (docs/annotate.md: rows without an exact value)."""
    return not hasattr(crf, "layout")


@torch.no_grad()
def window_run_posteriors(crf, em: torch.Tensor, hid, lengths: torch.Tensor,
                          labels: torch.Tensor, spans: list[tuple[int, int, int]]) -> np.ndarray:
    """Run posteriors (float64 numpy) of `spans` (b, start, end) under the labels (B, T),
    for a crf that has them (has_run_posteriors; the callers leave NaN where not)."""
    if not spans:
        return np.zeros(0)
    args, kw = _crf_args(crf, em, hid, lengths)
    p = run_posteriors(*args, labels=labels, spans=spans, **kw)
    return p.double().cpu().numpy()


def per_step_run_posteriors(crf, em, hid, lengths, labels: torch.Tensor) -> list[np.ndarray]:
    """For each sequence b: a (L_b,) float array, the run posterior of the run of the
    Viterbi labels that covers each step (one call for the whole batch)."""
    if not has_run_posteriors(crf):
        return [np.full(L, np.nan) for L in lengths.tolist()]
    lab = labels.cpu().numpy()
    spans = []
    for b, L in enumerate(lengths.tolist()):
        s, e, _ = runs(lab[b, :L])
        spans += [(b, int(a), int(z)) for a, z in zip(s, e)]
    p = window_run_posteriors(crf, em, hid, lengths, labels, spans)
    out = [np.full(L, np.nan) for L in lengths.tolist()]
    for (b, a, z), v in zip(spans, p.tolist()):
        out[b][a:z] = v
    return out


def entropy_tracks(post: torch.Tensor, bnd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Label and boundary entropy (nats) per step from (..., C) and (...) marginals:
    computed in float64 on their device, returned in float32."""
    h_lab, h_bnd = position_entropy(post.double(), bnd.double())
    return h_lab.float(), h_bnd.float()


@torch.no_grad()
def draw_samples(crf, em, hid, lengths, n: int, seed: int):
    """Samples[b][i]: (start, duration, label) steps of sample i of sequence b."""
    args, kw = _crf_args(crf, em, hid, lengths)
    out = sample(*args, num_samples=n, seed=seed, **kw)
    if hasattr(crf, "layout"):  # internal labels -> scheme labels, runs merged
        to = crf.layout.scheme_label
        out = [[merge_runs(segs, to) for segs in per_seq] for per_seq in out]
    return out


def clip_samples(samples: list[list[tuple[int, int, int]]], lo: int, hi: int, shift: int):
    """Keep the parts of each sample's segments inside steps [lo, hi), moved by `shift`."""
    out = []
    for segs in samples:
        rows = []
        for s, d, c in segs:
            a, z = max(s, lo), min(s + d, hi)
            if a < z:
                rows.append((a + shift, z - a, c))
        out.append(rows)
    return out


def write_samples(path: str, rows_by_chrom: list[tuple[str, int, list]], names: list[str],
                  colors: list[tuple[int, int, int]], res: int) -> None:
    """PREFIX.samples.bed (BED9): one row per sampled segment, name = `sampleN:LABEL`
    (split at the first ':'), grouped by chromosome, then sample, then position.
    `rows_by_chrom`: (chrom, length bp, samples) with samples[i] = list of
    (start step, duration, label) covering the chromosome's decoded steps."""
    import os

    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("# semiseg posterior samples: name = sampleN:LABEL; exact samples of the "
                 "decoded sequence (windowed decoding: joined window centres)\n")
        for chrom, length, samples in rows_by_chrom:
            lines = []
            for i, segs in enumerate(samples):
                for s, d, c in segs:
                    a, z = s * res, min((s + d) * res, length)
                    if a >= z:
                        continue
                    r, g, b = colors[c]
                    lines.append(f"{chrom}\t{a}\t{z}\tsample{i}:{names[c]}\t0\t.\t{a}\t{z}\t"
                                 f"{r},{g},{b}\n")
            fh.write("".join(lines))
    os.replace(tmp, path)
