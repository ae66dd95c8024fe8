"""Tile sweep (session 42) of the compiled float32 backward (cpu/native_backward.py): keys per block W
x query rows per block R, B=1 H=8 N=2048 D=64 fp32, non-causal and causal, all settings interleaved
in one process for several rounds; min / median ms of the backward alone.

    python bench/cpu/s42_bwd_compiled_sweep.py [--rounds 3]
"""
import argparse
import itertools
import statistics
import time

import torch

from flashtriton.cpu import config, fwd, native_backward
from flashtriton.launchers.prefill import AttnParams


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keys", default="48,72,96,120")
    ap.add_argument("--rows", default="128,256,512")
    a = ap.parse_args()
    lib = native_backward.load()
    torch.manual_seed(0)
    n, h, d = 2048, 8, 64
    q, k, v, dout = (torch.randn(1, n, h, d) for _ in range(4))
    settings = list(itertools.product([int(x) for x in a.keys.split(",")], [int(x) for x in a.rows.split(",")]))
    for causal in (False, True):
        params = AttnParams(d ** -0.5, -1, 0 if causal else -1)
        out, lse = fwd(q, k, v, params)
        times = {s: [] for s in settings}
        for _ in range(a.rounds + 1):
            for s in settings:
                config.BWD_C_KEYS, config.BWD_C_ROWS = s
                t0 = time.perf_counter()
                native_backward.backward(lib, dout, q, k, v, out, lse, params)
                times[s].append((time.perf_counter() - t0) * 1e3)
        print(f"causal={causal}")
        for s, t in times.items():
            t = t[1:]   # the first round warms up
            print(f"  W={s[0]:4d} R={s[1]:4d}  min {min(t):6.1f}  median {statistics.median(t):6.1f} ms")


if __name__ == "__main__":
    main()
