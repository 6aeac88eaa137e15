"""Why the gene model's posterior decode (a periodic Viterbi over posteriors) takes longer
than the same kernels on random inputs of its shape: kernels.viterbi timed on the real
decode's inputs with one ingredient at a time swapped for a random one.

    PYTHONPATH=. python benchmarks/viterbi_inputs_probe.py [--shape 100x20000] [--reps 3]

Real inputs: the shipped model's emissions of B windows of T bp of chrII (as
benchmarks/gene_decode_profile.py builds them), its CRF terms and posteriors, and the
decode's arguments (posteriors as scores, the structure masks as transition and duration
bias, the sequence mask, proj_start). CUDA events, median of --reps after a warm-up.
Prints a table; nothing is recorded (a probe).
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import torch  # noqa: E402


def timed(kn, x, fold: bool, reps: int) -> tuple[float, float]:
    """(kernels.viterbi ms, kernels.forward ms) of x with kernels.FOLD_MASK = fold."""
    from periodic_kernels import events

    kn.FOLD_MASK = fold
    try:
        return events(lambda: kn.viterbi(x), reps), events(lambda: kn.forward(x), reps)
    finally:
        kn.FOLD_MASK = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="100x20000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kernels", action="store_true", help="also each kernel's CUDA time")
    ap.add_argument("--quick", action="store_true", help="the first three rows only")
    a = ap.parse_args()
    from semiseg.annotate import Annotator
    from semiseg.checkpoint import load_checkpoint
    from semiseg.crf import kernels as kn
    from semiseg.crf.inputs import check_inputs
    from semiseg.genome import Fasta, GenomeData

    dev = torch.device("cuda")
    ckpt = load_checkpoint(os.path.join(ROOT, "semiseg", "models", "yeast_cds_frames.pt"))
    fa = Fasta(os.path.join(ROOT, "data", "yeast", "chrII.fa"))
    data = GenomeData.from_config(ckpt["genome"], fa)
    ann = Annotator(ckpt, data, dev, 100000, 5000, 10**9, 10**9)
    crf = ann.model.crf
    B, T = (int(float(v)) for v in a.shape.split("x"))
    L = fa.chrom_sizes["chrII"]
    ems = []
    for i in range(B):
        s = (i * 7919 * 13) % (L - T)
        x = ann._load("chrII", s, s + T)
        ems.append(ann._encode(x[None], [T])[0][0])
    em = torch.stack(ems)
    lengths = torch.full((B,), T, device=dev)
    with torch.no_grad():
        t = crf._terms(em, lengths)
        post = crf._posteriors(t, "auto")
    g = torch.Generator(device="cuda").manual_seed(0)
    rnd = lambda like: torch.randn(like.shape, device="cuda", generator=g)
    base = {"scores": post, "transition": crf.tmask, "duration_bias": crf.dmask,
            "allowed": t["allowed"], "proj_start": t["proj_start"]}
    variants = [
        ("the decode's inputs", {}, False),
        ("the decode's inputs, mask folded into the scores (kernels.FOLD_MASK)", {}, True),
        ("no sequence mask (allowed)", {"allowed": None}, False),
        ("the sequence mask all True", {"allowed": torch.ones_like(t["allowed"])}, False),
        ("no proj_start", {"proj_start": None}, False),
        ("scores random N(0, 1)", {"scores": rnd(post)}, False),
        ("transition and duration bias random (finite)",
         {"transition": rnd(crf.tmask), "duration_bias": rnd(crf.dmask)}, False),
        ("all random, no mask", {"scores": rnd(post), "transition": rnd(crf.tmask),
                                 "duration_bias": rnd(crf.dmask), "allowed": None,
                                 "proj_start": rnd(post)}, False),
    ]
    if a.quick:
        variants = variants[:3]
    print(f"{B} x {T:,}, C {post.shape[-1]}, K {crf.dmask.shape[0]}, "
          f"-inf in transition {int(torch.isinf(crf.tmask).sum())}/{crf.tmask.numel()}, "
          f"in duration bias {int(torch.isinf(crf.dmask).sum())}/{crf.dmask.numel()}, "
          f"posteriors < 1e-30: {float((post < 1e-30).float().mean()):.2f}")
    print("| inputs | kernels.viterbi ms | kernels.forward ms |\n|---|---|---|")
    for name, change, fold in variants:
        p = dict(base, **change)
        x = check_inputs(p["scores"], p["transition"], p["duration_bias"], lengths,
                         allowed=p["allowed"], proj_start=p["proj_start"])
        tv, tf = timed(kn, x, fold, a.reps)
        print(f"| {name} | {tv:.1f} | {tf:.1f} |", flush=True)
        if a.kernels:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                kn.viterbi(x)
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=4))
    # a static shape with and without a mask (all True), not folded and folded
    g2 = torch.Generator(device="cuda").manual_seed(1)
    Bs, Ts, Ks, Cs = 8, 20000, 100, 24
    sc = 3 * torch.randn(Bs, Ts, Cs, device="cuda", generator=g2)
    tr, db = (torch.randn(Cs, Cs, device="cuda", generator=g2),
              torch.randn(Ks, Cs, device="cuda", generator=g2))
    ok = torch.ones(Bs, Ts, Cs, dtype=torch.bool, device="cuda")
    for name, allowed, fold in (("static 8 x 20000, K 100, C 24, no mask", None, False),
                                ("same, all-True mask", ok, False),
                                ("same, all-True mask folded", ok, True)):
        x = check_inputs(sc, tr, db, None, allowed=allowed)
        tv, tf = timed(kn, x, fold, a.reps)
        print(f"| {name} | {tv:.1f} | {tf:.1f} |", flush=True)


if __name__ == "__main__":
    main()
