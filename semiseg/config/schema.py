"""YAML configuration -> validated dataclasses.

A config file has the sections below; every key is optional (the defaults are the
demo's settings) and every unknown key is an error that names the closest valid key.
Relative paths are relative to the config file's folder; the resolved config (absolute
paths) is written next to every training run, so a run can be repeated from it alone.

    inputs:   genome and tracks            labels:   annotation and label scheme
    windows:  training windows and split   model:    encoder and resolution
    crf:      the semi-CRF head            train:    optimiser and schedule
    annotate: windowing at annotation      device:   auto | cpu | cuda
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass
class InputsConfig:
    """What the encoder sees.

    fasta:     genome FASTA(s) used for training (plain or bgzip; a path or a list of
               paths whose chromosomes together make the genome)
    sequence:  feed the one-hot sequence (A, C, G, T) to the encoder
    softmask:  add a channel that is 1.0 on lowercase (soft-masked) bases
    tracks:    {name: path} or {name: {path, transform, mapq, strand}}; bigWig, bedGraph or
               BAM by extension; annotate asks for the same names
    bin_size:  bp per input position (1 = base level; tracks are averaged per bin)
    alias:     {name_in_file: name_in_fasta} for chromosome names that differ
    chrom_sizes: a two-column chrom-sizes file (name, length) or a FASTA index (.fai)
               that defines the chromosomes instead of a FASTA (only with
               sequence: false; docs/chromatin.md)
    track_sheet: a TSV of tracks, one per line: name, path[, transform, kind, mapq,
               strand] (a header line naming the columns is optional; paths relative
               to the sheet); read into `tracks` when the config is loaded
    """

    fasta: str | list[str] | None = None
    chrom_sizes: str | None = None
    track_sheet: str | None = None
    sequence: bool = True
    softmask: bool = False
    tracks: dict[str, Any] = field(default_factory=dict)
    bin_size: int = 1
    alias: dict[str, str] | None = None


@dataclass
class LabelsConfig:
    """The truth used for training.

    annotation: GFF3/GTF or BED file with the labelled intervals
    scheme:     a built-in scheme name ("gene_structure"), a scheme YAML path, or an
                inline scheme mapping (see semiseg.genome.labels)
    min_intron: the scheme's min_intron replaced (gene_structure: gaps between a
                transcript's exons shorter than this are not introns, and the gene model
                calls no intron shorter): null, the scheme's own (20 in gene_structure);
                an integer; or "learned": `semiseg train` sets it to the shortest intron
                of the annotated transcripts inside the training regions (never the
                validation or held-out ones; at least 100 of them, else the scheme's
                stays), logs it, and records the number in the run's config
    """

    annotation: str | None = None
    scheme: Any = "gene_structure"
    min_intron: int | str | None = None


@dataclass
class WindowsConfig:
    """Training windows and the train/validation split.

    size:         window length in bp
    overlap:      bp shared by neighbouring windows
    chroms:       chromosomes to train on (None = all in the FASTA)
    valid_chroms: chromosomes held out for validation; if empty, the last
                  `valid_fraction` of each training chromosome is held out instead
    valid_fraction: see valid_chroms
    valid_offset: where in each chromosome (a fraction of its length) the held-out
                  block of `valid_fraction` starts; None: at the end (1 - valid_fraction).
                  Different offsets give the folds of a cross-validation
    holdout:      regions kept out of training and validation (and of the track
                  statistics): a BED file, or a list of "chrom:start-end" (0-based,
                  end exclusive) or "chrom" (the whole chromosome). Where a chromosome's
                  default validation block (no valid_chroms, no valid_offset) lies
                  wholly inside it, the last `valid_fraction` of that chromosome's
                  sequence outside the holdout validates instead (said in the log)
    intron_windows: the gene model (crf.frames) only: one more training window around
                  each annotated intron longer than size // 2, with size // 4 bp on
                  each side (overlapping ones merged; within the training regions),
                  batched apart from the tiles (semiseg/genemodel/intronwindows.py)
    phases:       training tilings (1: one). N > 1: N tilings of the training regions,
                  tiling p beginning p / N of a stride later; epoch e trains on tiling
                  (e - 1) % N (with every epoch's intron windows), so window edges fall
                  at N places across the epochs. The tables counted before training
                  (site matrices, content, learned rules) read tiling 0 only
    """

    size: int = 20000
    overlap: int = 0
    chroms: list[str] | None = None
    valid_chroms: list[str] = field(default_factory=list)
    valid_fraction: float = 0.15
    valid_offset: float | None = None
    holdout: str | list[str] | None = None
    intron_windows: bool = False
    phases: int = 1


@dataclass
class ModelConfig:
    """The encoder.

    encoder:     "cnn" (dilated residual CNN) or "cnn_lstm" (the CNN, then a BiLSTM)
    channels:    hidden width
    layers:      number of dilated residual blocks (dilation 1, 2, 4, ... cycling)
    kernel_size: kernel of the residual blocks
    stem_kernel: kernel of the first convolutions at input resolution
    max_dilation: dilations cycle 1, 2, 4, ... up to this value
    dropout:     dropout inside the residual blocks
    lstm_hidden: BiLSTM width per direction (encoder = "cnn_lstm")
    resolution:  bp per CRF step; a multiple of inputs.bin_size (strided pooling)
    trunk_pool, fine_channels, fine_layers: the gene model's encoder (crf.frames): its
                 trunk (channels, layers, kernel_size, max_dilation) runs at 1/trunk_pool
                 resolution; fine_layers residual blocks of fine_channels at 1 bp
    orf_features: the gene model's encoder also reads 18 open-reading-frame channels
                 made from the sequence (semiseg/genemodel/orf.py: distances to in-frame stop and
                 start codons, kilobases away)
    splice_features: the gene model's encoder also reads 4 splice-site channels: donor
                 and acceptor log-odds per strand from position weight matrices counted
                 at the training genes' introns (semiseg/genemodel/splice.py)
    """

    encoder: str = "cnn"
    channels: int = 64
    layers: int = 6
    kernel_size: int = 5
    stem_kernel: int = 9
    max_dilation: int = 16
    dropout: float = 0.1
    lstm_hidden: int = 64
    resolution: int = 1
    trunk_pool: int = 8
    fine_channels: int = 32
    fine_layers: int = 3
    orf_features: bool = False
    splice_features: bool = False


@dataclass
class CRFConfig:
    """The semi-CRF head (docs/contract.md).

    max_duration: K, the longest segment in CRF steps (longer runs of a label are
                  several segments in a row; the output merges them)
    duration:     learned | geometric | negative_binomial | poisson | uniform
    duration_transitions: false: static (C, C) transitions; true: one (C, C) per duration
                  1..K of the next segment; an integer P >= 1: periodic, (P, C, C),
                  transition[(d - 1) mod P] (3 follows a reading frame)
    boundaries:   boundary scores projected from the encoder's hidden states
    start_end:    learned scores for the first and last segment's label
    centering:    none | mean (see docs/contract.md; "mean" decodes in training-size windows)
    frames:       the frame-aware gene model (gene_structure schemes, 1 bp): start, CDS,
                  stop and intron labels in three reading frames per strand, stop codons
                  forbidden inside CDS, the frame carried through introns (docs/gene_model.md)
    head:         semicrf (the gene model) | argmax (with frames: the same encoder
                  classifying each base on its own, no CRF; a baseline)
    site_scores:  the gene model's head adds position-weight-matrix scores of splice
                  donors and acceptors, start and stop codons (counted at the training
                  genes, semiseg/genemodel/sites.py), times a learned weight per site, to
                  those labels' emissions
    site_order:   the site matrices' order: 0, each base of a site's window alone; 1, each
                  base given the base before it (a first-order site model: on the fly
                  validation block's held-out sites, about a quarter fewer decoy GT / AG
                  at or above the score that keeps 90% of true sites; docs/gene_model.md);
                  learned: 1 where the training regions hold at least 500 annotated
                  introns (a first-order column has four times the cells to count), else
                  0; `semiseg train` writes the number into the run's config
    site_windows: {donor|acceptor|start|stop: [bases before the site's first base, bases
                  from it on]} replacing the built-in windows (donor [3, 8], acceptor [24,
                  4], start [9, 6], stop [6, 6]), e.g. {acceptor: [40, 4]}
    content_scores: the gene model's head adds to coding labels the log-odds of a
                  three-periodic 5th-order Markov chain of coding sequence against one of
                  sequence outside genes, counted at the training genes
                  (semiseg/genemodel/content.py)
    intron_content: with content_scores, intron bases get the log-odds of a 5th-order
                  Markov chain of intron sequence against the same chain outside genes,
                  counted at the training introns (semiseg/genemodel/content.py), times
                  a learned weight
    orf_length_scores: the gene model's head adds learned scores of ORF length to start
                  codons (the ORF each opens) and stop codons (the longest ORF each can
                  close), semiseg/genemodel/orflength.py
    upstream_start_scores: the gene model's head adds to each start codon a learned
                  score of how many in-frame start codons lie upstream of it in its ORF
                  (0, 1, 2, 3+: a ribosome mostly starts at the first),
                  semiseg/genemodel/orflength.py
    tie_noncoding: the gene model's intron labels take the background label's emission
                  plus a learned constant per strand, so the encoder cannot tell an
                  intron's inside from intergenic sequence by local content: where an
                  intron begins and ends is left to the splice sites, the exons and the
                  gene grammar (the way a classical gene finder's intron and intergenic
                  states share a content model), not to a guess from kilobases away
    run_tails:    the gene model gives each run of an outside label (intergenic, UTR,
                  ncRNA) and each intron inside one segmentation: pieces of a fixed
                  length (a "tail" label of their own) and then one last piece, so that
                  a long run scores a learned amount per tail piece (a geometric length
                  tail, as a classical gene finder's intron and intergenic length
                  models) and not the count of its many segmentations, which per base
                  differs between labels (semiseg/genemodel/frames.py, add_tails)
    exon_types:   the gene model's coding bases in four labels per frame and strand, one
                  per exon type (single, initial, internal, terminal: whether the exon
                  holds the start and / or the stop codon), each with its own learned
                  length, transition, start and end scores, as a classical gene finder
                  has a length model per exon type; the grammar keeps each exon's type
                  from the codon or splice site at either end. Emissions stay per kind
    long_introns: (with run_tails) a second run tail per intron label with scores of
                  its own: an intron's length tail is a mixture of two geometric tails,
                  so the few long introns can have a flatter one than the many short
    duration_step_sd: a smoothness prior on the learned duration scores (duration:
                  learned, and the gene model's table): each label's score at length
                  d + 1 is a Gaussian step from its score at d with this standard
                  deviation (nats); the prior's negative log-density, spread over the
                  epoch's training steps, joins the training loss (semiseg/train/priors.py).
                  0: off (each length's score free, as before)
    """

    max_duration: int = 64
    duration: str = "learned"
    duration_transitions: bool | int = False
    boundaries: bool = True
    start_end: bool = True
    centering: str = "none"
    frames: bool = False
    head: str = "semicrf"
    site_scores: bool = False
    site_order: int | str = 0
    site_windows: dict[str, list[int]] | None = None
    orf_length_scores: bool = False
    upstream_start_scores: bool = False
    content_scores: bool = False
    intron_content: bool = False
    tie_noncoding: bool = False
    run_tails: bool = False
    exon_types: bool = False
    long_introns: bool = False
    duration_step_sd: float = 0.0


@dataclass
class TrainConfig:
    """Optimisation.

    epochs, batch_size: windows per batch
    lr, weight_decay:  AdamW
    crf_lr_scale:      the CRF head's own parameters (transitions, durations, start/end
                       scores, the gene model's site weights and ORF-length curves) learn
                       at this multiple of lr: Adam moves a parameter by about lr per step
                       at most, so over a few hundred steps a table entry moves about one
                       unit, where a duration or transition score may need tens
    warmup_epochs:     linear warm-up (in epochs, fractions allowed), then cosine decay
    grad_clip:         maximum gradient norm (0 = off)
    patience:          early stopping after this many epochs without a better
                       validation score (0 = off)
    select:            the validation score that picks best.pt and drives early
                       stopping: "loss" (negative log-likelihood per CRF step; smooth) or
                       "f1" (macro F1 of the Viterbi labels; noisier)
    seed:              seeds everything (window order, initialisation, dropout)
    reverse_complement: augment by reverse-complementing half the windows each epoch
                       (stranded labels swap with their other-strand twins; tracks are
                       reversed, so use it with unstranded tracks only)
    amp:               auto | on | off; mixed precision (bfloat16) for the encoder on
                       CUDA; the CRF always runs in float32
    calibrate:         the gene model (crf.frames) only: after the last epoch, fit one
                       scale of the encoder's emissions on the validation windows by
                       their negative log-likelihood and record it in best.pt
                       (semiseg/genemodel/calibrate.py); annotate applies it
    calibrate_introns: with calibrate, the gene model with crf.tie_noncoding only: fit
                       the tied introns' per-strand constants together with the encoder
                       scale on the validation windows, from the scale fitted alone
                       (held-out NLL; before
                       symmetric_introns, which then starts from them); a fit that
                       takes the scale outside [0.3, 1.5] gives way to the scale alone
    calibrate_orf:     with calibrate, the gene model with crf.orf_length_scores only:
                       fit one weight in [0, 1] on the ORF-length curves on the
                       validation windows (held-out NLL, the encoder scale fitted
                       first); annotate applies the weighted curves
    symmetric_introns: the gene model with crf.tie_noncoding only: after the last
                       epoch, set the tied introns' per-strand constants so that both
                       strands' introns score the same per base against intergenic
                       sequence (their mean; semiseg/genemodel/symmetry.py), recorded in
                       best.pt beside the encoder scale
    average_epochs:    weight averaging: validation, best.pt and annotation use an
                       exponential moving average of the weights over the optimiser
                       steps, with a horizon of this many epochs' batches (0 = off, the
                       last step's weights; semiseg/train/averaging.py)
    world_size:        a record, not a setting: the number of processes that trained the
                       run (torchrun's WORLD_SIZE; 1 without torchrun), written by
                       `semiseg train` into the run's config.yaml
    """

    epochs: int = 20
    batch_size: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.01
    crf_lr_scale: float = 1.0
    warmup_epochs: float = 1.0
    grad_clip: float = 1.0
    patience: int = 5
    select: str = "loss"
    seed: int = 0
    reverse_complement: bool = False
    amp: str = "auto"
    calibrate: bool = True
    calibrate_introns: bool = False
    calibrate_orf: bool = False
    symmetric_introns: bool = True
    average_epochs: float = 0.0
    world_size: int = 1


@dataclass
class AnnotateConfig:
    """Annotation (stored in the checkpoint; `semiseg annotate` flags override).

    window:  bp per encoder window (emissions keep each window's centre)
    context: bp of context on each side of a window's centre
    max_decode_steps: decode a chromosome as one sequence up to this many CRF steps,
             otherwise in overlapping windows of this many steps, stitched at centres
    decode_overlap: CRF steps by which neighbouring decoding windows overlap (each keeps
             its centre, so a window's kept part has about half of this as context on
             each side); 0 = 8 x crf.max_duration, at most a quarter of
             max_decode_steps
    batch_steps: CRF steps per batch when many short contigs are decoded together
    reverse_complement: auto | on | off; average the emissions of each sequence and of
             its reverse complement (stranded labels swapped); auto = on when the model
             was trained with train.reverse_complement
    intron_rate: the gene model (crf.frames) only: add this log-score to every base inside
             an intron when annotating (a per-bp prior for long introns; >= 0)
    intron_penalty: the gene model (crf.frames) only: subtract this log-score from each
             intron when annotating (0: as trained; larger: fewer introns). A prior for
             genomes where the model's introns are less reliable than its genes
    branch_penalty: the gene model with crf.site_scores only: subtract this log-score from
             each intron whose acceptor has no branch point within one base of the
             branch matrix's consensus (yeast TACTAAC) 10-80 bp upstream (0: off; .inf:
             a rule, no intron ends at such an acceptor). A prior for genomes whose
             introns nearly all carry one
    donor_motif: the gene model only: an intron must begin with this IUPAC motif on its
             strand (e.g. GTANG; "" or GT: any GT); a prior for genomes with a strict 5'
             splice site (yeast: GTATGT)
    first_atg: the gene model at 1 bp only: move each gene's start codon to the first
             ATG of its open reading frame (the upstream-most in-frame ATG after the
             previous stop), over intergenic bases only (semiseg/genemodel/firstatg.py)
    long_orfs: the gene model at 1 bp only: after first_atg, call every open reading frame
             of at least this many codons (stop included; first ATG to stop) that lies
             wholly in intergenic sequence a gene, the longest first
             (semiseg/genemodel/orffill.py; 0: off). SGD's convention for yeast is 100
    min_gene_score: the gene model at 1 bp only: a decoded gene whose mean label
             posterior over its bases (the score of its GFF3 gene row) is below this is
             not called: its bases are written as intergenic, before first_atg and
             long_orfs (semiseg/genemodel/genefilter.py; 0: off)
    max_masked_cds: the gene model at 1 bp only: a decoded gene with more than this share
             of its CDS bases in lowercase (soft-masked repeats) in the FASTA is not
             called: its bases are written as intergenic, after first_atg and long_orfs
             (genefilter.py; 1: off; a FASTA with no lowercase is never touched).
             learn_rules sets it to the largest share among the training genes
    learn_rules: the gene model at 1 bp only: `semiseg train` sets donor_motif,
             branch_penalty, first_atg, long_orfs and max_masked_cds from the training
             annotation, each turned on only where the training genes obey it
             (semiseg/genemodel/learnedrules.py; the values learned replace the five
             above in the run's config)
    split_stops: the gene model only: take stop codons that an intron splits out of
             decoded genes, by decoding each such gene's locus again with one of the
             junction's splice bases barred (semiseg/genemodel/splitstops.py); false
             (the default): leave them (annotate's warning names them). On fly (3
             seeds) it took out every one and left gene F1 as it was, exon F1 0.006
             lower on the validation block (docs/gene_model.md)
    signal_precision: bigWig/bedGraph values (posteriors, boundary, entropy) are rounded
             to a multiple of this and equal neighbours written as one entry, which keeps
             1-bp tracks small and fast to write; 0: every step's exact float32 value
    """

    window: int = 100000
    context: int = 5000
    max_decode_steps: int = 2_000_000
    batch_steps: int = 200_000
    decode_overlap: int = 0
    reverse_complement: str = "auto"
    intron_penalty: float = 0.0
    intron_rate: float = 0.0
    branch_penalty: float = 0.0
    donor_motif: str = ""
    first_atg: bool = False
    long_orfs: int = 0
    min_gene_score: float = 0.0
    max_masked_cds: float = 1.0
    learn_rules: bool = False
    split_stops: bool = False
    signal_precision: float = 1e-4


@dataclass
class Config:
    inputs: InputsConfig = field(default_factory=InputsConfig)
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    windows: WindowsConfig = field(default_factory=WindowsConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    crf: CRFConfig = field(default_factory=CRFConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    annotate: AnnotateConfig = field(default_factory=AnnotateConfig)
    device: str = "auto"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
