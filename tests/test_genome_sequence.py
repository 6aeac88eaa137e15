import os

import numpy as np
import pytest
from synth import write_fasta

from semiseg.errors import SemisegError
from semiseg.genome import Fasta, onehot, read_chrom_sizes

YEAST = os.path.join(os.path.dirname(__file__), "..", "data", "yeast")


def test_onehot_hand_cases():
    x = onehot("ACGTNacgtn")
    assert x.dtype == np.float32 and x.shape == (10, 4)
    expect = np.zeros((10, 4), np.float32)
    for i, c in enumerate("ACGTNACGTN"):
        if c != "N":
            expect[i, "ACGT".index(c)] = 1
    np.testing.assert_array_equal(x, expect)
    s = onehot("aCn", softmask=True)
    np.testing.assert_array_equal(s, [[1, 0, 0, 0, 1], [0, 1, 0, 0, 0], [0, 0, 0, 0, 1]])


def test_softmasked_is_python_islower_and_the_softmask_column():
    from semiseg.genome.sequence import softmasked

    seq = "ACGTNacgtn-*.RYryXxzZ"
    assert softmasked(seq).tolist() == [c.islower() for c in seq]
    assert softmasked(seq).tolist() == onehot(seq, softmask=True)[:, 4].astype(bool).tolist()


def test_onehot_iupac():
    zero = onehot("RYKMSWBDHVN")
    assert not zero.any()
    frac = onehot("RYBn", iupac="fractional")
    np.testing.assert_allclose(frac, [[.5, 0, .5, 0], [0, .5, 0, .5],
                                      [0, 1 / 3, 1 / 3, 1 / 3], [0, 0, 0, 0]])
    # every fractional row sums to 1 except N
    full = onehot("ACGTRYKMSWBDHV", iupac="fractional")
    np.testing.assert_allclose(full.sum(1), 1, rtol=1e-6)


def test_yeast_sizes_and_sequence():
    with Fasta([os.path.join(YEAST, "chrI.fa"), os.path.join(YEAST, "chrII.fa")]) as fa:
        assert fa.chrom_sizes == {"chrI": 230208, "chrII": 813178}
        assert fa.fetch("chrI", 0, 12) == "CCACACCACACC"
        # the fetched region agrees with the raw file
        with open(os.path.join(YEAST, "chrI.fa")) as fh:
            raw = "".join(line.strip() for line in fh if not line.startswith(">"))
        assert fa.fetch("chrI", 100000, 100500) == raw[100000:100500]
        assert fa.fetch("chrI") == raw
        x = fa.onehot("chrI", 5, 9)
        np.testing.assert_array_equal(x, onehot(raw[5:9]))


@pytest.mark.parametrize("bgzip", [False, True])
def test_plain_and_bgzip_agree_and_index_is_built(tmp_path, bgzip):
    rng = np.random.default_rng(1)
    seqs = {"a": "".join(rng.choice(list("ACGTacgtN"), 1234)), "b": "NNNNACGT" * 50}
    path = write_fasta(tmp_path / ("g.fa.gz" if bgzip else "g.fa"), seqs, width=70, bgzip=bgzip)
    assert not os.path.exists(path + ".fai")
    with Fasta(path) as fa:
        assert fa.chrom_sizes == {"a": 1234, "b": 400}
        assert fa.fetch("a", 17, 1000) == seqs["a"][17:1000]
        assert fa.fetch("b") == seqs["b"]
    assert os.path.exists(path + ".fai")
    if bgzip:
        assert os.path.exists(path + ".gzi")


def test_n_runs_match_a_naive_scan(tmp_path):
    rng = np.random.default_rng(2)
    seq = "".join(rng.choice(["A", "C", "N", "n", "G"], 5000, p=[.3, .3, .15, .05, .2]))
    path = write_fasta(tmp_path / "n.fa", {"c": seq})
    with Fasta(path) as fa:
        # a small chunk size forces runs that cross chunk boundaries
        runs = fa._scan_n("c", chunk=97)
        naive, i = [], 0
        while i < len(seq):
            if seq[i] in "Nn":
                j = i
                while j < len(seq) and seq[j] in "Nn":
                    j += 1
                naive.append((i, j))
                i = j
            else:
                i += 1
        assert [tuple(r) for r in runs.tolist()] == naive
        long = fa.n_runs("c", min_length=3)
        assert [tuple(r) for r in long.tolist()] == [r for r in naive if r[1] - r[0] >= 3]


def test_fasta_errors(tmp_path, monkeypatch):
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    with pytest.raises(SemisegError, match="empty"):
        Fasta(empty)
    with pytest.raises(SemisegError, match="not found"):
        Fasta(tmp_path / "missing.fa")
    import gzip

    gz = tmp_path / "plain.fa.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(">x\nACGT\n")
    with pytest.raises(SemisegError, match="bgzip"):
        Fasta(gz)
    a = write_fasta(tmp_path / "a.fa", {"x": "ACGT"})
    b = write_fasta(tmp_path / "b.fa", {"x": "ACGT"})
    with pytest.raises(SemisegError, match="chromosome x is in both"):
        Fasta([a, b])


@pytest.mark.parametrize("bad", ["!", "7", " ", "\u00e9"])
def test_a_character_that_is_not_a_sequence_letter_is_an_error_naming_where(tmp_path, bad):
    """Letters of any kind (IUPAC codes, soft-masked lowercase, X masks), gaps and stops
    read as they are; a digit, punctuation, a blank inside a line or a non-ASCII byte is
    an error naming the file, the sequence and its 1-based position, from any fetch that
    covers it (and only those)."""
    ok = "ACGTNacgtnRYKMSWBDHVXx-*."
    path = tmp_path / "g.fa"
    path.write_text(f">good\n{ok}\n>bad\nACGTAC{bad}GT\n", encoding="utf-8")
    with Fasta(path) as fa:
        assert fa.fetch("good") == ok
        assert fa.fetch("bad", 0, 6) == "ACGTAC"  # before it: read
        with pytest.raises(SemisegError) as err:
            fa.fetch("bad", 2)
    msg = str(err.value)
    assert msg.startswith(f"{path}: bad:7: ") and "not a sequence letter" in msg
    assert "\n" not in msg


def test_missing_index_in_read_only_folder(tmp_path, monkeypatch):
    path = write_fasta(tmp_path / "ro.fa", {"x": "ACGT" * 10})
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if os.path.samefile(p, tmp_path)
                        else real(p, mode))
    monkeypatch.setenv("SEMISEG_CACHE", str(tmp_path / "cache"))
    with Fasta(path) as fa:  # indexed in the cache: nothing written beside the FASTA
        assert fa.chrom_sizes == {"x": 40} and fa.fetch("x", 3, 9) == ("ACGT" * 10)[3:9]
    assert not os.path.exists(path + ".fai")
    assert len(os.listdir(tmp_path / "cache" / "fai")) == 1


def test_stale_index_is_rebuilt(tmp_path):
    path = write_fasta(tmp_path / "s.fa", {"x": "ACGT" * 10})
    Fasta(path).close()
    write_fasta(path, {"x": "ACGT" * 10, "y": "GGGG" * 30}, width=13)  # FASTA changed
    os.utime(path + ".fai", (1, 1))  # the old index is older than the FASTA
    with Fasta(path) as fa:
        assert fa.chrom_sizes == {"x": 40, "y": 120}
        assert fa.fetch("y", 10, 20) == ("GGGG" * 30)[10:20]


def test_read_chrom_sizes(tmp_path):
    p = tmp_path / "g.sizes"
    p.write_text("chr1\t100\nchr2\t50\n")
    assert read_chrom_sizes(p) == {"chr1": 100, "chr2": 50}
    p.write_text("chr1\t100\nchr2\tabc\n")
    with pytest.raises(SemisegError, match=r"g.sizes:2"):
        read_chrom_sizes(p)
