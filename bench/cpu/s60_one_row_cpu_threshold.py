"""Session 60: the CPU backend's one-row route (cpu/config.ONE_ROW_DECODE) on / off by key count: flash_attn_func
with Nq = 1, B = 1, Hq = 32, Hk = 8, D = 128, bf16 and fp32, Nk 128-8k; median ms of 15 calls after 3 warm-ups,
the two arms alternated over three rounds. Usage: PYTHONPATH=src python bench/cpu/s60_one_row_cpu_threshold.py"""
import os
import statistics
import sys

import torch

import flashtriton
from flashtriton.cpu import config

sys.path.insert(0, os.path.dirname(__file__))
from s60_one_row_cpu import timed  # noqa: E402


NKS = [int(x) for x in sys.argv[1:]] or [128, 512, 1024, 2048, 8192]


def main():
    torch.manual_seed(0)
    config.ONE_ROW_DECODE_MIN_NK = 1
    print(torch.__version__, torch.get_num_threads(), "threads", flush=True)
    for dtype in (torch.bfloat16, torch.float32):
        for n in NKS:
            q = torch.randn(1, 1, 32, 128, dtype=dtype)
            k = torch.randn(1, n, 8, 128, dtype=dtype)
            v = torch.randn_like(k)
            res = {True: [], False: []}
            for rnd in range(3):
                for on in ((True, False) if rnd % 2 == 0 else (False, True)):
                    config.ONE_ROW_DECODE = on
                    res[on].append(timed(lambda: flashtriton.flash_attn_func(q, k, v, causal=True)))
            on, off = statistics.median(res[True]), statistics.median(res[False])
            print(f"{str(dtype)[6:]:8s} Nk={n:5d}: decode route {on:7.3f} ms, prefill route {off:7.3f} ms, "
                  f"on/off {on / off:.2f}", flush=True)
    config.ONE_ROW_DECODE = True


if __name__ == "__main__":
    main()
