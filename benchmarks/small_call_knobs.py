"""The small public call under the kernels' schedule knobs (issue 9's last row): wall
clock of `log_partition(...).sum().backward()` at (32, 300, 30, 39) with CUDA graphs, and
of the kernels alone (kernels.forward + kernels.backward, graphed), for each variant of
module settings, interleaved in rounds so that the host's drift hits every variant alike.
Each variant's log Z and gradients are compared with the rule's (max abs difference).
Needs CUDA.

    PYTHONPATH=.:benchmarks python benchmarks/small_call_knobs.py \
        --variants "now;w1:WARPS=1;pps4:PROGRAMS_PER_SM=4" [--rounds 3 --reps 100]
"""
import argparse
import statistics

import torch
from k_doubling import variants, with_knobs
from periodic_kernels import wall

import semiseg.crf.kernels as kn
from semiseg.crf import log_partition
from semiseg.crf.inputs import check_inputs
from semiseg.crf.kernels import graphs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="now")
    ap.add_argument("--shape", default="32,300,30,39")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    B, T, K, C = map(int, args.shape.split(","))
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", generator=g)
    p = {"scores": 3 * r(B, T, C), "transition": r(C, C), "duration_bias": r(K, C),
         "start": r(C), "end": r(C)}
    leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    x = check_inputs(p["scores"], p["transition"], p["duration_bias"], None,
                     start=p["start"], end=p["end"])

    def api():
        log_partition(leaves["scores"], leaves["transition"], leaves["duration_bias"],
                      start=leaves["start"], end=leaves["end"]).sum().backward()

    def direct():
        lz, saved = kn.forward(x, keep=True)
        return lz, kn.backward(x, saved, torch.ones_like(lz))

    vs = variants(args.variants)
    ref = direct()
    diffs, times = {}, {name: ([], []) for name, _ in vs}
    for name, knobs in vs:
        graphs.POOL.clear()
        try:
            lz, gr = with_knobs(knobs, direct)
        except Exception as e:  # a variant the compiler refuses: reported, left out
            diffs[name] = f"failed: {type(e).__name__}: {str(e)[:80]}"
            continue
        d = max([(lz - ref[0]).abs().max().item()]
                + [(gr[k] - ref[1][k]).abs().max().item() for k in gr])
        diffs[name] = d
    vs = [(n, k) for n, k in vs if not isinstance(diffs[n], str)] + [
        (n, k) for n, k in vs if isinstance(diffs[n], str)]
    for _ in range(args.rounds):
        for name, knobs in vs:
            if isinstance(diffs[name], str):
                continue
            graphs.POOL.clear()

            def both():
                times[name][0].append(wall(api, args.reps))
                times[name][1].append(wall(direct, args.reps))
            with_knobs(knobs, both)
    print(f"({B}, {T}, {K}, {C}) fwd+bwd, CUDA graphs, {torch.cuda.get_device_name(0)}; "
          f"wall ms, median of {args.reps} per round, {args.rounds} rounds")
    print("| variant | public API wall, rounds | kernels alone wall, rounds | max abs diff vs rule |"
          "\n|---|---|---|---|")
    for name, knobs in vs:
        a, k = times[name]
        if isinstance(diffs[name], str):
            print(f"| {name} {knobs} | - | - | {diffs[name]} |")
            continue
        print(f"| {name} {knobs or ''} | {' / '.join(f'{t:.3f}' for t in a)} "
              f"(median {statistics.median(a):.3f}) | {' / '.join(f'{t:.3f}' for t in k)} | "
              f"{diffs[name]:.2e} |")


if __name__ == "__main__":
    main()
