"""Session 36: the compiled bf16 decode with vdpbf16ps (the default AVX-512 build) against its
FT_NO_DPBF16 build (bf16 K / V widened to float32 in registers, FMAs: the path CPUs without
AVX512-BF16 run), on a CPU whose bf16 dot products run at half the FMA's FLOP rate (session 36's VM).
Interleaved, median of 7 rounds, B=1 Hq=32 Hk=8 D=128, L = 8k / 32k, flash_attn_with_kvcache on the
CPU backend; outputs compared.

    PYTHONPATH=src python bench/cpu/s36_decode_nodpbf16_ab.py      # ~1 min; nothing else running

PREDICTION (before the run): the bf16 decode reads 15.6 GB/s at 8k against 21.4 for fp32 (whose cache
is twice the bytes) and the 22.4 GB/s measured, so it is compute-bound here; with FMAs at twice
vdpbf16ps's FLOP rate (plus one shift a widened vector): 1.2-1.4x faster at 8k, toward the fp32 rate.
"""
import statistics
import time

import torch

import flashtriton
from flashtriton.cpu import native


def main():
    libs = {"dpbf16": native.load(), "fma": native.load_variant("FT_NO_DPBF16")}
    print("ft_dpbf16:", {k: v.ft_dpbf16() for k, v in libs.items()}, flush=True)
    for seqlen in (8192, 32768):
        torch.manual_seed(0)
        q = torch.randn(1, 1, 32, 128, dtype=torch.bfloat16)
        kc, vc = (torch.randn(1, seqlen, 8, 128, dtype=torch.bfloat16) for _ in range(2))
        res, outs = {k: [] for k in libs}, {}
        for _ in range(7):
            for name, lib in libs.items():
                native._library.lib = lib              # (LazyLibrary's cached object)
                with flashtriton.use_backend("cpu"):
                    flashtriton.flash_attn_with_kvcache(q, kc, vc)
                    t0 = time.perf_counter()
                    for _ in range(5):
                        outs[name] = flashtriton.flash_attn_with_kvcache(q, kc, vc)
                    res[name].append((time.perf_counter() - t0) / 5 * 1e3)
        diff = (outs["dpbf16"].float() - outs["fma"].float()).abs().max().item()
        med = {k: statistics.median(v) for k, v in res.items()}
        print(f"L={seqlen}: " + ", ".join(f"{k} {m:.2f} ms ({4 * seqlen * 8 * 128 / m / 1e6:.1f} GB/s)"
                                          for k, m in med.items()) + f"; fma / dpbf16 {med['fma'] / med['dpbf16']:.3f}x;"
              f" max |diff| {diff:.1e}", flush=True)
    native._library.lib = libs["dpbf16"]


if __name__ == "__main__":
    main()
