"""`semiseg annotate` with the gene model's Viterbi decode (the most probable gene
structure) in place of its posterior (MEA) decode, for comparing the two.

With `crf.run_tails` a gene structure has one segmentation, so the Viterbi path over
the internal labels is the most probable labelling itself (without run tails it is
one chaining among many, FrameHead.decode's docstring). The marginals and every output
are made as annotate makes them; only the labels differ.

    python benchmarks/map_decode_annotate.py annotate --model M --fasta F --regions R --out P

Measured (benchmarks/RESULTS-log.md, "Viterbi against posterior decoding"): not adopted.
"""

import torch

from semiseg.crf import viterbi
from semiseg.genemodel.head import FrameHead


def _map_decode_with_marginals(self, emissions, lengths=None, hidden=None, *,
                               backend="auto"):
    t = self._terms(emissions.detach(), lengths)
    g = self._posteriors(t, backend)
    with torch.no_grad():
        seg = viterbi(t.pop("scores"), t.pop("transition"), t.pop("duration_bias"),
                      backend=backend, **t)
    return (self._collapsed(seg), *self._marginals_from(g, lengths))


if __name__ == "__main__":
    FrameHead.decode_with_marginals = _map_decode_with_marginals
    from semiseg.cli import main

    main()
