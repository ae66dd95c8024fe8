"""Session 37: the CPU decode (B=1 Hq=32 Hk=8 D=128) warm (cache in L3 from the previous call), cold
(a 256 MB write between calls) and interleaved with SDPA as the bench times it, with the read bandwidth.

    PYTHONPATH=src python bench/cpu/s37_decode_warm_cold.py float32
"""
import statistics
import sys
import time

import torch

import flashtriton
from flashtriton import kvcache
from flashtriton.bench import cpu as bc


def median_ms(f, reps, before=None):
    ts = []
    for _ in range(reps):
        if before:
            before()
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main():
    dt = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "float32")
    big = torch.empty(64 * 2 ** 20)
    for seqlen in (8192, 32768):
        q = torch.randn(1, 1, 32, 128, dtype=dt)
        kc, vc = (torch.randn(1, seqlen, 8, 128, dtype=dt) for _ in range(2))
        lens = torch.full((1,), seqlen, dtype=torch.int32)

        def ours():
            with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
                return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)
        ours()
        nbytes = 2 * seqlen * 8 * 128 * kc.element_size()
        warm, cold = median_ms(ours, 15), median_ms(ours, 8, lambda: big.add_(1.0))
        ms = bc.time_interleaved({"ours": ours, "sdpa": lambda: bc._sdpa(q, kc, vc, gqa=True)})
        print(f"L={seqlen}: warm {warm:.2f} ms ({nbytes / warm / 1e6:.1f} GB/s), cold {cold:.2f} ms "
              f"({nbytes / cold / 1e6:.1f} GB/s); interleaved ours {ms['ours']:.2f} ms, SDPA {ms['sdpa']:.2f} ms "
              f"({ms['sdpa'] / ms['ours']:.2f}x)")
    print(f"read bandwidth {bc.read_bandwidth():.1f} GB/s")


if __name__ == "__main__":
    main()
