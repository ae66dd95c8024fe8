"""Session 48: ours' forward host time at D = 128 causal 512 (B = 32, H = 16) read 56 us a call in bf16 and 95 us in
fp16 (s48_bimodal_probe.py). Host us per call with and without requires_grad, and cProfile's top functions by own
time for 300 calls, per dtype: which part of the host path depends on the dtype."""
import torch

import flashtriton
from host_probe import host_us, profile_top

for dtype in (torch.bfloat16, torch.float16):
    for grad in (False, True):
        q, k, v = (torch.randn(32, 512, 16, 128, dtype=dtype, device="cuda", requires_grad=grad) for _ in range(3))
        f = lambda: flashtriton.flash_attn_func(q, k, v, causal=True)  # noqa: E731
        print(f"== {dtype} requires_grad={grad}: host {host_us(f, 300):.1f} us/call")
        if not grad:
            profile_top(f, 300, 14)
