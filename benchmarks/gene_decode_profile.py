"""Where the 1-bp gene model's annotation time goes on one device, stage by stage.

    PYTHONPATH=. python benchmarks/gene_decode_profile.py --shapes 100x20000,20x100000

For each (B, T) shape: B windows of T bp of real sequence (data/yeast/chrII.fa, tiled),
the shipped model's emissions (semiseg/models/yeast_cds_frames.pt, both strands), then
each stage of FrameHead.decode_with_marginals timed alone with the device synchronised
before and after (median of --repeats): the CRF inputs (_terms: the sequence mask built on
the host), the posterior pass (forward + backward), the posterior decode (Viterbi) and
the collapsed marginals. With --kernels, the top CUDA kernels of one whole call
(torch.profiler). Prints a table; nothing is recorded (a profile, not a benchmark).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, dev, repeats):
    out, times = None, []
    for _ in range(repeats):
        sync(dev)
        t = time.perf_counter()
        out = fn()
        sync(dev)
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def gene_model(path: str, dev):
    """(Annotator of the model at path on chrII, chrII's length), the intron penalty of
    the shipped configuration set."""
    from semiseg.annotate import Annotator
    from semiseg.checkpoint import load_checkpoint
    from semiseg.genome import Fasta, GenomeData

    ckpt = load_checkpoint(path)
    fa = Fasta(os.path.join(ROOT, "data", "yeast", "chrII.fa"))
    data = GenomeData.from_config(ckpt["genome"], fa)
    ann = Annotator(ckpt, data, dev, 100000, 5000, 10**9, 10**9, reverse_complement=True)
    ann.model.crf.intron_penalty = 8.0
    return ann, fa.chrom_sizes["chrII"]


def windows(ann, L: int, B: int, T: int, dev):
    """(emissions (B, T, ...), lengths) of B windows of T bp of chrII (tiled where T > L),
    encoded in chunks as annotate does."""
    starts = [(i * 7919 * 13) % (L - T) if T < L else 0 for i in range(B)]
    ems = []
    for s in starts:
        e = min(L, s + T)
        x = ann._load("chrII", s, e)
        x = np.resize(x, (T, x.shape[1])) if len(x) < T else x
        em, _ = ann._encode(x[None], [T])
        ems.append(em[0])
    return torch.stack(ems), torch.full((B,), T, device=dev)


def window_terms(ann, L: int, shapes: str, dev):
    """For each "BxT" of `shapes` (comma-separated): (B, T, lengths, the CRF terms of B
    windows of T bp of chrII: `windows`, then FrameHead._terms)."""
    for shape in shapes.split(","):
        B, T = (int(float(v)) for v in shape.split("x"))
        em, lengths = windows(ann, L, B, T, dev)
        with torch.no_grad():
            t = ann.model.crf._terms(em, lengths)
        del em
        yield B, T, lengths, t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="100x20000,20x100000")
    ap.add_argument("--model", default=os.path.join(ROOT, "semiseg", "models",
                                                    "yeast_cds_frames.pt"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", type=int, default=0, help="top N kernels of one call")
    ap.add_argument("--bwd-warps", default="",
                    help="comma-separated warp counts of the posterior backward's _bwd_kernel "
                         "to compare (each shape and budget run once per value; default: "
                         "kernels._wave_warps)")
    ap.add_argument("--rev-warps", default="",
                    help="comma-separated warp counts of the periodic reversed chain "
                         "(kernels.REV_WARPS) to compare; default: the caller's rule")
    ap.add_argument("--tile-warps", default="",
                    help="comma-separated warp counts of the tiled end-indexed chain "
                         "(kernels.TILE_WARPS) to compare; default: its rule")
    ap.add_argument("--rows-budget", default="",
                    help="comma-separated MB values of kernels.ROWS_BUDGET to compare "
                         "(each shape is run once per value; default: the shipped one)")
    ap.add_argument("--variant", action="append", default=[],
                    help="module knobs of semiseg.crf.kernels for one more run of each "
                         "shape, e.g. CHAIN_TILE_FROM=16384,CHAIN_TILE_ELEMS=4096 (the "
                         "periodic reversed chain tiled at the gene shape); repeatable")
    args = ap.parse_args()

    from semiseg.annotate import pick_device

    dev = pick_device(args.device)
    ann, L = gene_model(args.model, dev)
    crf = ann.model.crf
    print(f"device {torch.cuda.get_device_name(0) if dev.type == 'cuda' else 'cpu'}; "
          f"internal labels {len(crf.layout)}, K {crf.max_duration}", flush=True)
    print("| B x T | steps | terms s | posteriors s | Viterbi s | marginals s | total s | "
          "us per step | steps/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    from semiseg.crf import kernels as kn

    budgets = [int(float(v)) << 20 for v in args.rows_budget.split(",") if v]
    warps = [int(v) for v in args.bwd_warps.split(",") if v]
    plain_warps = kn._wave_warps
    revs = [int(v) for v in args.rev_warps.split(",") if v]
    tiles = [int(v) for v in args.tile_warps.split(",") if v]
    variants = [{k: int(v) for k, v in (kv.split("=") for kv in var.split(","))}
                for var in args.variant]
    runs = [(shape, b, w, r, tw, var) for shape in args.shapes.split(",")
            for b in (budgets or [None]) for w in (warps or [None]) for r in (revs or [None])
            for tw in (tiles or [None]) for var in [{}] + variants]
    shipped = {k: getattr(kn, k) for var in variants for k in var}
    for shape, budget, nw, rw, tw, var in runs:
        for k, v in dict(shipped, **var).items():
            setattr(kn, k, v)
        kn.REV_WARPS, kn.TILE_WARPS = rw, tw
        if budget is not None:
            kn.ROWS_BUDGET = budget
        kn._wave_warps = (plain_warps if nw is None else
                          lambda KP, CP, kernel, params=True, nw=nw: nw if kernel == "bwd"
                          else plain_warps(KP, CP, kernel, params))
        B, T = (int(float(v)) for v in shape.split("x"))
        em, lengths = windows(ann, L, B, T, dev)
        with torch.no_grad():
            t, s_terms = timed(lambda: crf._terms(em, lengths), dev, args.repeats)
            g, s_post = timed(lambda: crf._posteriors(t, "auto"), dev, args.repeats)
            seg, s_vit = timed(lambda: crf._decode_posteriors(t, g, "auto"), dev,
                               args.repeats)
            _, s_marg = timed(lambda: crf._marginals_from(g, lengths), dev, args.repeats)
            _, s_all = timed(lambda: crf.decode_with_marginals(em, lengths), dev,
                             args.repeats)
        n = B * T
        tag = f" ({budget >> 20} MB rows)" if budget is not None else ""
        tag += f" (_bwd_kernel {nw} warps)" if nw is not None else ""
        tag += f" (reversed chain {rw} warps)" if rw is not None else ""
        tag += f" (tiled chain {tw} warps)" if tw is not None else ""
        tag += "".join(f" ({k} {v})" for k, v in var.items())
        print(f"| {B} x {T:,}{tag} | {n:,} | {s_terms:.3f} | {s_post:.3f} | {s_vit:.3f} | "
              f"{s_marg:.3f} | {s_all:.3f} | {1e6 * s_all / T:.1f} | {n / s_all:,.0f} |",
              flush=True)
        if args.kernels and dev.type == "cuda":
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                with torch.no_grad():
                    crf.decode_with_marginals(em, lengths)
                sync(dev)
            print(prof.key_averages().table(sort_by="cuda_time_total",
                                            row_limit=args.kernels), flush=True)
        del em, t, g, seg


if __name__ == "__main__":
    main()
