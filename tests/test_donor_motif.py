"""annotate.donor_motif: where the gene model's introns may begin, against a string walk.

The oracle reads the sequence as text: a plus-strand intron beginning at t matches the
motif when seq[t:t+m] matches it letter by letter (IUPAC), a minus-strand one ending at
t when the reverse complement of seq[t-m+1:t+1] does. The head with a motif must equal
the head whose donor channel is -inf wherever the oracle says no (float64), and every
intron it decodes must begin with the motif.
"""

from __future__ import annotations

import random
import re

import pytest
import torch
from test_frames import _intron_friendly, rc, scheme

from semiseg.errors import SemisegError
from semiseg.genemodel.frames import FrameLayout, base_codes
from semiseg.genemodel.seqmask import donor_motif_mask
from semiseg.genome.iupac import check_motif

CLASSES = {"A": "A", "C": "C", "G": "G", "T": "T", "R": "[AG]", "Y": "[CT]", "S": "[CG]",
           "W": "[AT]", "K": "[GT]", "M": "[AC]", "B": "[CGT]", "D": "[AGT]", "H": "[ACT]",
           "V": "[ACG]", "N": "[ACGTN]"}


def oracle(seq: str, motif: str, strand: str) -> list[bool]:
    pat = re.compile("".join(CLASSES[ch] for ch in motif))
    m, out = len(motif), []
    for t in range(len(seq)):
        if strand == "+":
            word = seq[t:t + m]
        else:
            word = rc(seq[t - m + 1:t + 1]) if t - m + 1 >= 0 else ""
        out.append(len(word) == m and pat.fullmatch(word) is not None)
    return out


@pytest.mark.parametrize("motif", ["GT", "GTANG", "GTATGT", "GTRNGY", "GTNNNNA"])
def test_the_mask_against_a_string_walk(motif):
    rng = random.Random(len(motif))
    for _ in range(20):
        seq = "".join(rng.choice("ACGTACGTACGTN" if rng.random() < 0.3 else "GTA")
                      for _ in range(rng.randint(1, 120)))
        codes = torch.as_tensor(base_codes(seq)).long()
        for strand in "+-":
            got = donor_motif_mask(codes, motif, strand).tolist()
            assert got == oracle(seq, motif, strand), (seq, strand)
            # a batch is masked row by row
            two = donor_motif_mask(torch.stack([codes, codes]), motif, strand)
            assert two[1].tolist() == got


def test_motifs_are_checked():
    assert check_motif(" gtang ") == "GTANG"
    for bad in ("AG", "GTX", "G", "GT-A"):
        with pytest.raises(SemisegError, match="--donor-motif"):
            check_motif(bad)


def test_the_head_keeps_only_introns_that_begin_with_the_motif():
    from semiseg.genemodel.head import FrameHead

    rng = random.Random(11)
    seq = "".join(rng.choice("ACGT") for _ in range(300))
    seq = seq[:100] + "GTATGT" + seq[106:200] + "ACATAC" + seq[206:]  # one of each strand
    lay = FrameLayout.from_scheme(scheme())
    head = FrameHead(lay, max_duration=40).double()
    R, onehot, em = _intron_friendly(lay, seq, seed=2)
    lengths = torch.tensor([len(seq)])
    plain_z = head.log_partition(em, lengths, backend="torch")
    head.donor_motif = "GT"  # any GT: nothing changes
    assert torch.allclose(head.log_partition(em, lengths, backend="torch"), plain_z,
                          rtol=0, atol=1e-12)
    motif = "GTATG"
    R2 = R.clone()
    for strand in "+-":
        ch = lay.channels.index(f"donor{strand}")
        no = ~torch.tensor(oracle(seq, motif, strand))
        R2[0, no, ch] = -1e4  # (scores must be finite: contract; exp(-1e4) is 0 in float64)
    head.donor_motif = ""
    want_z = head.log_partition(torch.cat([R2, onehot], -1), lengths, backend="torch")
    head.donor_motif = motif
    got_z = head.log_partition(em, lengths, backend="torch")
    assert torch.allclose(got_z, want_z, rtol=0, atol=1e-9)
    assert float(plain_z - got_z) > 1e-3  # it took something away
    seg = head.decode_internal(em, lengths)
    begun = 0  # introns the decode began
    for s, d, c in seg.segments[0]:
        kind = lay.kind_names[lay.kind[c]]
        if kind == "donor+":
            assert seq[s:s + len(motif)] == motif
            begun += 1
        elif kind == "donor-":
            assert rc(seq[s + d - len(motif):s + d]) == motif
            begun += 1
    assert begun >= 1  # the planted sites are used
    head.donor_motif = ""
    plain = head.decode_internal(em, lengths).segments[0]
    assert any(lay.kind_names[lay.kind[c]] in ("donor+", "donor-") for _, _, c in plain)


def test_set_from_the_command_line_or_the_model_config():
    from types import SimpleNamespace

    from semiseg.genemodel.generules import set_donor_motif

    gene = SimpleNamespace(donor_motif="")
    set_donor_motif(gene, "GTANG", None)  # the model's annotate section
    assert gene.donor_motif == "GTANG"
    set_donor_motif(gene, "GTANG", "gtatgt")  # the command line wins
    assert gene.donor_motif == "GTATGT"
    with pytest.raises(SemisegError, match="--donor-motif"):
        set_donor_motif(gene, "", "AG")
    with pytest.raises(SemisegError, match="annotate.donor_motif"):
        set_donor_motif(gene, "GTX", None)  # a bad value from the checkpoint's config
    chromatin = SimpleNamespace()  # a head without introns
    set_donor_motif(chromatin, "GTANG", None)  # configured: ignored
    assert not hasattr(chromatin, "donor_motif")
    with pytest.raises(SemisegError, match="only the gene model"):
        set_donor_motif(chromatin, "", "GTANG")


def test_a_config_with_a_bad_motif_or_orf_length_is_refused_when_read():
    from semiseg.config.load import from_dict

    assert from_dict({"annotate": {"donor_motif": "GTANG"}}).annotate.donor_motif == "GTANG"
    with pytest.raises(SemisegError, match="annotate.donor_motif"):
        from_dict({"annotate": {"donor_motif": "AGGT"}})
    with pytest.raises(SemisegError, match="annotate.long_orfs"):
        from_dict({"annotate": {"long_orfs": -1}})
