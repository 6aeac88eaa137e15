"""Where the fly gene model's long-sequence decode spends its time, and whether
posterior windows agree with the whole sequence's posteriors at seams that slide to
where the two windows agree (issue 42).

    python benchmarks/fly_decode_profile.py [--device cuda] [--region LO-HI]
        [--windows 131072,65536] [--overlap 16384] [--batch-steps 2640000]

Steps, each timed (synchronised): the encoder over the region; the whole sequence's
posterior pass; the posterior decode's Viterbi of the whole sequence on the device;
then, per window length, the posterior windows batched (batch-steps // W windows a
call) and, per seam, the two windows' largest difference at the centre of their overlap
and the longest run of steps over the overlap where they agree within 1e-5 (then the
difference of each window from the whole posteriors at that run's middle). Prints
Markdown tables with the date, device and commit.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
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


def longest_run(ok: np.ndarray) -> tuple[int, int]:
    """(length, start) of the longest run of True in ok."""
    if not ok.any():
        return 0, 0
    x = np.concatenate([[0], ok.astype(np.int8), [0]])
    d = np.diff(x)
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    i = int(np.argmax(ends - starts))
    return int(ends[i] - starts[i]), int(starts[i])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--region", default="0-4000000")
    ap.add_argument("--windows", default="131072,65536")
    ap.add_argument("--overlap", type=int, default=16384)
    ap.add_argument("--batch-steps", type=int, default=2_640_000)
    ap.add_argument("--min-run", type=int, default=2048)
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
    whole = cache[(0, S)][0]
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
    """One window length: the first width's windows and their seams, then the whole
    stitched_posteriors (slide, widen, merge) against the whole sequence's."""
    ov = a.overlap
    wins = seams.posterior_windows(S, W, ov, period=3)
    ext = [(ws, we) for _, _, ws, we in wins]
    per_call = max(1, a.batch_steps // W)
    cache: dict = {}
    steps = per_call * max(b - a for a, b in ext)
    _, t_w = timed(dev, lambda: seams._compute_ext(crf, terms, ext, cache, steps, "auto", None))
    print(f"\nW = {W}, overlap {ov}, {len(wins)} windows, {per_call} a call: "
          f"posterior windows {t_w:.2f} s\n")
    print("| seam | centre diff | longest agreeing run (steps) | its middle: left / right "
          "vs whole | largest posterior there |")
    print("|---|---|---|---|---|")
    n_centre = n_slide = 0
    worst = 0.0
    for b in range(len(wins) - 1):
        m = wins[b + 1][0]
        a0, a1 = ext[b + 1][0], ext[b][1]
        gl = cache[ext[b]][0][a0 - ext[b][0]:a1 - ext[b][0]]
        gr = cache[ext[b + 1]][0][:a1 - a0]
        d = (gl - gr).abs().max(-1).values.numpy()
        w = whole[a0:a1]
        dl = (gl - w).abs().max(-1).values.numpy()
        dr = (gr - w).abs().max(-1).values.numpy()
        c = m - a0
        h = (a1 - a0) // 4
        n_centre += bool(d[c - h:c + h + 1].max() <= TOL)
        L, s0 = longest_run(d <= TOL)
        mid = s0 + L // 2
        if L >= a.min_run:
            n_slide += 1
            worst = max(worst, float(dl[mid]), float(dr[mid]))
        print(f"| {lo + m:,} | {d[c]:.2g} | {L} | "
              f"{dl[mid]:.2g} / {dr[mid]:.2g} | {float(w[mid].max()):.3f} |")
    print(f"\nseams agreeing over the middle half of the overlap: {n_centre} of "
          f"{len(wins) - 1}; with a run of >= {a.min_run} agreeing steps somewhere in "
          f"the overlap: {n_slide}; the largest difference from the whole posteriors "
          f"at such a run's middle: {worst:.2g}")
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
            crf, em, W, ov, per_call, stats=st, windows_out=out, agree=a.min_run))
    finally:
        seams._compute_ext = real
    print("\n| posterior call | windows | longest (steps) | s |\n|---|---|---|---|")
    for i, (n, L, t) in enumerate(rounds):
        print(f"| {i + 1} | {n} | {L:,} | {t:.2f} |")
    diff = (g - whole).abs().amax(-1)
    at = int(diff.argmax())
    cuts = [ce for _, ce, _, _ in out[:-1]]
    near = min((abs(at - c) for c in cuts), default=-1)
    inside = [(cs, ce, ws, we) for cs, ce, ws, we in out if cs <= at < ce][0]
    print(f"\nthe largest difference from the whole ({float(diff[at]):.2g}) at step {at:,}: "
          f"{near:,} steps from the nearest cut, in the window {inside} (kept, extent)")
    print(f"\nstitched_posteriors (slide, widen, merge): {t_s:.2f} s, {len(out)} final "
          f"windows (longest {max(we - ws for _, _, ws, we in out):,} steps); "
          f"{st.posterior_line()}; largest difference from the whole sequence's "
          f"posteriors {float((g - whole).abs().max()):.2g}")
    if dev.type == "cuda":
        print(f"peak GPU memory so far {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")

if __name__ == "__main__":
    main()
