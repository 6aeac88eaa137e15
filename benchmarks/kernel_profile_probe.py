"""CUDA time per kernel of one forward+backward (torch.profiler), to see which kernel a
cliff is in:

    PYTHONPATH=. python benchmarks/kernel_profile_probe.py BxTxKxCxW[,...]

W: warps for every kernel (kernels.WARPS; 0 = the rules). Concurrent kernels' times add
up (the two chains run side by side), so these are kernel times, not wall clock.
"""
import sys

sys.path.insert(0, "benchmarks")
import torch
from periodic_kernels import as_x, fwd_bwd, leaves
from torch.profiler import ProfilerActivity, profile

from semiseg.crf import kernels as kn

kn.MAX_RING = kn.MAX_RING_TILED = 1 << 20
for shape in sys.argv[1].split(","):
    B, T, K, C, W = (int(v) for v in shape.split("x"))
    kn.WARPS = W or None
    x = as_x(leaves(B, T, K, C))
    fwd_bwd(x); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd(x); torch.cuda.synchronize()
    print(f"== {B}x{T}x{K}x{C} warps {W}")
    seen = {}
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            name = ev.name[:60]
            seen.setdefault(name, [0, 0.0]); seen[name][0] += 1; seen[name][1] += ev.device_time / 1e3
    for name, (n, ms) in sorted(seen.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"  {ms:9.1f} ms  x{n}  {name}")
    print(" segment length", kn._segment_length(T, K, B, x.scores.device, C), flush=True)
