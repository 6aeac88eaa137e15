"""benchmarks/fly_gene_errors.py's sorting of truth loci, on gene models built by hand
(the oracle: each case's kind and nesting decided here from the coordinates)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))

import fly_gene_errors as fe

from semiseg.evaluate.genelevel import GeneModel


def gm(name, strand, *cds):
    return GeneModel(name, "c", strand, tuple(cds))


# a host on the minus strand with a 5 kb intron, a plus-strand gene inside that intron,
# and a plus-strand gene elsewhere
HOST = gm("host", "-", (1_000, 1_300), (6_300, 6_600))
INNER = gm("inner", "+", (2_000, 2_200), (2_400, 2_700))
OTHER = gm("other", "+", (9_000, 9_300))


def test_nested_loci_and_their_hosts():
    loci = [[HOST], [INNER], [OTHER]]
    inner, outer = fe.nested(loci)
    assert inner == {1} and outer == {0}
    # a gene that crosses the host's exon is not nested
    crossing = gm("x", "+", (1_200, 1_500))
    assert fe.nested([[HOST], [crossing]]) == (set(), set())


def test_kinds_against_hand_made_predictions():
    loci = [[HOST], [INNER], [OTHER]]
    assert fe.classify([INNER], [INNER], loci)[0] == "exact"
    assert fe.classify([OTHER], [gm("p", "-", (9_000, 9_300))], loci)[0].startswith("missed")
    fewer = gm("p", "+", (2_000, 2_700))  # the intron called coding
    assert fe.classify([INNER], [fewer], loci)[0] == "fewer introns"
    split = [gm("a", "+", (2_000, 2_200)), gm("b", "+", (2_400, 2_700))]
    assert fe.classify([INNER], split, loci)[0] == "split"
