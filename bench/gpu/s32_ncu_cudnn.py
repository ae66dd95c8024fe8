"""Session 32: cuDNN's attention (torch SDPA, CUDNN_ATTENTION backend) under Nsight Compute, the
counterpart of bench/gpu/s27_ncu_probe.py: for each case D:N:causal, warm-up calls outside the
profiled range, then ONE forward and ONE backward inside cudaProfilerStart / Stop, so
`ncu --profile-from-start off` reports exactly those kernels. Same inputs as s27_ncu_probe.py
((B, N, H, D) bf16, B = 4, H = 16, seeded by N + D), transposed to SDPA's (B, H, N, D).

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        python bench/gpu/s32_ncu_cudnn.py 128:8192:0
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa


def one_case(d: int, n: int, causal: bool, b: int = 4, h: int = 16):
    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
               .detach().requires_grad_() for _ in range(3))
    dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(3):
            sdpa(q, k, v, is_causal=causal).backward(dout)
        torch.cuda.synchronize()
        print(f"case cuDNN D={d} N={n} causal={causal} B={b} H={h}", flush=True)
        torch.cuda.cudart().cudaProfilerStart()
        sdpa(q, k, v, is_causal=causal).backward(dout)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    for spec in sys.argv[1:] or ["128:8192:0"]:
        d, n, c = (int(x) for x in spec.split(":"))
        one_case(d, n, bool(c))
