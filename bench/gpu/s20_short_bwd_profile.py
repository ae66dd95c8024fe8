"""Session 20: where a short backward's time goes, ours against FA2 CUDA and cuDNN
(torch.profiler, us of GPU time a backward by kernel, 10 backwards after 3 warm-ups; the
same inputs; bf16, 16k tokens, hidden 2048 as the grid). For the next session's choice
between the short causal backward's levers (the preprocess fused into dQ; the split
path; tiles), not a change by itself.

Cases: D = 128 causal 512 / 1k, D = 128 non-causal 512, D = 64 causal 1k.

    PYTHONPATH=src python bench/gpu/s20_short_bwd_profile.py
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashtriton
from bwd_ab import kernel_profile


def main():
    for d, n, causal in [(128, 512, True), (128, 1024, True), (128, 512, False), (64, 1024, True)]:
        b, h = 16384 // n, 2048 // d
        torch.manual_seed(0)
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        dout = torch.randn_like(out)
        total, cells = kernel_profile(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
        print(f"D={d} N={n} causal={causal} flashtriton backward {total:.0f} us: {cells}", flush=True)
        qt, kt, vt = (x.detach().transpose(1, 2).contiguous().requires_grad_() for x in (q, k, v))
        for name, backend in (("FA2", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
            with sdpa_kernel(backend):
                o2 = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                d2 = dout.transpose(1, 2).contiguous()
                total, cells = kernel_profile(lambda: torch.autograd.grad(o2, (qt, kt, vt), d2, retain_graph=True))
            print(f"D={d} N={n} causal={causal} {name} backward {total:.0f} us: {cells}", flush=True)


if __name__ == "__main__":
    main()
