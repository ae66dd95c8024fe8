"""Session 37: where the compiled float32 forward's time goes (cpu/native_prefill.py), by ablation.

Builds copies of the kernel's C source with parts removed and times them interleaved with the real
one. The ablated builds compute wrong results: timing only, never a test. Variants: base; noexp
(vexp2 returns its argument); nomax (no horizontal row max); nosoftmax (neither, nor the row-sum
reduction); noqk (no score micro-kernel); nopv (no P V micro-kernel); none (all of those).

    PYTHONPATH=src python bench/cpu/s37_fwd_f32_ablation.py 1 8 2048 64 float32   # B H N D dtype
"""
import sys

import torch

from flashtriton.bench import cpu as bc
from flashtriton.cpu import native, native_prefill as npf

EXP = ("static inline __m512 vexp2(__m512 x) {\n", "static inline __m512 vexp2(__m512 x) {\n    return x;\n")
MAX = ("const float bm = _mm512_reduce_max_ps(mx);", "const float bm = s[0];")
SUM = ("l[r] += _mm512_reduce_add_ps(sum);", "l[r] += sum[0];")
QK = ("qk_f32((const float *)Q + g0 * DP, DP, kp + blk * D * 32, D, a->scale, S + g0 * KT + b);", ";")
PV = ("for (; c0 + 4 <= NV; c0 += 4) pv_f32(", "for (; c0 + 4 <= NV && 0; c0 += 4) pv_f32(")
VARIANTS = {"base": (), "noexp": (EXP,), "nomax": (MAX,), "nosoftmax": (EXP, MAX, SUM), "noqk": (QK,), "nopv": (PV,),
            "none": (EXP, MAX, SUM, QK, PV)}


def source(edits):
    src = npf.C_SOURCE
    for old, new in edits:
        assert src.count(old) >= 1, old
        src = src.replace(old, new, 1)
    return src


def main():
    b, h, n, d = (int(x) for x in sys.argv[1:5])
    q, k, v = (torch.randn(b, n, h, d, dtype=getattr(torch, sys.argv[5])) for _ in range(3))
    libs = {name: native.LazyLibrary(lambda s=source(e), name=name: npf._open(native._build(source=s,
                                                                                           stem="prefill_abl_" + name)))
            for name, e in VARIANTS.items()}

    def run(name):
        def f():
            npf._library = libs[name]
            return bc._ours(q, k, v)
        return f
    saved = npf._library
    try:
        ms = bc.time_interleaved({name: run(name) for name in VARIANTS}, budget_s=6.0)
    finally:
        npf._library = saved
    for name, t in ms.items():
        print(f"{name:10s} {t:8.2f} ms")


if __name__ == "__main__":
    main()
