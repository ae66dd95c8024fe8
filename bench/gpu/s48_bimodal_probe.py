"""Session 48: ours' forward at fp16 D = 128 causal 512 (B = 32, H = 16) read 0.122 or 0.17-0.24 ms by round in the
rotated grid (bf16: 0.119 every round; the CUDA-graph replay 0.125). Is it host time or GPU time, and does it need the
other providers in between? Per dtype: (a) host us per call, 200 calls without sync; (b) do_bench median, ten times
back to back, ours alone; (c) ten times with one cuDNN call timed between; (d) the kernel under a CUDA graph."""
import torch
import torch.nn.functional as F
from triton.testing import do_bench

import flashtriton
from torch.nn.attention import SDPBackend, sdpa_kernel

from host_probe import host_us

for dtype in (torch.bfloat16, torch.float16):
    q, k, v = (torch.randn(32, 512, 16, 128, dtype=dtype, device="cuda") for _ in range(3))
    f = lambda: flashtriton.flash_attn_func(q, k, v, causal=True)  # noqa: E731

    def cudnn():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True)
    host = host_us(f, 200, warmup=5)
    alone = [do_bench(f, warmup=25, rep=100, return_mode="median") for _ in range(10)]
    mixed = []
    for _ in range(10):
        do_bench(cudnn, warmup=25, rep=100, return_mode="median")
        mixed.append(do_bench(f, warmup=25, rep=100, return_mode="median"))
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        f()
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            f()
    torch.cuda.synchronize()
    graph = do_bench(g.replay, warmup=25, rep=100, return_mode="median")
    print(f"{dtype}: host {host:.1f} us/call; alone ms {[round(x, 3) for x in alone]}; "
          f"after cuDNN {[round(x, 3) for x in mixed]}; graph {graph:.3f} ms")
