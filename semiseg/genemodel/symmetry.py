"""Strand-symmetric tied introns (`train.symmetric_introns`).

With `crf.tie_noncoding` an intron base scores as a background (intergenic) base plus a
learned constant per strand (`FrameHead.noncoding_bias`). Over a long run what decides
intron against intergenic is the *net* score per base: the constant plus the growth per
base of the run's own log-partition (its length model: durations, transitions, run
tails), against the background's growth. Training sets the two strands' nets apart by
noise of up to 0.0007 nats a base (three fly seeds; reverse-complement augmentation
makes them equal only in expectation), and over a 20-50 kb intron that is 15-35 nats:
enough to call a long minus-strand intron as a plus-strand one or as intergenic
sequence (RESULTS-log, "Strand-symmetric tied introns").

So after training, each strand's constant is set so that both strands' nets equal their
mean: the model's average intron-against-intergenic balance is kept, the difference
between the strands (which a genome's two strands do not have) is taken out. Nothing
else changes. The values are recorded in best.pt under "calibration"/"params" (like the
encoder scale, calibrate.py) and applied when the checkpoint is loaded.
"""

from __future__ import annotations

import torch

from ..crf import log_partition

RUN = 6000  # bp: the shorter of the two run lengths whose log Z difference is the rate


def run_rates(head, kinds: list[str]) -> dict[str, float]:
    """Per label kind name in `kinds`, the growth per base of log Z (float64 on the
    host, every score 0) of a long run of that kind alone (its run tails included):
    (log Z(n1) - log Z(n0)) / (n1 - n0), n1 - n0 whole tail pieces so the last piece is
    the same length."""
    lay = head.layout
    names, kind = lay.kind_names, lay._run_kind()
    C = len(kind)
    dev = head.transition.device  # the head's own (after GPU training: CUDA)
    with torch.no_grad():
        t = head._terms(torch.zeros(1, 16, head.n_channels + 4, device=dev),
                        torch.tensor([16], device=dev))
        tr, db = t["transition"].double().cpu(), t["duration_bias"].double().cpu()
        out = {}
        for name in kinds:
            cols = [c for c in range(C) if names[kind[c]] == name]
            tails = [c for c in cols if lay.base[c] != c]
            step = lay.tail_duration(tails[0], head.max_duration) if tails else 1
            n0 = RUN // 2
            n1 = n0 + step * -(-n0 // step)
            allowed = torch.zeros(1, n1, C, dtype=torch.bool)
            allowed[..., cols] = True
            z = [float(log_partition(torch.zeros(1, n, C, dtype=torch.float64), tr, db,
                                     allowed=allowed[:, :n]))
                 for n in (n0, n1)]
            out[name] = (z[1] - z[0]) / (n1 - n0)
    return out


def symmetric_intron_bias(head) -> list[float] | None:
    """The tied-intron constants (noncoding_bias, in its order) that give every strand's
    intron the same net score per base against its background: their mean. None
    without tied introns on two strands."""
    tie = getattr(head, "tie", None)
    if tie is None or len(tie) < 2:
        return None
    ch, names = head.layout.channels, head.layout.kind_names
    kinds = {n[len("outside:"):] if n.startswith("outside:") else n: n for n in names}
    pairs = [(kinds[ch[int(i)]], kinds[ch[int(g)]]) for i, g in tie.tolist()]
    rates = run_rates(head, sorted({k for p in pairs for k in p}))
    bias = [float(b) for b in head.noncoding_bias.detach().cpu()]
    net = [rates[i] + b - rates[g] for (i, g), b in zip(pairs, bias)]
    mean = sum(net) / len(net)
    return [b + mean - n for b, n in zip(bias, net)]
