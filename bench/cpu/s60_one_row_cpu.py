"""Session 60: the CPU backend's one-row calls - flash_attn_func / flash_attn_varlen_func with Nq = 1 (a generation
loop that does not use the KV-cache API) against flash_attn_with_kvcache on the same K / V (the issue-6 decode shape:
B = 1, Hq = 32, Hk = 8, D = 128, L = 8k / 32k, bf16 and fp32). Median of 15 calls after 3 warm-ups, ms; outputs
compared. Usage: PYTHONPATH=src python bench/cpu/s60_one_row_cpu.py"""
import statistics
import time

import torch

import flashtriton


def timed(fn, n=15):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    torch.manual_seed(0)
    print(torch.__version__, torch.get_num_threads(), "threads", flush=True)
    for dtype in (torch.bfloat16, torch.float32):
        for n in (8192, 32768):
            q = torch.randn(1, 1, 32, 128, dtype=dtype)
            k = torch.randn(1, n, 8, 128, dtype=dtype)
            v = torch.randn_like(k)
            cu_q = torch.tensor([0, 1], dtype=torch.int32)
            cu_k = torch.tensor([0, n], dtype=torch.int32)
            calls = {
                "func": lambda: flashtriton.flash_attn_func(q, k, v, causal=True),
                "varlen": lambda: flashtriton.flash_attn_varlen_func(q[0], k[0], v[0], cu_q, cu_k, 1, n, causal=True),
                "kvcache": lambda: flashtriton.flash_attn_with_kvcache(q, k, v, causal=True),
            }
            ref = calls["kvcache"]().float()
            line = []
            for name, fn in calls.items():
                d = (fn().float().reshape(ref.shape) - ref).abs().max().item()
                line.append(f"{name} {timed(fn):8.2f} ms (max|d| {d:.1e})")
            print(f"{str(dtype)[6:]:8s} L={n:5d}: " + "; ".join(line), flush=True)


if __name__ == "__main__":
    main()
