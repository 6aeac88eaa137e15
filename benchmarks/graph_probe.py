"""Small calls on the GPU (issue 9, host time): at (32, 300, 30, 39) the argument checks
alone, the forward and the Viterbi eager and by CUDA graph (forward+backward: the host
section of periodic_kernels.py), and what the GPU spends under the kernels' schedule
knobs (warps per program, checkpoint segment length) at a few small shapes. Needs CUDA.

    PYTHONPATH=. python benchmarks/graph_probe.py
"""
import torch
from periodic_kernels import wall

import semiseg.crf.kernels as kn
from semiseg.crf.inputs import check_inputs
from semiseg.crf.kernels import graphs


def main():
    B, T, K, C = 32, 300, 30, 39
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    p = {"scores": 3 * r(B, T, C), "transition": r(C, C), "duration_bias": r(K, C),
         "start": r(C), "end": r(C)}
    x = check_inputs(p["scores"], p["transition"], p["duration_bias"], None,
                     start=p["start"], end=p["end"])

    def direct():
        lz, saved = kn.forward(x, keep=True)
        return lz, kn.backward(x, saved, torch.ones_like(lz))

    def checks():
        check_inputs(p["scores"], p["transition"], p["duration_bias"], None,
                     start=p["start"], end=p["end"])

    print("| (32, 300, 30, 39) | wall ms (median of 80) |\n|---|---|")  # fwd+bwd: periodic_kernels
    print(f"| check_inputs alone | {wall(checks, 80):.3f} |")
    for on in (False, True):
        graphs.ENABLED = on
        how = "graphs" if on else "eager"
        print(f"| kernels fwd (keep=False), {how} | {wall(lambda: kn.forward(x), 80):.3f} |")
        print(f"| kernels viterbi, {how} | {wall(lambda: kn.viterbi(x), 80):.3f} |")
    graphs.ENABLED = True
    print("\n| warps | MIN_SEGMENT | PROGRAMS_PER_SM | kernels fwd+bwd, graphs, ms | fwd ms |"
          "\n|---|---|---|---|---|")
    ref = direct()
    for w in (None, 2, 4, 8, 16):
        for ms, pps in ((32, 2), (16, 2), (16, 4), (8, 4)):
            kn.WARPS, kn.MIN_SEGMENT, kn.PROGRAMS_PER_SM = w, ms, pps
            graphs.POOL.clear()
            out = direct()
            torch.cuda.synchronize()
            ok = torch.allclose(out[0], ref[0], rtol=1e-5) and torch.allclose(
                out[1]["scores"], ref[1]["scores"], atol=1e-5)
            print(f"| {w or 'by shape'} | {ms} | {pps} | {wall(direct, 80):.3f} | "
                  f"{wall(lambda: kn.forward(x), 80):.3f} |{'' if ok else ' MISMATCH'}", flush=True)
    kn.WARPS, kn.MIN_SEGMENT, kn.PROGRAMS_PER_SM = None, 32, None
    print("\n| B, T, K, C | warps | kernels fwd+bwd, graphs, ms | viterbi ms |\n|---|---|---|---|")
    for B, T, K, C in ((32, 300, 30, 39), (64, 300, 30, 24), (16, 500, 64, 16),
                       (128, 200, 16, 8), (8, 1000, 100, 24), (64, 1000, 100, 24)):
        g = torch.Generator(device="cuda").manual_seed(1)
        q = [torch.randn(*s, device="cuda", generator=g) for s in ((B, T, C), (C, C), (K, C))]
        y = check_inputs(3 * q[0], q[1], q[2], None)

        def fb(y=y):
            lz, saved = kn.forward(y, keep=True)
            return kn.backward(y, saved, torch.ones_like(lz))

        for w in (None, 2, 4, 8, 16):
            kn.WARPS = w
            graphs.POOL.clear()
            print(f"| {B}, {T}, {K}, {C} | {w or 'by shape'} | {wall(fb, 40):.3f} | "
                  f"{wall(lambda y=y: kn.viterbi(y), 40):.3f} |", flush=True)
    kn.WARPS = None


if __name__ == "__main__":
    main()
