"""Probe (session 54): the cost of allocating the decode's output (1, 1, 32, 128) bf16 right after an SDPA call
(cold caches), four ways, 15 rounds, median / min us. Session 54: torch.empty(shape, dtype=, device=) 52-61 us,
torch.empty_like 23-26, empty_like(memory_format=contiguous) 30, q.new_empty 56-60.

    python bench/cpu/s54_cold_alloc_probe.py
"""
import time, statistics, torch, torch.nn.functional as F
q = torch.randn(1, 1, 32, 128, dtype=torch.bfloat16)
k = torch.randn(1, 8192, 8, 128, dtype=torch.bfloat16); v = torch.randn_like(k)
sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True)
shape, dt, dev = q.shape, q.dtype, q.device
fns = {"empty": lambda: torch.empty(shape, dtype=dt, device=dev), "empty_like": lambda: torch.empty_like(q),
       "new_empty": lambda: q.new_empty(shape), "like_contig": lambda: torch.empty_like(q, memory_format=torch.contiguous_format), "empty_nodev": lambda: torch.empty(shape, dtype=dt)}
t = {n: [] for n in fns}
for r in range(15):
    for n, f in fns.items():
        sdpa(); t0 = time.perf_counter(); f(); t[n].append((time.perf_counter() - t0) * 1e6)
for n in fns: print(n, round(statistics.median(t[n]), 1), round(min(t[n]), 1))
