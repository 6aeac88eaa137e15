"""The small public call under the kernels' schedule knobs (issue 9's last row): wall
clock of `log_partition(...).sum().backward()` at (32, 300, 30, 39) with CUDA graphs, and
of the kernels alone (kernels.forward + kernels.backward, graphed), for each variant of
module settings, interleaved in rounds so that the host's drift hits every variant alike.
Each variant's gradients are compared with the rule's (max abs difference).
Needs CUDA.

    PYTHONPATH=.:benchmarks python benchmarks/small_call_knobs.py \
        --variants "now;w1:WARPS=1;pps4:PROGRAMS_PER_SM=4" [--rounds 3 --reps 100]
"""
import argparse
import statistics

import torch
from k_doubling import variants, with_knobs
from periodic_kernels import as_x, fwd_bwd, leaves, wall

from semiseg.crf import log_partition
from semiseg.crf.kernels import graphs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="now")
    ap.add_argument("--shape", default="32,300,30,39")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    B, T, K, C = map(int, args.shape.split(","))
    p = leaves(B, T, K, C)
    req = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    x = as_x(p)

    def api():
        log_partition(req["scores"], req["transition"], req["duration_bias"],
                      start=req["start"], end=req["end"]).sum().backward()

    def direct():
        return fwd_bwd(x)

    vs = variants(args.variants)
    ref = direct()
    diffs, times = {}, {name: ([], []) for name, _ in vs}
    for name, knobs in vs:
        graphs.POOL.clear()
        try:
            gr = with_knobs(knobs, direct)
        except Exception as e:  # noqa: BLE001 (a variant the compiler refuses: reported)
            diffs[name] = f"failed: {type(e).__name__}: {str(e)[:80]}"
            continue
        diffs[name] = max((gr[k] - ref[k]).abs().max().item() for k in gr if gr[k] is not None)
    vs = [(n, k) for n, k in vs if not isinstance(diffs[n], str)] + [
        (n, k) for n, k in vs if isinstance(diffs[n], str)]
    for _ in range(args.rounds):
        for name, knobs in vs:
            if isinstance(diffs[name], str):
                continue
            graphs.POOL.clear()

            def both(out=times[name]):
                out[0].append(wall(api, args.reps))
                out[1].append(wall(direct, args.reps))
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
