"""Where a non-finite gradient enters fly training (found with it: the periodic backward's
residue sums against the max over every residue, fixed 2026-11-28; tests/test_kernels.py
`test_periodic_residues_far_apart_against_bruteforce`).

    python benchmarks/nan_probe.py SEED OUTDIR [KEY=VALUE ...]

Trains one epoch of the fly config (benchmarks/fly_gene_gpu.sh's split) at batch 32, lr
0.004, 2 warm-up epochs (the run that stopped with `scores: contains NaN`; KEY=VALUE
overrides more). The trainer itself now stops at a non-finite gradient and names the
parameters (train/nonfinite.py); this adds, at the first CRF call whose duration-bias
gradient is not finite, the batch's shape, which of its sequences gives it alone (B =
1), whether trimming that sequence to its length or forcing the rows or wave backward
changes it, and that sequence's CRF inputs in OUTDIR/bad.pt (for a CPU reproduction).
Prints "no non-finite gradient in epoch 1" otherwise.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from semiseg.config.load import load_config  # noqa: E402
from semiseg.crf import log_partition  # noqa: E402
from semiseg.genemodel import head as headmod  # noqa: E402
from semiseg.train import loop  # noqa: E402

FLY = ["inputs.fasta=../data/fly/chr2R_2M_6M.fa",
       "labels.annotation=../data/fly/chr2R_2M_6M.gff3", "windows.chroms=null",
       "windows.holdout=[chr2R_2M_6M:3000000-4000000]", "windows.valid_offset=0.6375",
       "windows.valid_fraction=0.1125", "train.batch_size=32", "train.lr=0.004",
       "train.warmup_epochs=2", "train.epochs=1"]


class Found(Exception):
    pass


def finite(t) -> bool:
    return bool(torch.isfinite(t).all())


def cut(kw: dict, idx: list[int], B: int, length: int | None = None) -> dict:
    """The per-sequence CRF inputs of sequences idx (and their first `length` steps)."""
    out = {}
    for k, v in kw.items():
        if torch.is_tensor(v) and k not in ("start", "end") and v.shape[0] == B:
            v = v[idx]
            if length is not None and v.dim() >= 2:
                v = v[:, :length]
            if k == "lengths" and length is not None:
                v = v.clamp(max=length)
        out[k] = v.detach() if torch.is_tensor(v) else v
    return out


def db_finite(sc, tr, db, kw, tuning=None) -> bool:
    """Whether the duration-bias gradient of this call is finite (a fresh graph)."""
    from semiseg.crf import triton as tri

    old = tri.DEFAULT
    tri.DEFAULT = tuning or old
    try:
        with torch.enable_grad():
            d = db.detach().clone().requires_grad_(True)
            log_partition(sc.detach(), tr.detach(), d, **kw).sum().backward()
        return finite(d.grad)
    finally:
        tri.DEFAULT = old


def report(sc, tr, db, kw, outdir: str, call: int) -> None:
    from semiseg.crf import triton as tri

    B, T = sc.shape[:2]
    L = kw.get("lengths")
    lens = [int(v) for v in L] if L is not None else [T] * B
    print(f"call {call}: duration-bias gradient not finite; B = {B}, T = {T}, lengths "
          f"{sorted(set(lens))}", flush=True)
    bad = [b for b in range(B) if not db_finite(sc[[b]], tr, db, cut(kw, [b], B))]
    print(f"  alone (B = 1): not finite for sequences {bad}, lengths "
          f"{[lens[b] for b in bad]}", flush=True)
    for b in bad[:1]:
        one = cut(kw, [b], B, lens[b])
        s1 = sc[[b], :lens[b]]
        rows = db_finite(s1, tr, db, one, dataclasses.replace(tri.DEFAULT, full_rows=True))
        wave = db_finite(s1, tr, db, one, dataclasses.replace(tri.DEFAULT, full_rows=False))
        print(f"  sequence {b} trimmed to its length: finite {db_finite(s1, tr, db, one)}; "
              f"rows forced {rows}; wave forced {wave}", flush=True)
        torch.save({"scores": s1.detach().cpu(), "transition": tr.detach().cpu(),
                    "duration_bias": db.detach().cpu(),
                    **{k: (v.cpu() if torch.is_tensor(v) else v) for k, v in one.items()}},
                   os.path.join(outdir, "bad.pt"))


def main():
    seed, outdir, extra = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    os.makedirs(outdir, exist_ok=True)
    real, seen, calls = headmod.log_partition, {}, [0]

    def probe(sc, tr, db, backend="auto", **kw):
        calls[0] += 1
        if not finite(sc) and "model" in seen:
            badp = [n for n, p in seen["model"].named_parameters() if not finite(p)]
            print(f"call {calls[0]}: scores not finite; non-finite parameters {badp[:8]}",
                  flush=True)
        z = real(sc, tr, db, backend=backend, **kw)
        n = calls[0]

        def hook(g):
            if not finite(g):
                report(sc, tr, db, kw, outdir, n)
                raise Found(f"stopped at call {n}")
            return g

        if db.requires_grad:
            db.register_hook(hook)
        return z

    real_init = loop.BatchLoss.__init__

    def init(self, model, *a, **k):
        seen["model"] = model
        real_init(self, model, *a, **k)

    headmod.log_partition = probe
    loop.BatchLoss.__init__ = init
    cfg = load_config("configs/gene_structure.yaml", FLY + [f"train.seed={seed}"] + extra)
    try:
        loop.train(cfg, os.path.join(outdir, "run"), overwrite=True)
        print("no non-finite gradient in epoch 1")
    except Exception as e:  # the hook's Found, possibly wrapped by autograd
        print(type(e).__name__, e)


if __name__ == "__main__":
    main()
