"""Session 46: what the bench's decode row paid for entering use_backend("cpu") and value_checks(False) inside
every timed call. Two forms of the bench call (bench/cpu.py's decode case, bf16 L = 8k by default), each right after
an SDPA call on the same inputs, rotated each round, in one process: "inside" (the context managers entered per call,
the bench up to session 45) and "outside" (entered once around the loop, the bench from session 46). Prints min /
median ms and the median of the per-round ratios outside / inside.

    PYTHONPATH=src python bench/cpu/s46_decode_ctx_ab.py [--rounds 25] [--L 8192] [--dtype bf16]
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s42_decode_ab as ab  # noqa: E402
import flashtriton  # noqa: E402
from flashtriton import kvcache  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--L", type=int, default=8192)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    a = ap.parse_args()
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    q = torch.randn(1, 1, 32, 128, dtype=dt)
    kc, vc = torch.randn(1, a.L, 8, 128, dtype=dt), torch.randn(1, a.L, 8, 128, dtype=dt)
    lens = torch.full((1,), a.L, dtype=torch.int32)

    def call():
        return flashtriton.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens)

    def inside():
        with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
            return call()

    def sdpa():
        F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True)

    forms = {"inside": inside, "outside": call}
    times = {k: [] for k in forms}
    with flashtriton.use_backend("cpu"), kvcache.value_checks(False):
        assert torch.equal(inside(), call())
        for r in range(a.rounds):
            ab.wait_quiet()
            names = list(forms)[r % 2:] + list(forms)[:r % 2]
            for name in names:
                sdpa()
                t0 = time.perf_counter()
                forms[name]()
                times[name].append((time.perf_counter() - t0) * 1e3)
    ratio = statistics.median(o / i for o, i in zip(times["outside"], times["inside"]))
    print(f"{dt} L={a.L // 1024}k after sdpa, {a.rounds} rounds")
    for name, xs in times.items():
        print(f"  {name:8s} min {min(xs):.3f} med {statistics.median(xs):.3f} ms")
    print(f"  outside / inside, median of the per-round ratios: {ratio:.3f}")


if __name__ == "__main__":
    main()
