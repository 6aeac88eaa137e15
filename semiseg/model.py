"""Encoders and the Segmenter (encoder + SemiCRF head).

Shapes: the encoder reads features (B, T, F) at input resolution (one row per
`inputs.bin_size` bp) with valid lengths (B,), and returns hidden states (B, S, H) at
CRF resolution, S = ceil(T / pool) where pool = resolution / bin_size. The Segmenter maps
them to emissions (B, S, C) and hands emissions and hidden states to the SemiCRF head.

Padding never leaks into valid positions' outputs beyond what a zero-padded sequence of
that length would see: every block re-zeroes positions past each sequence's end, and
normalisation is per position (LayerNorm over channels), so a sequence's emissions do not
depend on what else is in its batch.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch
from torch import Tensor, nn

from .config.schema import Config
from .crf import SemiCRF
from .errors import SemisegError
from .genemodel.orf import N_ORF, orf_features
from .genemodel.splice import N_SPLICE, SpliceSignals


def steps_for(length, pool: int):
    """Number of CRF steps covering `length` input positions (ceil division)."""
    return (length + pool - 1) // pool


class Conv1d(nn.Conv1d):
    """nn.Conv1d (the same parameters and state-dict keys) that runs on the CPU as a
    (1, k) conv2d over a channels-last input: oneDNN's channels-last kernels, 2-15x
    faster than its conv1d at the encoders' widths on the 2-core CPU (the whole 1-bp
    gene encoder 2.1x; the log's "The encoder's convolutions channels-last"). The same
    products summed in another order, so float32 rounding differs; other devices keep
    nn.Conv1d's own kernels."""

    def forward(self, x: Tensor) -> Tensor:
        if x.device.type != "cpu" or self.padding_mode != "zeros":
            return super().forward(x)
        pad = self.padding if isinstance(self.padding, str) else (0, self.padding[0])
        y = nn.functional.conv2d(
            x.unsqueeze(2).contiguous(memory_format=torch.channels_last),
            self.weight.unsqueeze(2), self.bias, stride=(1, self.stride[0]), padding=pad,
            dilation=(1, self.dilation[0]), groups=self.groups)
        return y.squeeze(2)


class ChannelNorm(nn.Module):
    """LayerNorm over channels of a (B, H, T) tensor, independently at each position."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(x.transpose(1, 2)).transpose(1, 2)


class ResidualBlock(nn.Module):
    """x + conv(gelu(conv(gelu(norm(x))))) with a dilated first convolution."""

    def __init__(self, channels: int, kernel_size: int, dilation: int, dropout: float):
        super().__init__()
        pad = dilation * (kernel_size - 1) // 2
        self.norm = ChannelNorm(channels)
        self.conv1 = Conv1d(channels, channels, kernel_size, dilation=dilation, padding=pad)
        self.conv2 = Conv1d(channels, channels, 1)
        self.drop = nn.Dropout(dropout)
        self.act = nn.GELU()

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        y = self.conv1(self.act(self.norm(x)))
        y = self.conv2(self.drop(self.act(y)))
        return (x + y) * mask


class Encoder(nn.Module):
    """Dilated residual CNN over the input channels, strided pooling to the CRF resolution,
    and optionally a BiLSTM on top.

    Args:
        n_features: input channels F.
        channels: hidden width H.
        layers: residual blocks at CRF resolution (dilations 1, 2, 4, ... max_dilation).
        pool: input positions per CRF step (1 = no pooling).
        lstm_hidden: BiLSTM width per direction, or 0 for none.
    """

    def __init__(self, n_features: int, channels: int = 64, layers: int = 6,
                 kernel_size: int = 5, stem_kernel: int = 9, max_dilation: int = 16,
                 dropout: float = 0.1, pool: int = 1, lstm_hidden: int = 0):
        super().__init__()
        if kernel_size % 2 == 0 or stem_kernel % 2 == 0:
            raise ValueError("kernel sizes must be odd (centred convolutions)")
        self.pool = pool
        self.stem = Conv1d(n_features, channels, stem_kernel, padding=stem_kernel // 2)
        self.stem2 = Conv1d(channels, channels, stem_kernel, padding=stem_kernel // 2)
        self.pooler = nn.MaxPool1d(pool, pool, ceil_mode=True) if pool > 1 else None
        dilations, d = [], 1
        for _ in range(layers):
            dilations.append(d)
            d = 1 if d * 2 > max_dilation else d * 2
        self.blocks = nn.ModuleList(
            ResidualBlock(channels, kernel_size, dil, dropout) for dil in dilations)
        self.out_norm = ChannelNorm(channels)
        self.lstm = None
        self.hidden_dim = channels
        if lstm_hidden:
            self.lstm = nn.LSTM(channels, lstm_hidden, batch_first=True, bidirectional=True)
            self.hidden_dim = 2 * lstm_hidden
        self.act = nn.GELU()

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """x (B, T, F), lengths (B,) -> hidden (B, S, H), step lengths (B,)."""
        T = x.shape[1]
        pos = torch.arange(T, device=x.device)
        mask = (pos[None, :] < lengths[:, None]).to(x.dtype)[:, None, :]  # (B, 1, T)
        h = x.transpose(1, 2) * mask
        h = self.act(self.stem(h)) * mask
        h = self.act(self.stem2(h)) * mask
        if self.pooler is not None:
            # padding must not win the max of a sequence's last, partial bin
            h = self.pooler(h.masked_fill(mask == 0, -1e4))
        steps = steps_for(lengths, self.pool)
        S = h.shape[-1]
        smask = (torch.arange(S, device=x.device)[None, :] < steps[:, None]).to(h.dtype)
        smask = smask[:, None, :]
        h = h * smask
        for block in self.blocks:
            h = block(h, smask)
        h = self.out_norm(h).transpose(1, 2)  # (B, S, H)
        if self.lstm is not None:
            packed = nn.utils.rnn.pack_padded_sequence(
                h, steps.cpu(), batch_first=True, enforce_sorted=False)
            out, _ = self.lstm(packed)
            h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=S)
        return h * smask.transpose(1, 2), steps


class GeneEncoder(nn.Module):
    """A 1-bp encoder with long context: fine convolutions at 1 bp, a dilated residual
    trunk at 1/pool resolution (several kb of context), upsampled and added back to the
    fine path, then residual blocks at 1 bp (dilations 1, 3, 9: codon-spaced).

    Returns hidden states (B, T, fine_channels) at 1 bp and the lengths unchanged.
    """

    def __init__(self, n_features: int, channels: int = 64, layers: int = 6,
                 kernel_size: int = 5, stem_kernel: int = 9, max_dilation: int = 16,
                 dropout: float = 0.05, trunk_pool: int = 8, fine_channels: int = 32,
                 fine_layers: int = 3, orf: bool = False, splice: bool = False):
        super().__init__()
        self.pool = 1
        self.trunk_pool = trunk_pool
        self.orf = orf
        self.splice = SpliceSignals() if splice else None  # matrices set by train/loop.py
        n_in = n_features + (N_ORF if orf else 0) + (N_SPLICE if splice else 0)
        self.stem = Conv1d(n_in, fine_channels, stem_kernel, padding=stem_kernel // 2)
        self.stem2 = Conv1d(fine_channels, fine_channels, stem_kernel,
                               padding=stem_kernel // 2)
        self.down = Conv1d(fine_channels, channels, trunk_pool, stride=trunk_pool)
        dil, d = [], 1
        for _ in range(layers):
            dil.append(d)
            d = 1 if d * 2 > max_dilation else d * 2
        self.trunk = nn.ModuleList(ResidualBlock(channels, kernel_size, x, dropout) for x in dil)
        self.trunk_norm = ChannelNorm(channels)
        self.up = Conv1d(channels, fine_channels, 1)
        self.fine = nn.ModuleList(
            ResidualBlock(fine_channels, 9, 3 ** (i % 3), dropout) for i in range(fine_layers))
        self.out_norm = ChannelNorm(fine_channels)
        self.act = nn.GELU()
        self.hidden_dim = fine_channels

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        B, T, _ = x.shape
        mask = (torch.arange(T, device=x.device)[None, :] < lengths[:, None]).to(x.dtype)
        mask = mask[:, None, :]
        if self.orf:  # the one-hot sequence is the first four features
            x = torch.cat([x, orf_features(x[..., :4], lengths).to(x.dtype)], -1)
        if self.splice is not None:
            x = torch.cat([x, self.splice(x[..., :4])], -1)
        h = self.act(self.stem(x.transpose(1, 2) * mask)) * mask
        fine = self.act(self.stem2(h)) * mask
        p = self.trunk_pool
        S = -(-T // p)
        padded = nn.functional.pad(fine, (0, S * p - T))
        g = self.down(padded)
        smask = (torch.arange(S, device=x.device)[None, :] < (-(-lengths // p))[:, None])
        smask = smask.to(g.dtype)[:, None, :]
        g = g * smask
        for block in self.trunk:
            g = block(g, smask)
        g = self.up(self.act(self.trunk_norm(g)))
        h = fine + g.repeat_interleave(p, dim=2)[:, :, :T]
        h = h * mask
        for block in self.fine:
            h = block(h, mask)
        return self.out_norm(h).transpose(1, 2) * mask.transpose(1, 2), lengths


class Segmenter(nn.Module):
    """Encoder -> emissions (B, S, C) -> SemiCRF head.

    Args:
        n_features: input channels.
        num_labels: C.
        cfg: the resolved Config (model and crf sections are used).
    """

    def __init__(self, n_features: int, num_labels: int, cfg: Config, scheme=None):
        super().__init__()
        m, c = cfg.model, cfg.crf
        pool = m.resolution // cfg.inputs.bin_size
        self.pool = pool
        self.frames = bool(c.frames)
        for key in ("site_scores", "orf_length_scores", "upstream_start_scores",
                    "content_scores"):
            if getattr(c, key) and not (self.frames and c.head == "semicrf"):
                raise SemisegError(f"crf.{key} exists for the gene model's semi-CRF head "
                                   "only (crf.frames: true, crf.head: semicrf)")
        if c.intron_content and not c.content_scores:
            raise SemisegError("crf.intron_content needs crf.content_scores: true")
        _check_sites(c)
        if c.head != "semicrf" and not self.frames:
            raise SemisegError(f"crf.head: {c.head!r} exists for the gene model only "
                               "(crf.frames: true)")
        if self.frames:
            self._init_frames(n_features, cfg, scheme)
            return
        self.encoder = Encoder(
            n_features, channels=m.channels, layers=m.layers, kernel_size=m.kernel_size,
            stem_kernel=m.stem_kernel, max_dilation=m.max_dilation, dropout=m.dropout,
            pool=pool, lstm_hidden=m.lstm_hidden if m.encoder == "cnn_lstm" else 0)
        self.emit = nn.Linear(self.encoder.hidden_dim, num_labels)
        self.crf = SemiCRF(
            num_labels, c.max_duration, duration=c.duration,
            duration_transitions=c.duration_transitions,
            boundary_dim=self.encoder.hidden_dim if c.boundaries else None,
            start_end=c.start_end, centering=c.centering)
        self.has_hidden = c.boundaries

    def _init_frames(self, n_features: int, cfg: Config, scheme) -> None:
        """The frame-aware gene model (genemodel/head.py): 1-bp GeneEncoder + FrameHead."""
        from .genemodel.frames import FrameLayout
        from .genemodel.head import FrameHead

        m, c = cfg.model, cfg.crf
        if scheme is None:
            raise ValueError("crf.frames: the Segmenter needs the label scheme")
        if self.pool != 1 or not cfg.inputs.sequence:
            raise SemisegError("crf.frames: reading frames need model.resolution = "
                               "inputs.bin_size = 1 and inputs.sequence: true")
        if c.max_duration < 3 and c.head != "argmax":
            raise SemisegError(f"crf.max_duration: the gene model needs at least 3 (start "
                               f"and stop codons are 3-bp segments), got {c.max_duration}")
        if c.long_introns and not c.run_tails:
            raise SemisegError("crf.long_introns: a second intron length tail needs "
                               "crf.run_tails: true (the tails it adds to)")
        layout = FrameLayout.from_scheme(scheme, tails=c.run_tails and c.head != "argmax",
                                         exon_types=c.exon_types,
                                         long_introns=c.long_introns)
        self.encoder = GeneEncoder(
            n_features, channels=m.channels, layers=m.layers, kernel_size=m.kernel_size,
            stem_kernel=m.stem_kernel, max_dilation=m.max_dilation, dropout=m.dropout,
            trunk_pool=m.trunk_pool, fine_channels=m.fine_channels, fine_layers=m.fine_layers,
            orf=m.orf_features, splice=m.splice_features)
        self.has_hidden = False
        if c.head == "argmax":  # the no-CRF baseline: one channel per scheme label
            from .genemodel.argmaxhead import ArgmaxHead
            from .genome.scheme import strand_swap

            self.crf = ArgmaxHead(layout)
            swap = strand_swap(scheme)
        else:
            self.crf = FrameHead(layout, c.max_duration, start_end=c.start_end,
                                 site_scores=c.site_scores, site_order=c.site_order,
                                 site_windows=c.site_windows,
                                 orf_length_scores=c.orf_length_scores,
                                 upstream_start_scores=c.upstream_start_scores,
                                 content_scores=c.content_scores,
                                 intron_content=c.intron_content,
                                 tie_noncoding=c.tie_noncoding)
            swap = layout.channel_swap()
        n = len(swap)
        self.emit = nn.Linear(self.encoder.hidden_dim, n)
        self.channel_swap = torch.as_tensor(np.concatenate([swap, n + np.array([3, 2, 1, 0])]))

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor | None, Tensor]:
        """features (B, T, F), lengths (B,) -> emissions (B, S, C), hidden or None, steps.

        With reading frames the emissions are the encoder channels followed by the
        one-hot sequence (A, C, G, T: the first four features), which FrameHead reads.
        """
        h, steps = self.encoder(x, lengths)
        emissions = self.emit(h)
        if self.frames:
            emissions = torch.cat([emissions, x[..., :4].to(emissions.dtype)], dim=-1)
        return emissions, (h if self.has_hidden else None), steps

    def nll(self, emissions: Tensor, hidden: Tensor | None, labels: Tensor,
            steps: Tensor) -> Tensor:
        """Per-sequence negative log-likelihood (B,), computed by the CRF in float32."""
        return self.crf.nll(emissions.float(), labels, steps,
                            hidden=None if hidden is None else hidden.float())


def _check_sites(c) -> None:
    """crf.site_order still "learned" and crf.site_windows: a clear error for values the
    site matrices cannot take (sites.count_site_pwms)."""
    from .genemodel.sites import SITES

    if c.site_order == "learned":  # (other values: config/load.py refuses them)
        raise SemisegError("crf.site_order: learned is read off the training annotation by "
                           "semiseg train; a model built outside it needs 0 or 1")
    for k, v in (c.site_windows or {}).items():
        if k not in SITES:
            raise SemisegError(f"crf.site_windows: no site {k!r} (one of {', '.join(SITES)})")
        if len(v) != 2 or v[0] < 0 or v[1] < 1 or v[0] + v[1] > 200:
            raise SemisegError(f"crf.site_windows.{k}: {list(v)} (want [bases before >= 0, "
                               "bases from the site on >= 1], at most 200 in all)")


def model_hash(state_dict: dict) -> str:
    """A short content hash of a model's parameters (names, shapes and values)."""
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous()
        digest.update(name.encode())
        digest.update(str(tuple(t.shape)).encode())
        digest.update(t.numpy().tobytes())
    return digest.hexdigest()[:12]
