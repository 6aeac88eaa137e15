"""A per-position softmax head with argmax decoding: the no-CRF baseline of the gene model.

Same encoder as the reading-frame model (model.GeneEncoder), but each base is classified
on its own into the scheme's labels (intergenic, CDS+, ...), trained by cross-entropy
on the gold collapsed to scheme labels, and decoded by the most probable label per base.
No gene rule is applied: this is the baseline that shows what the semi-CRF and its
reading frames add (`crf.head: argmax`, docs/gene_model.md).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..crf import Segmentation
from ..errors import SemisegError
from ..genome._util import runs
from .frames import FrameLayout


class ArgmaxHead(nn.Module):
    """Per-base softmax over the scheme labels; the methods FrameHead offers callers.

    Emissions are (B, T, num_labels + 4): the label scores, then the one-hot sequence
    (which this head does not read).
    """

    def __init__(self, layout: FrameLayout):
        super().__init__()
        self.layout = layout
        self.num_labels = len(set(layout.scheme_label))

    def _log_probs(self, emissions: Tensor) -> Tensor:
        return torch.log_softmax(emissions[..., :self.num_labels].float(), -1)

    def nll(self, emissions: Tensor, labels: Tensor, lengths=None, hidden=None, *,
            backend="auto") -> Tensor:
        """Summed cross-entropy of the known bases per sequence; `labels` are gold codes."""
        B, T = labels.shape
        y = torch.as_tensor(self.layout.collapse(labels.cpu().numpy()), device=labels.device)
        if lengths is not None:
            y = y.masked_fill(torch.arange(T, device=y.device)[None, :] >= lengths[:, None], -1)
        lp = self._log_probs(emissions)
        picked = torch.gather(lp, 2, y.clamp(min=0)[..., None])[..., 0]
        return -(picked * (y >= 0)).sum(-1)

    def decode(self, emissions, lengths=None, hidden=None, *, backend="auto") -> Segmentation:
        """The most probable label of each base; runs of one label are the segments."""
        lp = self._log_probs(emissions)
        B, T, _ = lp.shape
        best, lab = lp.max(-1)
        L = torch.full((B,), T, device=lp.device) if lengths is None else lengths
        pad = torch.arange(T, device=lp.device)[None, :] >= L[:, None]
        lab = lab.masked_fill(pad, -1)
        score = best.masked_fill(pad, 0).exp().sum(-1)  # expected correct bases
        lab_np = lab.cpu().numpy()
        segments = []
        for b, n in enumerate(L.tolist()):
            starts, ends, _ = runs(lab_np[b, :n])
            segments.append([(int(s), int(e - s), int(lab_np[b, s]))
                             for s, e in zip(starts, ends)])
        return Segmentation(score=score, segments=segments, labels=lab)

    def marginals(self, emissions, lengths=None, hidden=None, *, backend="auto"):
        """Per-base label probabilities (B, T, C) and boundary probabilities (B, T): the
        chance that neighbouring bases differ, their labels taken as independent."""
        p = self._log_probs(emissions).exp()
        B, T, _ = p.shape
        bnd = torch.ones(B, T, device=p.device)
        bnd[:, 1:] = 1 - (p[:, 1:] * p[:, :-1]).sum(-1)
        if lengths is not None:
            pad = torch.arange(T, device=p.device)[None, :] >= lengths[:, None]
            p = p.masked_fill(pad[..., None], 0.0)
            bnd = bnd.masked_fill(pad, 0.0)
        return p, bnd.clamp(0, 1)

    def _terms(self, *args, **kwargs):
        raise SemisegError("posterior samples need a CRF head; this model was trained with "
                           "crf.head: argmax (no CRF)")
