"""Where the periodic forward+backward spends its time against the static one at one shape
(issue 42: periodic / static <= 1.5x at (64, 20000, 256, 37)): each variant's fwd+bwd
median (CUDA events), its kernels' CUDA time in one profiled call, and the registers and
spills of every compiled Triton kernel.

    PYTHONPATH=. python benchmarks/periodic_bwd_probe.py [--shape 64,20000,256,37]
        [--reps 3] [--variants static periodic periodic:warps=16 periodic:noparams ...]

A variant is FAMILY[:KEY=VALUE,...]: FAMILY static, periodic (crf_speed.py's inputs) or
psparse (periodic with about 15% of the transitions finite, as a gene grammar's: the
sparse tables); KEY a Tuning field (an int, or true / false / none), or noparams (the
backward asked for the scores' gradient only: no duration-bias or transition sums, what
posteriors need). Each variant's gradients are compared with its family's first
variant's (largest absolute difference of the score gradients): a changed schedule must
not change the answer beyond float32.
"""

from __future__ import annotations

import argparse
import collections
import sys

import crf_speed
import lib
import torch

from semiseg.crf import dispatch


def _run(kn, x, tuning, wanted):
    lz, saved = kn.forward(x, keep=True, tuning=tuning)
    return kn.backward(x, saved, torch.ones_like(lz), wanted)


def _value(w: str):
    words = {"true": True, "false": False, "none": None}
    return words[w.lower()] if w.lower() in words else int(w)


def _inputs(B, T, K, C, family):
    """crf_speed.py's inputs; psparse: periodic with ~85% of the transitions -inf (each
    label keeps itself and a few others, the same ones in every residue)."""
    if family != "psparse":
        return crf_speed.as_x(crf_speed.leaves(B, T, K, C, family))
    p = crf_speed.leaves(B, T, K, C, "periodic")
    g = torch.Generator(device="cuda").manual_seed(1)
    keep = (torch.rand(C, C, device="cuda", generator=g) < 0.12) | torch.eye(
        C, dtype=torch.bool, device="cuda")
    p["transition"] = p["transition"].masked_fill(~keep, float("-inf"))
    return crf_speed.as_x(p)


def _kernels(fn) -> list[tuple[str, float, int]]:
    """(name, CUDA ms, calls) of the kernels of one fn() call, largest first."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    tot: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            tot[ev.name][0] += ev.device_time / 1e3
            tot[ev.name][1] += 1
    return sorted(((k, v[0], v[1]) for k, v in tot.items()), key=lambda r: -r[1])


def _compiled() -> list[str]:
    """Registers, spills, warps and shared memory of every compiled kernel of the chain
    modules (Triton 3.x's per-device caches)."""
    from semiseg.crf.triton.jit import chain, end, split_end

    rows = []
    for mod in (chain, end, split_end):
        for name in dir(mod):
            fn = getattr(mod, name)
            caches = getattr(fn, "device_caches", None)
            if not caches:
                continue
            for dev_cache in caches.values():
                for k in dev_cache[0].values():
                    md = k.metadata
                    rows.append(f"| {mod.__name__.rsplit('.', 1)[-1]}.{name} | "
                                f"{getattr(k, 'n_regs', '?')} | {getattr(k, 'n_spills', '?')} | "
                                f"{md.num_warps} | {md.shared} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="64,20000,256,37")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--variants", nargs="+", default=["static", "periodic", "periodic:noparams"])
    a = ap.parse_args()
    B, T, K, C = (int(v) for v in a.shape.split(","))
    kn = dispatch._triton_module()
    crf_speed.kn, crf_speed.DEV = kn, "cuda"
    print(lib.header("periodic_bwd_probe.py", "cuda", " ".join(sys.argv)))
    rows, prof = [], []
    first: dict[str, torch.Tensor] = {}
    for v in a.variants:
        family, _, opts = v.partition(":")
        kw = dict(o.split("=") if "=" in o else (o, "true") for o in opts.split(",") if o)
        wanted = ("scores",) if kw.pop("noparams", None) else None
        tuning = kn.Tuning(**{k: _value(w) for k, w in kw.items()}) if kw else None
        x = _inputs(B, T, K, C, family)

        def fn(x=x, t=tuning, w=wanted):
            return _run(kn, x, t, w)

        ms = lib.cuda_ms(fn, a.reps)
        g = fn()["scores"]
        ref = first.setdefault(family, g)
        diff = (g - ref).abs().max().item()
        rows.append(f"| {v} | {B}, {T}, {K}, {C} | {ms:.1f} | {diff:.1e} |")
        print(rows[-1], flush=True)
        for name, kms, n in _kernels(fn)[:8]:
            prof.append(f"| {v} | {name[:60]} | {kms:.1f} | {n} |")
    print("\n| variant | shape | fwd+bwd ms (median) | max abs diff of d/d scores vs the "
          "family's first |\n|---|---|---|---|")
    print("\n".join(rows))
    print("\n| variant | kernel | CUDA ms (one call) | launches |\n|---|---|---|---|")
    print("\n".join(prof))
    print("\n| kernel | registers | spills | warps | shared bytes |\n|---|---|---|---|---|")
    print("\n".join(_compiled()))


if __name__ == "__main__":
    main()
