"""Session 23: where the D = 256 backward's time goes, against FA2's and cuDNN's.

The grid has our D = 256 backward behind FA2 (SDPA FLASH_ATTENTION) at N = 512 / 1k
(non-causal 166 / 202 against 197 / 225 TFLOP/s, causal 106 / 151 against 140 / 180) and
at 0.60-0.83x cuDNN. Tried and lost: host-made descriptors (-20-60%), dK/dV as two
launches (-10-40%), a fused dQ by atomics (session 13). Per-kernel GPU time (torch
profiler, 10 calls after 3 warm-ups) of one backward: ours (delta / fused delta, dK/dV,
dQ), FA2's and cuDNN's, on the grid's shapes (16k tokens, H = 8, bf16), to see whether our
dK/dV or our dQ holds the gap, and how FA2 splits its time (its dq_accum conversion).
Prediction: our dK/dV ~65-70% of the time (session 11 at 8k: 7.78 against 2.55 ms).

    cd bench/gpu && PYTHONPATH=../../src python s23_d256_bwd_profile.py
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtriton.bench.common import attention_flops

from bwd_ab import backward_call, kernel_profile


def sdpa_backward(backend, b, h, n, d, causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    with sdpa_kernel([backend]):
        out = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=causal)
    dout = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)


def main(argv):
    flags = [a for a in argv if a.startswith("--")]
    nums = [int(a) for a in argv if not a.startswith("--")]
    d = nums[0] if nums else 256
    seqlens = nums[1:] or [512, 1024, 2048]
    for causal in ((True,) if "--causal-only" in flags else (False, True)):
        for n in seqlens:
            b, h, grad = backward_call(d, n, dict(causal=causal))
            flops = attention_flops(b, h, n, n, d, causal, "bwd")
            fns = {"ours": grad,
                   "FA2": sdpa_backward(SDPBackend.FLASH_ATTENTION, b, h, n, d, causal),
                   "cuDNN": sdpa_backward(SDPBackend.CUDNN_ATTENTION, b, h, n, d, causal)}
            for name, fn in fns.items():
                total, cells = kernel_profile(fn, width=60)
                print(f"D={d} {'causal' if causal else 'plain '} N={n:5d} {name:5s}: {total:7.0f} us "
                      f"({flops / total / 1e6:.0f} TFLOP/s of GPU time)  {cells}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
