"""Genetic codes (NCBI translation tables), codons and reverse complements: the one place
semiseg spells out which codons start and stop a gene and how a strand is read backwards.

Tables are given the way NCBI's "The Genetic Codes" page lists them: 64 amino acids (and
``*`` for a stop) in the order TTT TTC TTA TTG TCT ... GGG (bases T C A G, first base
slowest), plus the codons that may start a gene. The gene model's own start codon is
ATG (``STARTS``); the alternative starts of a table only decide whether a predicted
gene's first codon is read as ``M`` in its protein.

Numeric codon ids elsewhere in semiseg (ORF features, splice-site and start/stop
masks) use bases A C G T = 0 1 2 3 and ``id = 16 a + 4 b + c`` for the codon ``abc``
read left to right on the plus strand: ``codon_id``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SemisegError

BASES = "ACGT"
_NCBI_ORDER = "TCAG"

# number -> (name, amino acids in NCBI order, start codons)
_TABLES = {
    1: ("Standard",
        "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
        ("TTG", "CTG", "ATG")),
    2: ("Vertebrate Mitochondrial",
        "FFLLSSSSYY**CCWWLLLLPPPPHHQQRRRRIIMMTTTTNNKKSS**VVVVAAAADDEEGGGG",
        ("ATT", "ATC", "ATA", "ATG", "GTG")),
    3: ("Yeast Mitochondrial",
        "FFLLSSSSYY**CCWWTTTTPPPPHHQQRRRRIIMMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
        ("ATA", "ATG", "GTG")),
    4: ("Mold, Protozoan, and Coelenterate Mitochondrial and Mycoplasma/Spiroplasma",
        "FFLLSSSSYY**CCWWLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
        ("TTA", "TTG", "CTG", "ATT", "ATC", "ATA", "ATG", "GTG")),
    5: ("Invertebrate Mitochondrial",
        "FFLLSSSSYY**CCWWLLLLPPPPHHQQRRRRIIMMTTTTNNKKSSSSVVVVAAAADDEEGGGG",
        ("TTG", "ATT", "ATC", "ATA", "ATG", "GTG")),
    6: ("Ciliate, Dasycladacean and Hexamita Nuclear",
        "FFLLSSSSYYQQCC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
        ("ATG",)),
    9: ("Echinoderm and Flatworm Mitochondrial",
        "FFLLSSSSYY**CCWWLLLLPPPPHHQQRRRRIIIMTTTTNNNKSSSSVVVVAAAADDEEGGGG",
        ("ATG", "GTG")),
    10: ("Euplotid Nuclear",
         "FFLLSSSSYY**CCCWLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
         ("ATG",)),
    11: ("Bacterial, Archaeal and Plant Plastid",
         "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
         ("TTG", "CTG", "ATT", "ATC", "ATA", "ATG", "GTG")),
    12: ("Alternative Yeast Nuclear",
         "FFLLSSSSYY**CC*WLLLSPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG",
         ("CTG", "ATG")),
}
TABLES = tuple(sorted(_TABLES))

# IUPAC nucleotide complements (upper and lower case); anything else is kept as it is
_COMPLEMENT = str.maketrans("ACGTRYSWKMBDHVNacgtryswkmbdhvn",
                            "TGCAYRSWMKVHDBNtgcayrswmkvhdbn")


def reverse_complement(seq: str) -> str:
    """The reverse complement of a DNA string (IUPAC codes and case kept: ``acgN`` ->
    ``Ncgt``)."""
    return seq.translate(_COMPLEMENT)[::-1]


def reverse_complement_codes(codes):
    """Base codes (A C G T = 0..3, anything else, e.g. N = 4, kept) of the other strand
    read in its own direction: ``3 - code`` reversed along the last axis. Takes a numpy
    array or a torch tensor and returns the same kind."""
    if isinstance(codes, np.ndarray):
        return np.where(codes < 4, 3 - codes, codes)[..., ::-1]
    return (3 - codes).where(codes < 4, codes).flip(-1)  # a tensor (genome/ needs no torch)


def codon_id(codon: str) -> int:
    """``16 a + 4 b + c`` with A C G T = 0 1 2 3 (the codon read left to right)."""
    a, b, c = (BASES.index(x) for x in codon.upper())
    return a * 16 + b * 4 + c


@dataclass(frozen=True)
class GeneticCode:
    """One NCBI translation table."""

    number: int
    name: str
    table: dict  # codon (upper case DNA) -> one-letter amino acid, '*' for a stop
    starts: tuple[str, ...]

    @property
    def stops(self) -> tuple[str, ...]:
        """The stop codons (plus strand, read 5' to 3'), in NCBI order."""
        return tuple(c for c, aa in self.table.items() if aa == "*")

    def stops_on(self, strand: str) -> tuple[str, ...]:
        """The stop codons as they read left to right on `strand` ("+" or "-")."""
        return self.stops if strand == "+" else tuple(reverse_complement(c) for c in self.stops)

    def translate(self, cds: str, first_is_start: bool = True) -> str:
        """Amino acids of the whole codons of `cds` (read 5' to 3'; a trailing 1-2 bases
        are ignored). A codon with a base other than ACGT is ``X``; stops are ``*``
        (nothing is dropped). With `first_is_start`, a first codon that is one of the
        table's start codons is ``M`` (e.g. TTG or GTG where the table lets them start)."""
        s = cds.upper()
        aa = [self.table.get(s[i:i + 3], "X") for i in range(0, len(s) - 2, 3)]
        if first_is_start and aa and s[:3] in self.starts:
            aa[0] = "M"
        return "".join(aa)


def genetic_code(number: int = 1, what: str = "--genetic-code") -> GeneticCode:
    """NCBI translation table `number` (1 standard, 2 vertebrate mitochondrial, 3 yeast
    mitochondrial, 4, 5, 6 ciliate, 9, 10, 11 bacterial/plastid, 12); an unknown
    number is a one-line error naming `what`."""
    try:
        name, aas, starts = _TABLES[int(number)]
    except (KeyError, TypeError, ValueError):
        raise SemisegError(f"{what}: expected an NCBI translation table number "
                           f"({', '.join(map(str, TABLES))}), got {number!r}") from None
    codons = [a + b + c for a in _NCBI_ORDER for b in _NCBI_ORDER for c in _NCBI_ORDER]
    return GeneticCode(int(number), name, dict(zip(codons, aas, strict=True)), starts)


STANDARD = genetic_code(1)
# the gene model's start codon and the standard code's stops, as they read left to right
# on each strand
STARTS = {"+": "ATG", "-": reverse_complement("ATG")}
STOPS = {"+": STANDARD.stops, "-": STANDARD.stops_on("-")}
STOP_IDS = {s: tuple(codon_id(c) for c in STOPS[s]) for s in "+-"}
START_IDS = {s: codon_id(STARTS[s]) for s in "+-"}


def translate(cds: str, table: int = 1) -> str:
    """`cds` translated with NCBI table `table` (GeneticCode.translate)."""
    return genetic_code(table).translate(cds)
