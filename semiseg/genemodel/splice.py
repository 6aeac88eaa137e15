"""Splice-site channels of the gene encoder (`model.splice_features`).

The donor and acceptor position weight matrices of semiseg/genemodel/sites.py (counted at the
training genes' introns), scored at every base on both strands, become four input
channels of the gene encoder (model.GeneEncoder): donor and acceptor on each strand, at
the intron's splice base (the intron's first base for a donor, its last for an acceptor,
in the transcript's direction). `SpliceSignals` holds the log-odds as buffers (saved
with the model), so a model trained with them annotates with the same ones. A site's
channel is its log-odds divided by SCALE (about +-1 for a real or a random site).
The CRF head's own use of the same matrices (and of start and stop codon matrices) is
`crf.site_scores` (sites.SiteScores).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from .sites import SITES, pwm_scores

N_SPLICE = 4  # donor+, acceptor+, donor-, acceptor-
DONOR = SITES["donor"]       # bases before the splice base, bases from it on (incl.)
ACCEPTOR = SITES["acceptor"]
SCALE = 10.0


class SpliceSignals(nn.Module):
    """The four splice-site channels of a one-hot sequence (B, T, 4) -> (B, T, 4):
    donor+, acceptor+, donor-, acceptor- scores at each base read as that splice base."""

    def __init__(self):
        super().__init__()
        self.register_buffer("donor", torch.zeros(4, sum(DONOR)))
        self.register_buffer("acceptor", torch.zeros(4, sum(ACCEPTOR)))

    def set(self, donor: np.ndarray, acceptor: np.ndarray) -> None:
        self.donor.copy_(torch.as_tensor(donor))
        self.acceptor.copy_(torch.as_tensor(acceptor))

    def forward(self, onehot: Tensor) -> Tensor:
        x = onehot.transpose(1, 2).float()
        chans = [pwm_scores(x, self.donor, DONOR[0], False),
                 pwm_scores(x, self.acceptor, ACCEPTOR[0], False),
                 pwm_scores(x, self.donor, DONOR[0], True),
                 pwm_scores(x, self.acceptor, ACCEPTOR[0], True)]
        return (torch.stack(chans, -1) / SCALE).to(onehot.dtype)
