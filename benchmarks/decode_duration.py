"""The posterior decode's K: the gene model's Viterbi over posteriors with the model's K
against the shorter K' = FrameLayout.chain_duration(K) it now runs with (issue 13).

    PYTHONPATH=. python benchmarks/decode_duration.py [--shapes 132x20000] [--device cuda]

For each (B, T): B windows of T bp of chrII (data/yeast), the shipped model's CRF terms
and internal-label posteriors (one posterior pass, not timed), then the posterior decode
(`semiseg.crf.viterbi` over the posteriors with the structure masks as transitions and
durations, as FrameHead._decode_posteriors runs it) timed with the duration mask of each
K in one run: the model's K, chain_duration(K), and any --also. Wall clock with the device
synchronised, median of --reps after a warm-up. Checks in the same run: per-base internal
labels equal to the model's K's, and the score's largest difference. Prints a table and
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
from gene_decode_profile import gene_model, timed, window_terms
from results import append

from semiseg.crf import viterbi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="132x20000")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--also", default="", help="more K to time, comma-separated (probes)")
    ap.add_argument("--model", default=os.path.join(os.path.dirname(HERE), "semiseg",
                                                    "models", "yeast_cds_frames.pt"))
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()
    dev = torch.device(a.device)
    ann, L = gene_model(a.model, dev)
    crf = ann.model.crf
    K = crf.max_duration
    ks = [K, crf.layout.chain_duration(K)] + [int(k) for k in a.also.split(",") if k]
    name = torch.cuda.get_device_name() if dev.type == "cuda" else f"CPU ({os.cpu_count()} cores)"
    lines = ["| B, T | decode K | Viterbi ms | labels equal to K's | score max diff |",
             "|---|---|---|---|---|"]
    print(f"{name}, torch {torch.__version__}")
    print("\n".join(lines), flush=True)
    for B, T, lengths, t in window_terms(ann, L, a.shapes, dev):
        post = crf._posteriors(t, "auto").detach()
        ref = None
        for k in ks:
            dmask = torch.as_tensor(crf.layout.duration_mask(k), dtype=torch.float32,
                                    device=dev)

            def run(dmask=dmask, post=post, lengths=lengths, t=t):
                with torch.no_grad():
                    return viterbi(post, crf.tmask, dmask, lengths, allowed=t["allowed"],
                                   proj_start=t["proj_start"])

            run()  # warm-up (compilation)
            seg, sec = timed(run, dev, a.reps)
            if ref is None:
                ref, same, dz = seg, "-", "-"
            else:
                same = str(torch.equal(seg.labels, ref.labels))
                dz = f"{(seg.score.double() - ref.score.double()).abs().max().item():.2e}"
            line = f"| {B}, {T} | {k} | {sec * 1e3:.1f} | {same} | {dz} |"
            lines.append(line)
            print(line, flush=True)
    if a.no_record:
        return
    append(f"The posterior decode's K (issue 13) - {datetime.date.today()}, {name}, torch "
           f"{torch.__version__}", f"`PYTHONPATH=. python benchmarks/decode_duration.py "
           f"--shapes {a.shapes} --device {a.device}{' --also ' + a.also if a.also else ''}`"
           f" (ms, median of {a.reps}):", lines)

if __name__ == "__main__":
    main()
