"""Session 4: where the host time of an eager decode step and an eager small prefill
forward goes on the GPU machine's CPU (cProfile, cumulative, top entries)."""
import cProfile
import pstats
import time

import torch

import flashtriton
from flashtriton.bench import decode as D


def per_call_us(fn, n=200):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def main():
    inp = D.make_inputs(1, 8192, "cuda")
    dec = lambda: D.ours(inp)  # noqa: E731
    q, k, v = (torch.randn(1, 512, 16, 128, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    pre = lambda: flashtriton.flash_attn_func(q, k, v, causal=True)  # noqa: E731
    for name, fn in (("decode B=1 L=8k", dec), ("prefill fwd N=512", pre)):
        print(f"{name}: {per_call_us(fn):.1f} us per back-to-back eager call", flush=True)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(200):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(14)


if __name__ == "__main__":
    main()
