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
killed at 24.4 GB after 10 min 50 s). So the longest sequence is checked first:

- when even the sum of those arrays (a lower bound) exceeds the memory the machine has
  free (RAM and swap), annotate stops at once with an error naming the sequence, the
  memory it needs and what to do;
- when 1.5 times it does, a warning says the run may not fit. Measured peaks are higher
  than the bound by the temporaries and the heap's leftovers around it: fly on the
  2-core CPU 6.2 GB at 2 Mb and 7.7 GB at 4 Mb, against bounds of 4.5 and 5.7 GB.
"""

from ..errors import SemisegError
from ..genemodel.head import SEQ

FLOAT, FLOAT64, BOOL = 4, 8, 1
WARN_FACTOR = 1.5


def free_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """MemAvailable + SwapFree of /proc/meminfo, in bytes; None where it cannot be read
    (not Linux): then nothing is checked."""
    fields = {}
    try:
        with open(meminfo) as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "SwapFree"):
                    fields[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "MemAvailable" not in fields:
        return None
    return fields["MemAvailable"] + fields.get("SwapFree", 0)


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


def check_host_memory(head, items, resolution: int, device, free: int | None = None,
                      device_steps: int = 0, window: int = 0) -> str | None:
    """Raise a SemisegError before any work when the longest of `items` (chrom, start,
    end) needs more host memory than is free; return a warning line when 1.5 times that
    does (else None). On a CUDA device sequences of at most `device_steps` steps keep
    those arrays on the device and are not counted; on a CPU one posterior window of
    min(steps, `window`) steps adds its own."""
    on_cpu = device.type != "cuda"
    per = bytes_per_step(head, on_cpu)
    if per == 0 or not items:
        return None
    steps = [-(-(it.end - it.start) // resolution) for it in items]
    longest = max(range(len(items)), key=steps.__getitem__)
    S = steps[longest]
    if not on_cpu and S <= device_steps:
        return None
    free = free_bytes() if free is None else free
    need = S * per + (min(S, window) * window_bytes_per_step(head) if on_cpu else 0)
    if free is None or need * WARN_FACTOR <= free:
        return None
    it = items[longest]
    where = f"{it.chrom}:{it.start + 1:,}-{it.end:,} ({it.end - it.start:,} bp)"
    if need > free:
        raise SemisegError(
            f"{where} needs at least {need / 1e9:.1f} GB of memory to decode exactly as one "
            f"sequence with this model, and this machine has {free / 1e9:.1f} GB free: "
            "annotate it in parts (--regions), or on a machine with more memory")
    return (f"warning: {where} needs at least {need / 1e9:.1f} GB of memory to decode "
            f"exactly as one sequence, likely more, and this machine has {free / 1e9:.1f} "
            "GB free: it may run out (annotate it in parts with --regions)")
