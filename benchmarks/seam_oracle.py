"""How many posterior seams could certify at the first width at all (issue 42's ">= 99%
of seams certified at the first width"): each seam of the first windows against the
posteriors of its two windows decoded as one, the oracle no certificate has.

For each seam between windows A = [a0, a1) and B = [b0, b1) (the first windows of
`posterior_seams.posterior_windows`, as the default decode lays them), and every cut c
where the default may cut it (posterior_seams._seam_range, inside the overlap [b0,
a1)), the stitched posteriors' largest difference from the whole
union U = [a0, b1)'s over the overlap is max(max_{b0 <= t < c} |A - U|, max_{c <= t <
a1} |B - U|) (largest over labels; what the certificate bounds, docs/decoding.md). The
seam's *oracle error* is its smallest value over the cuts: where it exceeds the
tolerance, no cut of these two windows is within it of U, so no certificate can certify
the seam at this width, however tight. (Against the whole sequence instead, a window
pair's union can itself be far off, where its own far edges cut a long gene: that is
the neighbouring seams' business.)
Beside it, the certificate's own verdict at the first width (posterior_bound.seam_cut
on the same windows and their intersection).

    PYTHONPATH=. python benchmarks/seam_oracle.py --region 2000000-3000000 \
        [--windows 65536:16384] [--model fly] [--device cpu]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402


def oracle_error(err_a: torch.Tensor, err_b: torch.Tensor, lo: int, hi: int
                 ) -> tuple[float, int]:
    """min over cuts c in [lo, hi) of max(max err_a[:c], max err_b[c:]) and its c, for
    the overlap's per-step differences err_a (window A against the whole) and err_b."""
    n = err_a.shape[0]
    lo, hi = max(0, lo), min(n + 1, hi)
    zero = torch.zeros(1, dtype=err_a.dtype)
    left = torch.cat([zero, torch.cummax(err_a, 0).values])  # left[c] = max err_a[:c]
    right = torch.cat([torch.cummax(err_b.flip(0), 0).values.flip(0), zero])  # err_b[c:]
    both = torch.maximum(left, right)[lo:hi]
    c = int(torch.argmin(both))
    return float(both[c]), lo + c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--region", default="2000000-3000000")
    ap.add_argument("--windows", default="65536:16384", help="window:overlap")
    ap.add_argument("--model", default="fly")
    ap.add_argument("--fasta", default=os.path.join(ROOT, "data", "fly", "chr2R_2M_6M.fa"))
    ap.add_argument("--chrom", default="chr2R_2M_6M")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tol", type=float, default=None, help="default: seams.POSTERIOR_TOL")
    args = ap.parse_args()

    from semiseg.annotate import posterior_seams as ps
    from semiseg.annotate.annotator import Annotator, Item
    from semiseg.annotate.posterior_bound import WindowPass, posteriors_and_ends, seam_cut
    from semiseg.annotate.seams import POSTERIOR_TOL
    from semiseg.checkpoint import load_checkpoint, resolve_model
    from semiseg.genome import Fasta, GenomeData

    tol = args.tol if args.tol is not None else POSTERIOR_TOL
    dev = torch.device(args.device)
    a, b = (int(v) for v in args.region.split("-"))
    W, ov = (int(v) for v in args.windows.split(":"))
    ck = load_checkpoint(resolve_model(args.model))
    t0 = time.perf_counter()
    with Fasta(args.fasta) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, dev, 200000, 10000, 2000000, 200000)
        em, _ = ann.emissions(Item(args.chrom, a, b))
    head = ann.model.crf
    S = em.shape[0]
    with torch.no_grad():
        terms = ps._whole_terms(head, em)
        K = terms["duration_bias"].shape[0]
        wins = ps.posterior_windows(S, W, ov, period=3)
        seams = list(zip(wins[:-1], wins[1:]))
        spans = ([(ws, we) for _, _, ws, we in wins] + [(B[2], A[3]) for A, B in seams]
                 + [(A[2], B[3]) for A, B in seams])
        cache: dict = {}
        for ws, we in spans:  # one window a call: the ends of the overlaps are kept
            t = ps._window_terms(terms, [(ws, we)])
            g, e = posteriors_and_ends(t, "auto", True)
            cache[(ws, we)] = WindowPass(ws, we, g[0, :we - ws].cpu(),
                                         {(ws, we): e[0, :we - ws].cpu()})
    print(f"{args.model}, {args.chrom}:{a:,}-{b:,} ({S:,} steps), windows {W:,} / overlap "
          f"{ov:,}: {len(seams)} seams, {time.perf_counter() - t0:.0f} s\n")
    print("| seam (sequence position) | oracle error | certificate's bound | certified |")
    print("|---|---|---|---|")
    n_oracle = n_cert = 0
    span = [(cs, ce) for cs, ce, _, _ in wins]
    for i, (A, B) in enumerate(seams):
        (_, _, a0, a1), (cs, _, b0, _) = A, B
        lo, hi = ps._seam_range(span, i)
        wa, wb, wc = cache[(a0, a1)], cache[(b0, B[3])], cache[(b0, a1)]
        u = cache[(a0, B[3])].post[b0 - a0:a1 - a0].double()
        err_a = (wa.post[b0 - a0:a1 - a0].double() - u).abs().amax(-1)
        err_b = (wb.post[:a1 - b0].double() - u).abs().amax(-1)
        best, _ = oracle_error(err_a, err_b, lo - b0, hi - b0)
        cut, bound = seam_cut(lo, hi, K, wa, wb, wc, tol)
        n_oracle += best <= tol
        n_cert += cut is not None
        print(f"| {a + cs:,} | {best:.2g} | {bound:.2g} | {'yes' if cut is not None else 'no'} |")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    name = torch.cuda.get_device_name() if dev.type == "cuda" else f"{os.cpu_count()} CPU cores"
    print(f"\nseams within {tol:g} of their union at some cut (the oracle): {n_oracle} "
          f"of {len(seams)}; certified at the first width: {n_cert} of {len(seams)}")
    print(f"{name}, commit {commit}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
