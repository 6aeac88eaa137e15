"""The embedded semi-Markov CRF (contract: docs/contract.md). Knows nothing about genomes.

    from semiseg.crf import log_partition, viterbi, marginals, Segmentation, SemiCRF
    from semiseg.crf import segment_posteriors, run_posteriors, entropy, sample
"""

from .dispatch import Segmentation, log_partition, marginals, viterbi
from .head import SemiCRF
from .posteriors import entropy, position_entropy, run_posteriors, sample, segment_posteriors

__all__ = ["log_partition", "viterbi", "marginals", "Segmentation", "SemiCRF",
           "segment_posteriors", "run_posteriors", "entropy", "position_entropy", "sample"]
