"""Where the fly gene model's long-sequence decode spends its time, and how close the
certified posterior windows come to the whole sequence's posteriors (issue 42).

    python benchmarks/fly_decode_profile.py [--device cuda] [--region LO-HI]
        [--windows 131072,65536] [--overlap 16384] [--batch-steps 2640000]

Steps, each timed (synchronised): the encoder over the region; the whole sequence's
posterior pass; the posterior decode's Viterbi of the whole sequence on the device;
then, per window length, the posterior windows batched (batch-steps // W windows a
call, with each seam's intersection) and, per seam, the two windows' largest difference
at the centre of their overlap, the certificate's bound at the first width
(posterior_bound.py) and, at its cut, the stitch's largest difference from the whole
posteriors; then stitched_posteriors (widen, merge) against the whole. Prints Markdown
tables with the date, device and commit.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from semiseg.annotate import posterior_seams as seams  # noqa: E402
from semiseg.annotate.annotator import Annotator, Item  # noqa: E402
from semiseg.checkpoint import load_checkpoint, resolve_model  # noqa: E402
from semiseg.genome import Fasta, GenomeData  # noqa: E402

TOL = seams.POSTERIOR_TOL


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(dev, f):
    sync(dev)
    t = time.perf_counter()
    out = f()
    sync(dev)
    return out, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--region", default="0-4000000")
    ap.add_argument("--windows", default="131072,65536")
    ap.add_argument("--overlap", type=int, default=16384)
    ap.add_argument("--batch-steps", type=int, default=2_640_000)
    ap.add_argument("--max-widen", default="2",
                    help="doublings of a failing seam before its windows merge, "
                         "comma-separated: one stitched run each")
    a = ap.parse_args()
    dev = torch.device(a.device)
    lo, hi = (int(v) for v in a.region.split("-"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "CPU"
    now = datetime.datetime.now(datetime.UTC)
    print(f"fly_decode_profile: {now:%Y-%m-%d %H:%M} UTC, {name}, "
          f"commit {commit}, chr2R_2M_6M:{lo}-{hi}, torch {torch.__version__}")
    ck = load_checkpoint(resolve_model("fly"))
    with Fasta(str(ROOT / "data" / "fly" / "chr2R_2M_6M.fa")) as fa:
        data = GenomeData.from_config(ck.genome, fa)
        ann = Annotator(ck, data, dev, 100000, 5000, 2_000_000, 200_000,
                        reverse_complement=bool(ck.config.train.reverse_complement))
        ann.emissions(Item("chr2R_2M_6M", lo, min(hi, lo + 200_000)))  # warm-up
        (em, _), t_enc = timed(dev, lambda: ann.emissions(Item("chr2R_2M_6M", lo, hi)))
    crf = ann.model.crf
    S = em.shape[0]
    rows = [("encoder (both strands)", t_enc)]
    terms, t_terms = timed(dev, lambda: seams._whole_terms(crf, em))
    rows.append(("head terms, whole sequence", t_terms))
    small = seams._window_terms(terms, [(0, min(S, 50_000))])
    with torch.no_grad():
        timed(dev, lambda: crf._posteriors(small, "auto"))  # compile
    cache: dict = {}
    _, t_post = timed(dev, lambda: seams._compute_ext(crf, terms, [(0, S)], cache, S, "auto",
                                                      None))
    rows.append(("posterior pass, whole sequence (B = 1)", t_post))
    whole = cache[(0, S)].post
    ok, ps = terms["allowed"][0], terms["proj_start"][0]
    seams._device_viterbi(crf, whole[:50_000], ok[:50_000], ps[:50_000], dev, "auto")
    lab, t_vit = timed(dev, lambda: seams._device_viterbi(crf, whole, ok, ps, dev, "auto"))
    rows.append(("posterior decode's Viterbi, whole sequence on the device", t_vit))
    print(f"\n{S:,} steps; decode K' = {crf.decode_dmask.shape[0]}, labels "
          f"{crf.decode_dmask.shape[1]}\n")
    print("| step | s |\n|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.2f} |")
    for W in (int(w) for w in a.windows.split(",")):
        windows(a, dev, crf, em, terms, whole, S, W, lo)


def windows(a, dev, crf, em, terms, whole, S, W, lo):
    """One window length: the first width's windows and their seams' bounds, then the
    whole stitched_posteriors (widen, merge) against the whole sequence's."""
    ov = a.overlap
    wins = seams.posterior_windows(S, W, ov, period=3)
    ext = [(ws, we) for _, _, ws, we in wins]
    per_call = max(1, a.batch_steps // W)
    cache: dict = {}
    keep = seams._seam_rows(ext)
    steps = per_call * max(b - a for a, b in ext)
    _, t_w = timed(dev, lambda: seams._compute_ext(crf, terms, list(keep), cache, steps, "auto",
                                                   None, keep))
    print(f"\nW = {W}, overlap {ov}, {len(wins)} windows, {per_call} a call: "
          f"posterior windows and intersections {t_w:.2f} s\n")
    print("| seam | centre diff | bound at the first width | its cut | stitch vs whole "
          "there |")
    print("|---|---|---|---|---|")
    K = terms["duration_bias"].shape[0]
    span = [[cs, ce] for cs, ce, _, _ in wins]
    n_cert, worst = 0, 0.0
    for b in range(len(wins) - 1):
        m = wins[b + 1][0]
        A, B = cache[ext[b]], cache[ext[b + 1]]
        cut, bound = seams.posterior_bound.seam_cut(*seams._seam_range(span, b), K, A, B,
                                     cache[(ext[b + 1][0], ext[b][1])], TOL)
        d = float((A.post[m - A.start] - B.post[m - B.start]).abs().max())
        err = "-"
        if cut is not None:
            n_cert += 1
            # within half an overlap of the cut (further out, the other seams' windows)
            lo_, hi_ = max(A.start, cut - ov // 2), min(B.end, cut + ov // 2)
            e = max(float((A.post[lo_ - A.start:cut - A.start] - whole[lo_:cut]).abs().max()),
                    float((B.post[cut - B.start:hi_ - B.start] - whole[cut:hi_]).abs().max()))
            worst = max(worst, e)
            err = f"{e:.2g}"
        print(f"| {lo + m:,} | {d:.2g} | {bound:.2g} | "
              f"{'-' if cut is None else f'{lo + cut:,}'} | {err} |")
    print(f"\nseams certified at the first width: {n_cert} of {len(wins) - 1}; the "
          f"largest difference of such a stitch (within half an overlap of its cut) from the "
          f"whole posteriors: {worst:.2g}")
    for mw in (int(v) for v in a.max_widen.split(",")):
        stitched(dev, crf, em, whole, W, ov, per_call, mw)


def stitched(dev, crf, em, whole, W, ov, per_call, max_widen):
    """stitched_posteriors (widen up to max_widen times, then merge) against the whole
    sequence's posteriors: each posterior call, the time, the seams."""
    st = seams.SeamStats()
    out: list = []
    rounds = []
    real = seams._compute_ext

    def spy(head, terms_, exts, *rest):  # each posterior call: windows, longest, seconds
        r, t = timed(dev, lambda: real(head, terms_, exts, *rest))
        rounds.append((len(set(exts)), max(we - ws for ws, we in exts), t))
        return r
    seams._compute_ext = spy
    try:
        (g, _, _), t_s = timed(dev, lambda: seams.stitched_posteriors(
            crf, em, W, ov, per_call, stats=st, windows_out=out, max_widen=max_widen))
    finally:
        seams._compute_ext = real
    print(f"\nmax_widen {max_widen}:\n\n| posterior call | windows | longest (steps) | s |\n"
          "|---|---|---|---|")
    for i, (n, L, t) in enumerate(rounds):
        print(f"| {i + 1} | {n} | {L:,} | {t:.2f} |")
    diff = (g - whole).abs().amax(-1)
    at = int(diff.argmax())
    cuts = [ce for _, ce, _, _ in out[:-1]]
    near = min((abs(at - c) for c in cuts), default=-1)
    inside = [(cs, ce, ws, we) for cs, ce, ws, we in out if cs <= at < ce][0]
    print(f"\nthe largest difference from the whole ({float(diff[at]):.2g}) at step {at:,}: "
          f"{near:,} steps from the nearest cut, in the window {inside} (kept, extent)")
    print(f"\nstitched_posteriors (widen up to {max_widen}, merge): {t_s:.2f} s, {len(out)} "
          f"final windows (longest {max(we - ws for _, _, ws, we in out):,} steps); "
          f"{st.posterior_line()}; largest difference from the whole sequence's "
          f"posteriors {float((g - whole).abs().max()):.2g}")
    if dev.type == "cuda":
        print(f"peak GPU memory so far {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
