"""Sparse against dense periodic transition tables (issue 13) on the 1-bp gene model.

    PYTHONPATH=. python benchmarks/sparse_transitions.py [--shapes 132x20000] [--reps 3]

For each (B, T): B windows of T bp of chrII (data/yeast), the shipped model's CRF inputs
(semiseg/models/yeast_cds_frames.pt: P = 3, K = 256, 37 labels, its allowed transitions
and sequence mask), then, with the dense tables (kernels.SPARSE_BELOW = 0) and with the
shipped rule (sparse where SP <= SPARSE_BELOW x CP), timed in one run: the posterior pass
(forward keep=True + backward of the scores' gradients, as annotate runs it), the full
forward + backward (training) and the Viterbi. ms, median of --reps CUDA-event timings
after a warm-up. Checks in the same run: the Viterbi paths (labels and starts) equal,
log Z and the scores' gradient within float32 of the dense ones. Prints a table and
appends it to benchmarks/RESULTS.md (--no-record: print only).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import torch
from gene_decode_profile import gene_model, window_terms
from periodic_kernels import events
from results import append

from semiseg.crf import kernels as kn
from semiseg.crf.inputs import check_inputs


def inputs(t: dict):
    return check_inputs(t["scores"].float().contiguous(), t["transition"].float(),
                        t["duration_bias"].float(), t["lengths"], start=t["start"],
                        end=t["end"], proj_start=t["proj_start"], allowed=t["allowed"])


def posterior(x):
    lz, saved = kn.forward(x, keep=True)
    return lz, kn.backward(x, saved, torch.ones_like(lz), wanted=("scores",))["scores"]


def full(x):
    lz, saved = kn.forward(x, keep=True)
    return kn.backward(x, saved, torch.ones_like(lz))


def kernel_times(fn) -> str:
    """GPU ms per kernel name of one call of fn (names shortened), largest first."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    tot = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if t:
            tot[ev.key[:28]] = tot.get(ev.key[:28], 0) + t / 1e3
    top = sorted(tot.items(), key=lambda kv: -kv[1])[:6]
    return ", ".join(f"{k} {v:.1f}" for k, v in top)


def spills() -> str:
    """Registers and spilled bytes of every compiled variant of the periodic kernels (the
    SP, MODE and warps it was compiled with), from Triton's kernel caches."""
    from semiseg.crf.kernels import chain, tiled

    out = []
    for name, fn in (("fwd", chain._fwd_kernel), ("end_tiled", tiled._fwd_end_tiled_kernel),
                     ("end", chain._fwd_end_kernel), ("bwd", chain._bwd_kernel)):
        for caches in getattr(fn, "device_caches", {}).values():
            for k in caches[0].values():
                try:
                    k._init_handles()
                    consts = {fn.arg_names[key[0]] if isinstance(key, tuple) else key: v
                              for key, v in k.src.constants.items()}
                    tag = {n: consts[n] for n in ("SP", "MODE", "NP", "PARAM_GRADS")
                           if n in consts}
                    out.append(f"{name} {tag} warps {k.metadata.num_warps}: regs "
                               f"{k.n_regs} spills {k.n_spills}")
                except Exception as e:  # noqa: BLE001 (a probe: report what it cannot read)
                    out.append(f"{name}: {type(e).__name__} {e}"[:120])
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="132x20000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default=os.path.join(os.path.dirname(HERE), "semiseg",
                                                    "models", "yeast_cds_frames.pt"))
    ap.add_argument("--kernels", action="store_true",
                    help="also print each variant's GPU time per kernel (torch.profiler) of "
                         "one posterior pass, fwd+bwd and Viterbi")
    ap.add_argument("--variant", action="append", default=[],
                    help="module knobs of semiseg.crf.kernels for one more sparse run, e.g. "
                         "REV_WARPS=16,TILE_WARPS=8; repeatable")
    ap.add_argument("--spills", action="store_true",
                    help="print registers and spills of the compiled periodic kernels")
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    ann, L = gene_model(a.model, dev)
    rule = kn.SPARSE_BELOW
    runs = [("dense", 0.0, {}), ("sparse", rule, {})]
    for var in a.variant:
        knobs = {k: int(v) for k, v in (kv.split("=") for kv in var.split(","))}
        runs.append((f"sparse ({var})", rule, knobs))
    lines = [("| B, T | tables | SP | posterior pass ms | fwd+bwd ms | Viterbi ms | "
              "Viterbi equal | log Z max diff | scores grad max diff |"),
             "|---|---|---|---|---|---|---|---|---|"]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("\n".join(lines), flush=True)
    for B, T, _, t in window_terms(ann, L, a.shapes, dev):
        x = inputs(t)
        del t
        ref = None
        for name, below, knobs in runs:
            kn.SPARSE_BELOW = below
            saved = {k: getattr(kn, k) for k in knobs}
            for k, v in knobs.items():
                setattr(kn, k, v)
            sp = kn._sparse_width(x)
            po = events(lambda x=x: posterior(x), a.reps)
            fb = events(lambda x=x: full(x), a.reps)
            vi = events(lambda x=x: kn.viterbi(x), a.reps)
            lz, gs = posterior(x)
            path = kn.viterbi(x)
            if a.kernels:
                for what, fn in (("posterior", posterior), ("fwd+bwd", full),
                                 ("Viterbi", kn.viterbi)):
                    print(f"  {name} {what}: {kernel_times(lambda fn=fn, x=x: fn(x))}", flush=True)
            if ref is None:
                ref, same, dz, dg = (lz, gs, path), "-", "-", "-"
            else:
                same = str(all(torch.equal(u, v) for u, v in zip(path, ref[2])))
                dz = f"{(lz.double() - ref[0].double()).abs().max().item():.2e}"
                dg = f"{(gs - ref[1]).abs().max().item():.2e}"
            for k, v in saved.items():
                setattr(kn, k, v)
            line = (f"| {B}, {T} | {name} | {sp} | {po:.1f} | {fb:.1f} | {vi:.1f} | {same} | "
                    f"{dz} | {dg} |")
            lines.append(line)
            print(line, flush=True)
        kn.SPARSE_BELOW = rule
        if a.spills:
            print(spills(), flush=True)
        del x, ref
    if a.no_record:
        return
    append(f"Sparse periodic transition tables on the gene model (issue 13) - "
           f"{datetime.date.today()}, {torch.cuda.get_device_name()}, torch "
           f"{torch.__version__}", f"`PYTHONPATH=. python benchmarks/sparse_transitions.py "
           f"--shapes {a.shapes}` (ms, median of {a.reps}):", lines)

if __name__ == "__main__":
    main()
