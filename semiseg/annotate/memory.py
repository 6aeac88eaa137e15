"""Host memory for the gene model's exact decode, checked before any work (issue 42).

The exact decode of one long sequence holds some of its arrays whole in host memory
(docs/decoding.md, "Long chromosomes"): when its last posterior window is computed, the
head's scores (float32) and `allowed` (bool) terms of every step and the other windows'
posteriors (float32); on a CPU also the emissions (float32, the channels and the four
bases) and that window's own pass in the numba backend (its scores and frame penalty
made float64, its mask, and its three float64 rows of marginals with their float32
copies: 53 bytes per internal label a step). A sequence whose arrays cannot fit was
killed by the kernel's out-of-memory killer after minutes of work, with no message (4
Mb of fly on a 24 GB machine before the CPU's windows were bounded; 32 Mb of fly after,
killed at 24.4 GB after 10 min 50 s). So the longest sequence is checked first,
against the memory free to this process (the machine's, or less under a control
group's limit: a Slurm job's --mem, a container's):

- when 1.5 times the sum of those arrays (a lower bound) exceeds it, the arrays go to
  files (spill.py: mapped files in the output's folder or SEMISEG_SPILL_DIR, the same
  numbers), with a line saying so; then only one posterior window's own arrays
  must fit in memory and the files on that disk, else annotate stops at once with an
  error naming the sequence, the memory or disk it needs and what to do.
  Measured peaks are higher than the bound by the temporaries and the heap's leftovers
  around it: fly on the 2-core CPU 6.2 GB at 2 Mb and 7.7 GB at 4 Mb, against bounds
  of 4.5 and 5.7 GB.
- Without a spill folder (check_host_memory's spill_dir None) the rule before files:
  an error when the bound exceeds the free memory, a warning when 1.5 times it does.
"""

from ..crf.hostmem import cgroup_free_bytes, free_bytes  # noqa: F401 (tests patch these here)
from ..errors import SemisegError
from ..genemodel.head import SEQ
from ..genome.diskspace import free_space

FLOAT, FLOAT64, BOOL = 4, 8, 1
# What the output stage holds of a sequence besides (emit.write_chrom): labels (int64),
# scheme-label marginals (9 float32 for the gene model), 3 signals (float32) and run
# posteriors (float64); in files too while spilling
EMIT_BYTES = 8 + 9 * FLOAT + 3 * FLOAT + 8
WARN_FACTOR = 1.5
HEAP_ROOM = 3  # heap_too_dear


def _labels(head) -> int:
    return int(head.collapse_idx.shape[0])


def bytes_per_step(head, on_host_emissions: bool) -> int:
    """The lower bound's bytes per CRF step of the sequence (module docstring): 0 for a
    model that is not the gene model. Its scores and the stitched windows' posteriors
    (float32) and `allowed` (bool), one per internal label; with `on_host_emissions` (a
    CPU) the emissions (float32: the encoder's channels and the four bases)."""
    if not hasattr(head, "decode_with_marginals") or not hasattr(head, "collapse_idx"):
        return 0
    emissions = (FLOAT * (int(getattr(head, "n_channels", 0)) + SEQ)
                 if on_host_emissions else 0)
    return emissions + _labels(head) * (BOOL + 2 * FLOAT)


def window_bytes_per_step(head) -> int:
    """A CPU posterior window's own bytes per step in the numba backend, per internal
    label: scores and frame penalty in float64, the mask, three float64 rows of
    marginals and their float32 copies (8 + 8 + 1 + 24 + 12 = 53)."""
    return (2 * FLOAT64 + BOOL + 3 * FLOAT64 + 3 * FLOAT) * _labels(head)


def heap_too_dear(head, window: int, free: int | None = None) -> bool:
    """Whether a run whose arrays go to files should also give the heap's freed pages
    back (runtime.return_freed_memory) instead of keeping them for reuse: where the
    free memory is under HEAP_ROOM times one posterior window's own arrays. Measured
    on 8 Mb of fly spilled in windows of 524,288 steps (1.6 GB each) under a 5 GB limit:
    the heap kept, 377 s and 2.9 GB of the run's own memory at its peak; given back,
    483 s and 1.4 GB (each freed block faulted in afresh)."""
    free = free_bytes() if free is None else free
    return free is not None and free < HEAP_ROOM * window * window_bytes_per_step(head)


def check_host_memory(head, items, resolution: int, device, free: int | None = None,
                      device_steps: int = 0, window: int = 0, spill_dir: str | None = None,
                      disk_free: int | None = None,
                      spill_window: int | None = None) -> tuple[str | None, bool]:
    """Before any work: (a log line or None, whether to spill). When the longest of
    `items` (chrom, start, end) needs more host memory than 1 / 1.5 of what is free, its
    whole-sequence arrays go to files in `spill_dir` (spill.py): only one posterior
    window's own arrays (on a CPU) must then fit in memory, and the arrays the disk
    there. A SemisegError when even that cannot fit. With `spill_dir` None the old rule:
    an error when the arrays exceed the free memory, a warning when 1.5 times them do.
    On a CUDA device sequences of at most `device_steps` steps keep those arrays on the
    device and are not counted; on a CPU one posterior window of min(steps, `window`)
    steps adds its own (of `spill_window` steps, default `window`, while spilling)."""
    on_cpu = device.type != "cuda"
    per = bytes_per_step(head, on_cpu)
    if per == 0 or not items:
        return None, False
    steps = [-(-(it.end - it.start) // resolution) for it in items]
    longest = max(range(len(items)), key=steps.__getitem__)
    S = steps[longest]
    if not on_cpu and S <= device_steps:
        return None, False
    free = free_bytes() if free is None else free
    own = min(S, window) * window_bytes_per_step(head) if on_cpu else 0
    need = S * per + own
    if free is None or need * WARN_FACTOR <= free:
        return None, False
    it = items[longest]
    where = f"{it.chrom}:{it.start + 1:,}-{it.end:,} ({it.end - it.start:,} bp)"
    if spill_dir is not None:
        disk = free_space(spill_dir) if disk_free is None else disk_free  # (inf: unknown)
        files = S * (per + EMIT_BYTES)
        own_spilled = (min(S, window if spill_window is None else spill_window)
                       * window_bytes_per_step(head) if on_cpu else 0)
        if own_spilled > free:
            raise SemisegError(
                f"{where}: one posterior window of it needs {own_spilled / 1e9:.1f} GB of memory "
                f"and this machine has {free / 1e9:.1f} GB free: annotate with a smaller "
                "--max-decode-steps, or on a machine with more memory")
        if files * WARN_FACTOR > disk:
            raise SemisegError(
                f"{where} needs {need / 1e9:.1f} GB of memory to decode exactly as one "
                f"sequence, this machine has {free / 1e9:.1f} GB free, and holding its "
                f"arrays in files needs {files / 1e9:.1f} GB of disk in {spill_dir} "
                f"({disk / 1e9:.1f} GB free): set SEMISEG_SPILL_DIR to a folder with room, "
                "or annotate it in parts (--regions)")
        return (f"{where} needs at least {need / 1e9:.1f} GB of memory to decode exactly "
                f"as one sequence, and {free / 1e9:.1f} GB is free to this run: its "
                f"whole-sequence arrays go to files in {spill_dir} (up to "
                f"{files / 1e9:.1f} GB of disk, removed as the run ends)"), True
    if need > free:
        raise SemisegError(
            f"{where} needs at least {need / 1e9:.1f} GB of memory to decode exactly as one "
            f"sequence with this model, and this machine has {free / 1e9:.1f} GB free: "
            "annotate it in parts (--regions), or on a machine with more memory")
    return (f"warning: {where} needs at least {need / 1e9:.1f} GB of memory to decode "
            f"exactly as one sequence, likely more, and this machine has {free / 1e9:.1f} "
            "GB free: it may run out (annotate it in parts with --regions)"), False
