"""The embedded semi-Markov CRF (contract: SPEC.md). Knows nothing about genomes.

    from semiseg.crf import log_partition, viterbi, marginals, Segmentation, SemiCRF
"""

from .dispatch import Segmentation, log_partition, marginals, viterbi
from .head import SemiCRF

__all__ = ["log_partition", "viterbi", "marginals", "Segmentation", "SemiCRF"]
