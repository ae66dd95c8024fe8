"""Session 55: fp32 forward and forward+backward time (B = 2, H = 16, N = 2048, D = 128, causal and not) of the tree
on PYTHONPATH, for an A/B of kernels/common.qk_dot's quartered fp32 dot against the one-chain dot (run it from
both trees). Prints ms and TFLOP/s (FA2 paper count)."""
import torch, triton
from flashtriton import flash_attn_func
b, h, n, d = 2, 16, 2048, 128
for causal in (False, True):
    q, k, v = (torch.randn(b, n, h, d, device="cuda", requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    f = lambda: flash_attn_func(q, k, v, causal=causal)
    fb = lambda: torch.autograd.grad(f(), (q, k, v), dout)
    with torch.no_grad():
        tf = triton.testing.do_bench(f, warmup=50, rep=300)
    tfb = triton.testing.do_bench(fb, warmup=50, rep=300)
    fl = 4 * b * h * n * n * d / (2 if causal else 1)
    print(f"fp32 causal={causal}: fwd {tf:.3f} ms ({fl / tf * 1e-9:.2f} TFLOP/s), fwd+bwd {tfb:.3f} ms "
          f"({3.5 * fl / tfb * 1e-9:.2f} TFLOP/s)", flush=True)
