"""Session 48: ours' forward+backward at D = 128 causal 512 (B = 32, H = 16) swung 0.53-0.83 ms by round in the grid
(cuDNN 0.50-0.54) on some machines: host time exposed. Host us per forward, backward and forward+backward call (50
calls queued without a sync: the GPU queue does not fill), per dtype, and cProfile's top functions by own time
for 50 forward+backward calls."""
import torch

import flashtriton
from host_probe import host_us, profile_top

for dtype in (torch.bfloat16,):
    q, k, v = (torch.randn(32, 512, 16, 128, dtype=dtype, device="cuda", requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    fwd = lambda: flashtriton.flash_attn_func(q, k, v, causal=True)  # noqa: E731
    out = fwd()
    bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
    fb = lambda: torch.autograd.grad(fwd(), (q, k, v), dout)  # noqa: E731
    for name, f in (("fwd", fwd), ("bwd", bwd), ("fwd_bwd", fb)):
        hosts = [host_us(f, 50, warmup=5 if i == 0 else 0) for i in range(5)]
        print(f"{dtype} {name}: host us/call {' / '.join(f'{h:.0f}' for h in hosts)}", flush=True)
    profile_top(fb, 50, 22)
