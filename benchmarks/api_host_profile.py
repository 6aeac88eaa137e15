"""Host time of the public API's small forward+backward on a GPU (issue 9): CPU ms per
call with the GPU running free, then cProfile of 200 calls by own time. Needs CUDA.

    PYTHONPATH=. python benchmarks/api_host_profile.py
"""
import cProfile
import pstats
import time

import torch

from semiseg.crf import log_partition


def main():
    B, T, K, C = 32, 300, 30, 39
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    req = {k: v.requires_grad_(True) for k, v in {
        "scores": 3 * r(B, T, C), "transition": r(C, C), "duration_bias": r(K, C),
        "start": r(C), "end": r(C)}.items()}

    def api():
        lz = log_partition(req["scores"], req["transition"], req["duration_bias"],
                           start=req["start"], end=req["end"])
        lz.sum().backward()

    for _ in range(10):
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
    for _ in range(200):
        api()
    torch.cuda.synchronize()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
