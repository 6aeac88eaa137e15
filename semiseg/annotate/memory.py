"""Host memory for the gene model's exact decode, checked before any work (issue 42).

The exact decode of one sequence holds some of its arrays whole in host memory (docs/
decoding.md, "Long chromosomes"): on a CPU the emissions, and on either device, for a
sequence the device does not hold, the head's `allowed` and `proj_start` terms, the
stitched posteriors and the posterior decode's scores, all (steps, internal labels) at
once while the max-sum runs. A sequence whose arrays cannot fit was killed by the
kernel's out-of-memory killer after minutes of work, with no message (4 Mb of fly on a
24 GB machine, before the CPU's windows were bounded). So the longest sequence is
checked first: when even this lower bound exceeds the memory the machine has free (RAM
and swap), annotate stops at once with an error naming the sequence, the memory it
needs and what to do. The bound counts only those arrays (measured peaks are higher:
fly 0-2 Mb and 0-4 Mb on the 2-core CPU, 6.6 and 8.8 GB, about 1.1 KB a step beyond a
fixed ~4.4 GB, against this bound's 854 bytes), so a run it lets through may still not
fit, and one it stops cannot.
"""

from __future__ import annotations

from ..errors import SemisegError

FLOAT, BOOL = 4, 1


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


def bytes_per_step(head, on_host_emissions: bool) -> int:
    """The lower bound's bytes per CRF step (module docstring): 0 for a model that is not
    the gene model. `allowed` (bool), `proj_start`, the stitched posteriors and the decode
    scores (float32), each one per internal label; with `on_host_emissions` (a CPU) the
    encoder's emission channels (float32) too."""
    if not hasattr(head, "decode_with_marginals") or not hasattr(head, "collapse_idx"):
        return 0
    C = int(head.collapse_idx.shape[0])
    emissions = FLOAT * int(getattr(head, "n_channels", 0)) if on_host_emissions else 0
    return emissions + C * (BOOL + 3 * FLOAT)


def check_host_memory(head, items, resolution: int, device, free: int | None = None,
                      device_steps: int = 0) -> None:
    """Raise a SemisegError before any work when the longest of `items` (chrom, start,
    end) needs more host memory than is free. On a CUDA device sequences of at most
    `device_steps` steps keep those arrays on the device and are not counted."""
    on_cpu = device.type != "cuda"
    per = bytes_per_step(head, on_cpu)
    if per == 0 or not items:
        return
    steps = [-(-(it.end - it.start) // resolution) for it in items]
    longest = max(range(len(items)), key=steps.__getitem__)
    if not on_cpu and steps[longest] <= device_steps:
        return
    free = free_bytes() if free is None else free
    need = steps[longest] * per
    if free is None or need <= free:
        return
    it = items[longest]
    bp = it.end - it.start
    raise SemisegError(
        f"{it.chrom}:{it.start + 1:,}-{it.end:,} ({bp:,} bp) needs at least "
        f"{need / 1e9:.1f} GB of memory to decode exactly as one sequence with this model "
        f"({per:,} bytes a base{' on the CPU' if on_cpu else ''}), and this machine has "
        f"{free / 1e9:.1f} GB free: annotate it in parts (--regions), or on a machine "
        "with more memory")
