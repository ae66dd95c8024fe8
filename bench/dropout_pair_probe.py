"""Offline sm_90a probe (session 22): what the dropout keep mask costs in SASS per element,
and what two decisions per hash would save. Three toy kernels over a 128 x 128 bf16 tile
(8 warps, a wgmma S = Q K^T, P = exp2(S), stored): no dropout; today's mask
(kernels.common.dropout_keep_scale: x = (rk ^ ck) * mk, the top 23 bits against p's, one
FFMA.SAT, one multiply); and a pair variant (columns 2m and 2m + 1 share one hash: the
even column takes x's high 16 bits, the odd one its low 16). Prints the SASS op counts.
No GPU needed.

    PYTHONPATH=src python bench/dropout_pair_probe.py

Result (Triton 3.6.0, 2026-12-01; 64 elements a thread): none 416 instructions, today 784,
pair 736. ptxas merged the pair's hashes (IMAD 54 -> 25, LEA 72 -> 38 beyond the
baseline) but the low half's extraction and the select cost LOP3s (65 -> 97): -0.75
instruction an element, ~15% of the mask's ~5. And the low 16 bits of x depend only on the
low 16 bits of rk, ck and mk, so two rows whose row keys agree there (~1 pair in 65536,
~128 pairs a head at 4096 rows) would share every odd column's decision. Not pursued.
"""

import os
import re
import subprocess
import tempfile
from collections import Counter

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from flashtriton.kernels.common import dropout_keep_scale

MODES = {"none": 0, "now": 1, "pair": 2}


@triton.jit
def probe_kernel(Q, K, RK, CK, O, mk, threshold, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr,
                 MODE: tl.constexpr):
    """P = exp2(Q K^T) of one (BM, BN) tile, masked as MODE says (0: no dropout; 1: today's
    kernels.common.dropout_keep_scale; 2: the pair variant), stored."""
    om = tl.arange(0, BM)
    on = tl.arange(0, BN)
    od = tl.arange(0, D)
    q = tl.load(Q + om[:, None] * D + od[None, :])                   # (BM, D)
    k = tl.load(K + on[:, None] * D + od[None, :])                   # (BN, D)
    p = tl.exp2(tl.dot(q, tl.trans(k)))                              # (BM, BN)
    if MODE > 0:
        rk = tl.load(RK + om).to(tl.uint32, bitcast=True)
        if MODE == 1:
            ck = tl.load(CK + on).to(tl.uint32, bitcast=True)
            p = p * dropout_keep_scale(rk[:, None], ck[None, :], mk.to(tl.uint32), threshold.to(tl.uint32))
        else:
            # columns 2m, 2m + 1 share one hash: the even one takes its high 16 bits, the odd one its low 16
            ck = tl.load(CK + on // 2).to(tl.uint32, bitcast=True)
            x = (rk[:, None] ^ ck[None, :]) * mk.to(tl.uint32)
            bits = tl.where((on % 2)[None, :] == 1, x & 0xFFFF, x >> 16)
            u = (bits | 0x3F800000).to(tl.float32, bitcast=True)
            c = ((threshold.to(tl.uint32) >> 16) | 0x3F800000).to(tl.float32, bitcast=True) * 8388608.0 - 1.0
            p = p * tl.minimum(tl.maximum(u * 8388608.0 - c, 0.0), 1.0)
    tl.store(O + om[:, None] * BN + on[None, :], p)


NV = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def sass_counts(mode: int) -> Counter:
    """SASS op counts of probe_kernel compiled for sm_90a (8 warps, 128 x 128, D = 64)."""
    fn = probe_kernel
    sig = {"Q": "*bf16", "K": "*bf16", "RK": "*i32", "CK": "*i32", "O": "*fp32", "mk": "i32", "threshold": "i32",
           "BM": "constexpr", "BN": "constexpr", "D": "constexpr", "MODE": "constexpr"}
    const = {"BM": 128, "BN": 128, "D": 64, "MODE": mode}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in const.items()})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=8))
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/k.cubin", "wb") as f:
            f.write(compiled.asm["cubin"])
        out = subprocess.run([f"{NV}/cuobjdump", "-sass", f"{d}/k.cubin"], capture_output=True, text=True).stdout
    ops = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+(?:@!?P\d\s+)?([A-Z0-9_]+)", out, re.M)
    return Counter(o.split(".")[0] for o in ops)


def main():
    res = {name: sass_counts(mode) for name, mode in MODES.items()}
    keys = sorted(set().union(*res.values()), key=lambda k: -res["now"].get(k, 0))
    print("op        none   now  pair")
    for k in keys:
        print(f"{k:8s} " + " ".join(f"{res[n].get(k, 0):5d}" for n in MODES))
    print("total", {n: sum(v.values()) for n, v in res.items()})


if __name__ == "__main__":
    main()
