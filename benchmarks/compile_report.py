"""Registers and stack (spills) of the Triton chain kernels, compiled for a GPU on a machine
without one: triton's compiler and its bundled ptxas and cuobjdump, no device time.

    python benchmarks/compile_report.py [--kp 256] [--cp 64] [--warps N] [--sm 90]
        [--kernels static,periodic]

Prints one line per kernel and mode: `REG:n STACK:bytes ...` as cuobjdump -res-usage gives
it. A STACK of more than a few hundred bytes is spilled ring state: every step then moves
it through local memory. (KP, CP) = (256, 64) is the 1-bp gene model (K = 256, 37 labels
padded to 64). The register budget at 16 warps is 128 per thread; the ring alone takes
KP * CP / (32 * warps) of them.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from semiseg.crf import kernels as kn
from semiseg.crf.kernels import chain, split_end, tiled

I32 = {"T", "C", "K", "P", "NCK", "seg0"}
F64 = {"ck_n", "mid_n", "rows_n", "out_n", "fin_n", "rk_n", "log_z", "f_n", "r_n"}


def _signature(fn, consts: dict) -> dict:
    """Argument types; constexpr parameters not in `consts` get their defaults there."""
    sig = {}
    for p, par in inspect.signature(fn.fn).parameters.items():
        if p not in consts and "constexpr" in str(par.annotation):
            consts[p] = par.default
        if p in consts:
            sig[p] = "constexpr"
        elif p in I32:
            sig[p] = "i32"
        elif p in F64:
            sig[p] = "*fp64"
        elif p == "lengths":
            sig[p] = "*i64"
        elif p == "allowed":
            sig[p] = "*u8"
        elif p in ("bp_d", "bp_c"):
            sig[p] = "*i16"
        elif p in ("mid_bd", "mid_bc", "bar"):
            sig[p] = "*i32"
        elif p == "xch" and consts.get("TAG"):
            sig[p] = "*i64"
        else:
            sig[p] = "*fp32"
    return sig


def usage(fn, consts: dict, warps: int, sm: int) -> str:
    sig = _signature(fn, consts)  # adds the constexpr defaults to consts
    src = ASTSource(fn, sig, constexprs=dict(consts))
    k = triton.compile(src, target=GPUTarget("cuda", sm, 32), options={"num_warps": warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
        fh.write(k.asm["cubin"])
    tool = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")
    out = subprocess.run([tool, "-res-usage", fh.name], capture_output=True, text=True,
                         check=False).stdout
    os.unlink(fh.name)
    m = re.search(r"REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+", out)
    return m.group(0) if m else out.strip()[-200:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kp", type=int, default=256)
    ap.add_argument("--cp", type=int, default=64)
    ap.add_argument("--warps", type=int, default=None,
                    help="warps per program (default: what the kernels pick for the shape)")
    ap.add_argument("--sm", type=int, default=90)
    ap.add_argument("--kernels", default="static,periodic",
                    help="static, periodic, tiled (the end-indexed chain, ring in global memory)")
    ap.add_argument("--tile", type=int, default=32, help="slots per tile of the tiled kernel")
    a = ap.parse_args()
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    warps = a.warps or kn._warps(a.kp, a.cp)
    flags = {"KP": a.kp, "CP": a.cp, "HAS_ALLOWED": True, "HAS_PS": False, "HAS_PE": False}
    fwd = {"LEAVE_OUT": 0, "WRITE_ROWS": False, "GAMMA_ROWS": kn._gamma_rows(a.cp)}
    runs = []
    if "static" in a.kernels:
        st = dict(flags, NP=1, NPP=1)
        runs += [("static forward", chain._fwd_kernel, dict(st, **fwd, MODE=0, PHASE=0, REV=False)),
                 ("static Viterbi half", chain._fwd_kernel, dict(st, **fwd, MODE=2, PHASE=0, REV=False)),
                 ("static backward, rows", chain._bwd_kernel, dict(st, REV=False, ROWS_FULL=True, END=False)),
                 ("static backward, wave", chain._bwd_kernel, dict(st, REV=False, ROWS_FULL=False, END=False)),
                 ("static backward, rows, duration sum in memory", chain._bwd_kernel,
                  dict(st, REV=False, ROWS_FULL=True, END=False, DB_GLOBAL=True)),
                 ("static backward, rows, posteriors", chain._bwd_kernel,
                  dict(st, REV=False, ROWS_FULL=True, END=False, PARAM_GRADS=False))]
        ct = max(1, min(a.kp, kn.CHAIN_TILE_ELEMS // a.cp))
        runs += [(f"static forward, ring in tiles of {ct}", chain._fwd_kernel,
                  dict(st, **fwd, MODE=0, PHASE=0, REV=False, TILE=ct)),
                 (f"static Viterbi half, ring in tiles of {ct}", chain._fwd_kernel,
                  dict(st, **fwd, MODE=2, PHASE=0, REV=False, TILE=ct)),
                 (f"static forward split over 8 programs, tiles of {min(ct, a.kp // 8)}",
                  chain._fwd_kernel, dict(st, **fwd, MODE=0, PHASE=0, REV=False,
                                          TILE=min(ct, a.kp // 8), SPLIT=8))]
        bt = max(1, min(a.kp, kn.BWD_TILE_ELEMS // a.cp))
        runs += [(f"static backward, rows, ring in tiles of {bt}", chain._bwd_kernel,
                  dict(st, REV=False, ROWS_FULL=True, END=False, DB_GLOBAL=True, TILE=bt)),
                 (f"static backward, REV rows, ring in tiles of {bt}", chain._bwd_kernel,
                  dict(st, REV=True, ROWS_FULL=True, END=False, DB_GLOBAL=True, TILE=bt)),
                 (f"static backward, posteriors, ring in tiles of {bt}", chain._bwd_kernel,
                  dict(st, REV=False, ROWS_FULL=True, END=False, PARAM_GRADS=False, TILE=bt))]
    if "periodic" in a.kernels:
        pe = dict(flags, NP=3, NPP=kn._pow2(3))
        runs += [("periodic forward (end-indexed)", chain._fwd_end_kernel, dict(pe, MODE=0, PHASE=0)),
                 ("periodic Viterbi half (end-indexed)", chain._fwd_end_kernel, dict(pe, MODE=2, PHASE=0)),
                 ("periodic forward (end-indexed), split 3 ways", split_end._fwd_end_split_kernel,
                  dict(pe, MODE=0, PHASE=0, KQ=kn._pow2(-(-a.kp // 3)))),
                 ("periodic forward (end-indexed), split, rows", split_end._fwd_end_split_kernel,
                  dict(pe, MODE=0, PHASE=1, WRITE_ROWS=True, KQ=kn._pow2(-(-a.kp // 3)))),
                 ("periodic reversed chain", chain._fwd_kernel, dict(pe, **fwd, MODE=0, PHASE=0, REV=True)),
                 ("periodic reversed chain, residue planes", chain._fwd_kernel,
                  dict(pe, **fwd, MODE=0, PHASE=0, REV=True, KQ=kn._pow2(-(-a.kp // 3)))),
                 ("periodic reversed chain, planes split 3 ways", chain._fwd_kernel,
                  dict(pe, **fwd, MODE=0, PHASE=0, REV=True, KQ=kn._pow2(-(-a.kp // 3)), SPLIT=3)),
                 ("periodic reversed chain, split, gamma parts", chain._fwd_kernel,
                  dict(pe, **fwd, MODE=0, PHASE=0, REV=True, KQ=kn._pow2(-(-a.kp // 3)), SPLIT=3,
                       PARTG=1)),
                 ("periodic reversed chain, split, parts, tagged (rule)", chain._fwd_kernel,
                  dict(pe, **fwd, MODE=0, PHASE=0, REV=True, KQ=kn._pow2(-(-a.kp // 3)), SPLIT=3,
                       PARTG=1, LAZY=1, XT=1, TAG=1, PREFETCH=1)),
                 ("periodic forward (end-indexed), split, tagged (rule)",
                  split_end._fwd_end_split_kernel,
                  dict(pe, MODE=0, PHASE=0, KQ=kn._pow2(-(-a.kp // 3)), TAG=1, PREFETCH=1)),
                 ("periodic reversed Viterbi half", chain._fwd_kernel, dict(pe, **fwd, MODE=2, PHASE=0, REV=True)),
                 ("periodic backward (wave)", chain._bwd_kernel, dict(pe, REV=False, ROWS_FULL=False, END=True)),
                 ("periodic backward (wave), duration sum in memory", chain._bwd_kernel,
                  dict(pe, REV=False, ROWS_FULL=False, END=True, DB_GLOBAL=True)),
                 ("periodic backward (wave), posteriors", chain._bwd_kernel,
                  dict(pe, REV=False, ROWS_FULL=False, END=True, PARAM_GRADS=False))]
    if "tiled" in a.kernels:
        pe = dict(flags, NP=3, NPP=kn._pow2(3), TILE=min(a.tile, a.kp))
        runs += [(f"tiled forward (end-indexed, {a.tile})", tiled._fwd_end_tiled_kernel,
                  dict(pe, MODE=0, PHASE=0)),
                 (f"tiled Viterbi half (end-indexed, {a.tile})", tiled._fwd_end_tiled_kernel,
                  dict(pe, MODE=2, PHASE=0)),
                 (f"tiled recompute (end-indexed, {a.tile})", tiled._fwd_end_tiled_kernel,
                  dict(pe, MODE=1, PHASE=0))]
    print(f"sm_{a.sm}, KP {a.kp}, CP {a.cp}, {warps} warps, triton {triton.__version__}")
    for name, fn, consts in runs:
        print(f"{name:40s} {usage(fn, consts, warps, a.sm)}", flush=True)


if __name__ == "__main__":
    main()
