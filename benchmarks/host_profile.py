"""cProfile of the public API's forward+backward at (32, 300, 30, 39), after the CPU ms
per call with the GPU running free (no synchronisation inside the timed loop), and of
Viterbi's .segments at (64, 1000, 100, 24): where the host time goes (needs CUDA).

    PYTHONPATH=. python benchmarks/host_profile.py [--api-only]
"""
import cProfile
import pstats
import sys
import time

import torch

from semiseg.crf import log_partition, viterbi


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    B, T, K, C = 32, 300, 30, 39
    sc = (3 * r(B, T, C)).requires_grad_(True)
    tr, db, st, en = (r(C, C).requires_grad_(True), r(K, C).requires_grad_(True),
                      r(C).requires_grad_(True), r(C).requires_grad_(True))

    def api():
        log_partition(sc, tr, db, start=st, end=en).sum().backward()

    for _ in range(5):
        api()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(200):
        api()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print(f"host ms per call, GPU free: {(t1 - t0) / 200 * 1e3:.3f}")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(50):
        api()
    torch.cuda.synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(30)
    pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
    if "--api-only" in sys.argv:
        return
    B, T, K, C = 64, 1000, 100, 24
    args = (3 * r(B, T, C), r(C, C), r(K, C))
    seg = viterbi(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    seg.segments
    print(f"segments of one Segmentation: {(time.perf_counter() - t0) * 1e3:.2f} ms")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5):
        viterbi(*args).segments
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
