"""Session 7: the window (1024, 0) forward measured 0.345 ms on main (session 6) and 0.570
on the wip/next-gpu branch, whose fwd.py compiles to the same TTGIR for that call. Time
both trees' forward in one process order-swapped: PYTHONPATH picks the tree."""
import sys

import torch
from triton.testing import do_bench

import flashtriton

print(flashtriton.__file__)
torch.manual_seed(0)
q, k, v = (torch.randn(1, 16384, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
for rg in (True, False):
    qq, kk, vv = (t if rg else t.detach() for t in (q, k, v))
    for ws in ((1024, 0), (-1, 0)):
        f = lambda: flashtriton.flash_attn_func(qq, kk, vv, window_size=ws)  # noqa: E731
        ms = [do_bench(f, warmup=25, rep=200, return_mode="median") for _ in range(3)]
        print(f"{sys.argv[1]} requires_grad={rg} window={ws}: " + " / ".join(f"{m:.3f}" for m in ms) + " ms")
