"""Names and values as the output formats hold them: GFF3's percent escapes (seqids,
attribute values) and the sequence names BED cannot hold (read as header lines).
"""

from __future__ import annotations

from urllib.parse import quote

from ..errors import SemisegError


def _esc(v: str) -> str:
    """A GFF3 attribute value: ; = & , % tab, newline and other control characters
    percent-escaped (GFF3 spec; non-ASCII as its UTF-8 bytes)."""
    return quote(str(v), safe=" +:.|-_()[]{}!@#$*^'\"/<>?~")


# GFF3 column 1 (seqid) may hold these unescaped; everything else is percent-escaped
_SEQID_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        ".:^*$@!+_?-|")


def gff3_seqid(name: str) -> str:
    """A sequence name as GFF3's column 1: characters outside [a-zA-Z0-9.:^*$@!+_?-|]
    percent-escaped (so % , ; = & > spaces and control characters never reach the file
    as they are; `urllib.parse.unquote` gives the name back)."""
    return "".join(c if c in _SEQID_SAFE else quote(c, safe="") for c in name)


# a BED line starting with these is a comment, a track or a browser line to BED readers
# (bedtools, IGV, UCSC), and BED has no escape; bedtools 2.31 also stops with an error at
# a line starting with '>' or '!' (measured: `bedtools merge`)
BED_HEADER_PREFIXES = ("#", "track", "browser", ">", "!")


def check_bed_names(names, source: str = "the FASTA", keep=None) -> None:
    """SemisegError naming the first sequence of `names` (those in `keep`, if given)
    whose name BED cannot hold, by its record number in `names`."""
    for i, name in enumerate(names, 1):
        if str(name).startswith(BED_HEADER_PREFIXES) and (keep is None or name in keep):
            raise SemisegError(
                f"sequence {name!r} (record {i} of {source}) cannot be written to BED: a line "
                "starting with '#', 'track' or 'browser' is read as a header, not a row "
                "('>' and '!' stop bedtools), and BED has no escape; rename it in the FASTA")
