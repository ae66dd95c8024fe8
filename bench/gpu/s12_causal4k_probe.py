"""Session 12, call 8: why the grid's eager causal forward at D = 128, N = 4k read 425 TFLOP/s
with the 64-row tile when its graph A/B read 465 (call 6). Times one shape four ways:
eager (do_bench, as the grid) and graph replay, with and without requires_grad."""
import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops, graph_time_ms
from flashtriton.kernels import configs

b, n, h, d = 4, 4096, 16, 128
flops = attention_flops(b, h, n, n, d, True)
print("default tile:", configs.default_tile("fwd", 128, n, masked=True))
for grad in (False, True):
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=grad) for _ in range(3))
    f = lambda: flashtriton.flash_attn_func(q, k, v, causal=True)  # noqa: E731
    f()
    eager = triton.testing.do_bench(f, warmup=25, rep=200)
    graph = graph_time_ms(f)
    print(f"requires_grad={grad}: eager {flops / eager / 1e9:.0f} graph {flops / graph / 1e9:.0f} TFLOP/s")
