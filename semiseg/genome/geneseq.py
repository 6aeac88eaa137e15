"""The sequences of predicted genes: spliced CDS, protein, start and stop codon positions
(OutputWriter's PREFIX.cds.fa, PREFIX.proteins.fa and the GFF3 start_codon /
stop_codon rows; docs/outputs.md).

The gene model's CDS includes the stop codon (as the yeast SGD labels it is trained on
do): a complete gene's CDS reads start codon ... stop codon, 5' to 3'.
"""

from __future__ import annotations

from dataclasses import dataclass

from .codes import GeneticCode, reverse_complement


@dataclass
class GeneSeq:
    """One predicted gene's coding sequence, read 5' to 3' on its strand."""

    cds: str  # the spliced CDS, 5' to 3' (bases before `offset` are not translated)
    offset: int  # bases at the 5' end before the first whole codon (a gene cut at 5')
    protein: str  # amino acids; the final stop codon is not written, internal ones are '*'
    five_partial: bool  # cut at its 5' end (sequence/region end or gap) or no start codon
    three_partial: bool  # cut at its 3' end, or not ending with a stop codon
    internal_stops: int
    start_codon: list[tuple[int, int]]  # genome [start, end) pieces (empty: none written)
    stop_codon: list[tuple[int, int]]

    @property
    def partial(self) -> str:
        """``no``, ``5'``, ``3'`` or ``5',3'``."""
        ends = [e for e, p in (("5'", self.five_partial), ("3'", self.three_partial)) if p]
        return ",".join(ends) or "no"


def _pieces(blocks: list[tuple[int, int]], strand: str, lo: int, hi: int
            ) -> list[tuple[int, int]]:
    """Genome [start, end) pieces of the spliced-CDS positions [lo, hi) (5'-to-3'
    coordinates) over the CDS `blocks` (genome order), in genome order."""
    order = blocks if strand == "+" else blocks[::-1]
    out, done = [], 0
    for a, b in order:
        n = b - a
        x0, x1 = max(lo, done), min(hi, done + n)
        if x0 < x1:
            out.append((a + x0 - done, a + x1 - done) if strand == "+"
                       else (b - (x1 - done), b - (x0 - done)))
        done += n
    return sorted(out)


def gene_seq(seq: str, blocks: list[tuple[int, int]], strand: str,
             cut: tuple[bool, bool], code: GeneticCode) -> GeneSeq:
    """The coding sequence of one gene: `blocks` its CDS pieces [start, end) in genome
    order on the chromosome `seq`; `cut` (left, right) whether it runs into the
    sequence's or region's end or a gap on that side (genome order)."""
    spliced = "".join(seq[a:b] for a, b in blocks).upper()
    cds = spliced if strand == "+" else reverse_complement(spliced)
    five_cut, three_cut = (cut[1], cut[0]) if strand == "-" else cut
    # codons counted from the 5' end; for a gene cut at its 5' end only, from the 3' end
    # (as the GFF3 phases are)
    offset = len(cds) % 3 if five_cut and not three_cut else 0
    whole = cds[offset:len(cds) - (len(cds) - offset) % 3]
    has_start = not five_cut and whole[:3] in code.starts
    has_stop = (not three_cut and len(whole) == len(cds) - offset and len(whole) >= 3
                and code.table.get(whole[-3:]) == "*")
    protein = code.translate(whole, first_is_start=has_start)
    if has_stop:
        protein = protein[:-1]
    n = len(cds)
    return GeneSeq(cds=cds, offset=offset, protein=protein,
                   five_partial=not has_start, three_partial=not has_stop,
                   internal_stops=protein.count("*"),
                   start_codon=_pieces(blocks, strand, 0, 3) if has_start else [],
                   stop_codon=_pieces(blocks, strand, n - 3, n) if has_stop else [])


def fasta_record(name: str, description: str, text: str, width: int = 60) -> str:
    """One FASTA record, `width` letters a line."""
    lines = [text[i:i + width] for i in range(0, len(text), width)] or [""]
    return f">{name} {description}\n" + "\n".join(lines) + "\n"
