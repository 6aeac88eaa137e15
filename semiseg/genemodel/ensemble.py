"""Several trained gene models annotating as one (`semiseg ensemble`).

Members are gene models (crf.frames with the semi-CRF head) trained with one config and
one label scheme, differing only in their seed (or their training data). `Ensemble`
runs every member's encoder and hands the CRF head their emissions side by side;
`EnsembleHead` is a FrameHead whose CRF terms are the mean of the members' terms
(scores, transitions, duration bias, start and end): a product of the members'
distributions, renormalised (log-linear pooling), which is again a semi-CRF of the same
form, decoded by the same exact engine in one pass. The sequence rules (`allowed`, the
frame alignment) are the same for every member, so the product keeps them exactly.

An ensemble checkpoint is the first member's checkpoint (its config, scheme, genome and
columns) without optimizer state, plus `members` (one state dict per member) and
`member_hashes`; its `model_hash` hashes all members.
"""

from __future__ import annotations

import hashlib

import torch
from torch import Tensor, nn

from ..config.load import from_dict
from ..errors import SemisegError
from .head import SEQ, FrameHead

# checkpoint keys that must agree between members (what the data and outputs depend on)
SHARED = ("labels", "genome", "n_features", "columns", "feature_names")
# config sections that must agree (train differs: the seed, at least)
SHARED_CONFIG = ("inputs", "labels", "model", "crf")


class EnsembleHead(FrameHead):
    """A FrameHead over the concatenated emissions of `heads` (one block of
    n_channels + 4 channels per member) whose terms are the members' mean."""

    def __init__(self, heads: list[FrameHead]):
        h0 = heads[0]
        super().__init__(h0.layout, h0.max_duration, start_end=h0.start is not None)
        self.members = nn.ModuleList(heads)
        self.width = h0.n_channels + SEQ
        # the branch-point test needs a member's matrix; every member has one or none
        self.sites = h0.sites

    def _terms(self, emissions: Tensor, lengths: Tensor | None, hidden=None) -> dict:
        terms = []
        for i, head in enumerate(self.members):
            for attr in FrameHead.ANNOTATE_SETTINGS:  # what annotate set on this head
                setattr(head, attr, getattr(self, attr))
            terms.append(head._terms(emissions[..., i * self.width:(i + 1) * self.width],
                                     lengths))
        n = len(terms)
        out = dict(terms[0])  # `allowed` and the rest are the same for every member
        for key in ("scores", "transition", "duration_bias", "start", "end"):
            if out[key] is not None:
                out[key] = sum((t[key] / n for t in terms[1:]), terms[0][key] / n)
        return out


class Ensemble(nn.Module):
    """Segmenters run side by side: forward concatenates their emissions."""

    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)
        m0 = members[0]
        self.pool, self.frames, self.has_hidden = m0.pool, True, False
        self.crf = EnsembleHead([m.crf for m in members])
        w = self.crf.width
        self.channel_swap = torch.cat([m.channel_swap + i * w for i, m in enumerate(members)])

    def forward(self, x: Tensor, lengths: Tensor):
        outs = [m(x, lengths) for m in self.members]
        return torch.cat([o[0] for o in outs], dim=-1), None, outs[0][2]


def _shared(ckpt: dict, key: str):
    """ckpt[key], with the genome's file paths left out (the same features may have been
    read from copies in other folders; annotate reads the files it is given)."""
    value = ckpt[key]
    if key == "genome":
        value = {k: v for k, v in value.items() if k != "fasta"}
        value["tracks"] = [{k: v for k, v in t.items() if k != "path"}
                           for t in value.get("tracks", [])]
    return value


def _section(ckpt: dict, key: str):
    return from_dict(ckpt["config"]).to_dict()[key]


def make_ensemble(ckpts: list[dict], names: list[str]) -> dict:
    """One ensemble checkpoint from single-model checkpoints (`names` for messages)."""
    if len(ckpts) < 2:
        raise SemisegError("semiseg ensemble: give at least two models")
    first, name0 = ckpts[0], names[0]
    for ck, name in zip(ckpts, names):
        if "members" in ck:
            raise SemisegError(f"{name}: already an ensemble; give its member models")
        if not ck["config"].get("crf", {}).get("frames") or \
                ck["config"]["crf"].get("head", "semicrf") != "semicrf":
            raise SemisegError(f"{name}: only gene models (crf.frames: true with the "
                               "semi-CRF head) can be combined")
        for key in SHARED:
            if _shared(ck, key) != _shared(first, key):
                raise SemisegError(f"{name}: its {key} differs from {name0}'s: members "
                                   "must share the label scheme, genome and features")
        for key in SHARED_CONFIG:  # resolved configs: defaults filled in
            if _section(ck, key) != _section(first, key):
                raise SemisegError(f"{name}: its config section {key!r} differs from "
                                   f"{name0}'s: members must differ only in training")
    digest = hashlib.sha256("".join(ck["model_hash"] for ck in ckpts).encode())
    out = {k: v for k, v in first.items()
           if k not in ("model", "optimizer", "scheduler", "rng", "calibration")}
    out.update(members=[ck["model"] for ck in ckpts],
               member_hashes=[ck["model_hash"] for ck in ckpts],
               # each member's own train.calibrate scale (None: unscaled)
               member_calibration=[ck.get("calibration") for ck in ckpts],
               model_hash=digest.hexdigest()[:12])
    return out
