"""The host-memory check before an annotation (annotate/memory.py): which sequences it
counts, against bounds worked out by hand."""

from types import SimpleNamespace

import pytest
import torch

from semiseg.annotate.memory import bytes_per_step, check_host_memory, free_bytes
from semiseg.errors import SemisegError


class GeneHead:  # what the check reads of the gene model's head
    collapse_idx = torch.zeros(58)
    n_channels = 21

    def decode_with_marginals(self):
        pass


def _item(chrom, start, end):
    return SimpleNamespace(chrom=chrom, start=start, end=end)


CPU, CUDA = torch.device("cpu"), SimpleNamespace(type="cuda")


def test_bytes_per_step_by_hand():
    # 58 internal labels x (4 + 1 + 4) bytes, + (21 channels + 4 bases) x 4 on a CPU
    assert bytes_per_step(GeneHead(), True) == 58 * 9 + 100 == 622
    assert bytes_per_step(GeneHead(), False) == 522
    assert bytes_per_step(object(), True) == 0  # not the gene model: nothing counted


def test_the_longest_piece_the_device_and_the_warning():
    items = [_item("a", 0, 1000), _item("b", 500, 4500), _item("c", 0, 10)]
    need = 4000 * 622 + 1000 * 53 * 58  # + a CPU window of 1,000 steps: 3,074 a step
    with pytest.raises(SemisegError, match=r"b:501-4,500 \(4,000 bp\)"):
        check_host_memory(GeneHead(), items, 1, CPU, free=need - 1, window=1000)
    warn, spills = check_host_memory(GeneHead(), items, 1, CPU, free=need, window=1000)
    assert warn.startswith("warning: b:501-4,500 (4,000 bp) needs at least") and not spills
    assert check_host_memory(GeneHead(), items, 1, CPU, free=need * 3 // 2,
                             window=1000) == (None, False)
    # a window longer than the sequence: the sequence's own steps
    with pytest.raises(SemisegError):
        check_host_memory(GeneHead(), items, 1, CPU, free=4000 * (622 + 3074) - 1,
                          window=10**6)
    # resolution 2: 2,000 steps
    assert check_host_memory(GeneHead(), items, 2, CPU,
                             free=2000 * 622 * 3 // 2) == (None, False)
    # a CUDA device holds sequences up to device_steps itself; longer ones count 522 a step
    assert check_host_memory(GeneHead(), items, 1, CUDA, free=1,
                             device_steps=4000) == (None, False)
    with pytest.raises(SemisegError):
        check_host_memory(GeneHead(), items, 1, CUDA, free=4000 * 522 - 1, device_steps=3999,
                          window=1000)
    assert check_host_memory(object(), items, 1, CPU, free=1) == (None, False)


def test_a_sequence_past_the_memory_spills_to_files_where_the_disk_has_room():
    """With a spill folder the arrays go to files when 1.5 x their bound exceeds the free
    memory; only one CPU window must fit in memory, the files' bytes (622 + 64 a
    step) the disk (x 1.5), else an error naming the sequence."""
    items = [_item("b", 500, 4500)]
    need = 4000 * 622 + 1000 * 53 * 58
    own = 1000 * 53 * 58
    files = 4000 * (622 + 64)
    kw = dict(window=1000, spill_dir="/spill")
    line, spills = check_host_memory(GeneHead(), items, 1, CPU, free=need * 3 // 2 - 1,
                                     disk_free=files * 3 // 2, **kw)
    assert spills and "b:501-4,500" in line and "files in /spill" in line
    assert check_host_memory(GeneHead(), items, 1, CPU, free=need * 3 // 2,
                             disk_free=0, **kw) == (None, False)  # fits: no files
    with pytest.raises(SemisegError, match="disk in /spill"):
        check_host_memory(GeneHead(), items, 1, CPU, free=need, disk_free=files * 3 // 2 - 1,
                          **kw)
    with pytest.raises(SemisegError, match="one posterior window"):
        check_host_memory(GeneHead(), items, 1, CPU, free=own - 1, disk_free=10**12, **kw)
    line, spills = check_host_memory(GeneHead(), items, 1, CPU, free=own,
                                     disk_free=10**12, **kw)
    assert spills


def test_free_bytes_reads_meminfo(tmp_path):
    m = tmp_path / "meminfo"
    m.write_text("MemTotal:       24683872 kB\nMemFree:  100 kB\n"
                 "MemAvailable:   23000000 kB\nSwapTotal: 0 kB\nSwapFree:       1000 kB\n")
    assert free_bytes(str(m)) == (23000000 + 1000) * 1024
    m.write_text("MemTotal: 5 kB\n")  # no MemAvailable (an old kernel): not checked
    assert free_bytes(str(m)) is None
    assert free_bytes(str(tmp_path / "none")) is None


def _group(folder, limit_name, limit, stat):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / limit_name).write_text(f"{limit}\n")
    (folder / "memory.stat").write_text("".join(f"{k} {v}\n" for k, v in stat.items()))


def test_a_control_groups_limit_leaves_less_than_the_machine(tmp_path):
    """A batch job's or container's memory limit: the tightest group on the path, less
    its anonymous memory (cgroup v2: memory.max and anon; v1: memory.limit_in_bytes and
    total_rss + total_rss_huge; page cache not counted); no limit anywhere: None."""
    from semiseg.annotate.memory import cgroup_free_bytes

    root = tmp_path / "cg"
    proc = tmp_path / "cgroup"
    # v2: /job (8 GB, 1 GB anon) > /job/step (max: no limit of its own)
    proc.write_text("0::/job/step\n")
    _group(root, "memory.max", "max", {"anon": 5})
    _group(root / "job", "memory.max", 8 << 30, {"anon": 1 << 30, "file": 5 << 30})
    _group(root / "job" / "step", "memory.max", "max", {"anon": 1 << 30})
    assert cgroup_free_bytes(str(proc), str(root)) == 7 << 30
    m = tmp_path / "meminfo"
    m.write_text("MemAvailable:   23000000 kB\nSwapFree:       0 kB\n")
    assert free_bytes(str(m), str(proc), str(root)) == 7 << 30  # the group's is less
    _group(root / "job", "memory.max", 64 << 30, {"anon": 0})
    assert free_bytes(str(m), str(proc), str(root)) == 23000000 * 1024  # the machine's
    # v1: the memory controller's line; the limit "unlimited" written as ~2^63
    proc.write_text("9:name=systemd:/\n4:memory:/slurm/job_7\n3:cpuset:/\n")
    _group(root / "memory", "memory.limit_in_bytes", 9223372036854771712, {})
    _group(root / "memory" / "slurm", "memory.limit_in_bytes", 9223372036854771712, {})
    _group(root / "memory" / "slurm" / "job_7", "memory.limit_in_bytes", 4 << 30,
           {"total_rss": 1 << 30, "total_rss_huge": 1 << 29, "total_cache": 3 << 30})
    assert cgroup_free_bytes(str(proc), str(root)) == (4 << 30) - (3 << 29)
    # no limit anywhere, or nothing to read
    _group(root / "memory" / "slurm" / "job_7", "memory.limit_in_bytes",
           9223372036854771712, {})
    assert cgroup_free_bytes(str(proc), str(root)) is None
    assert cgroup_free_bytes(str(tmp_path / "none"), str(root)) is None


def test_the_heap_is_given_back_only_where_memory_is_tight():
    from semiseg.annotate.memory import heap_too_dear

    room = 3 * 1000 * 53 * 58  # three posterior windows of 1,000 steps' own arrays
    assert heap_too_dear(GeneHead(), 1000, free=room - 1)
    assert not heap_too_dear(GeneHead(), 1000, free=room)


def test_populate_keeps_what_the_arrays_hold():
    """hostmem.populate faults pages in without writing them: values written before
    (at both ends, across page edges) read back the same, and the arrays stay
    writable; empty_small_pages gives arrays of the shape and type asked."""
    import numpy as np

    from semiseg.crf.hostmem import empty_small_pages, populate

    a = empty_small_pages((3, 100_003, 5))
    b = empty_small_pages((4099,), np.int64)
    assert a.shape == (3, 100_003, 5) and a.dtype == np.float64 and b.dtype == np.int64
    rng = np.random.default_rng(0)
    a[...] = rng.standard_normal(a.shape)
    b[:] = np.arange(4099)
    want_a, want_b = a.copy(), b.copy()
    populate([a, b, a[1], np.empty(0)])
    assert np.array_equal(a, want_a) and np.array_equal(b, want_b)
    a[2, -1, -1] = 7.0
    assert a[2, -1, -1] == 7.0
