"""Session 52: the grid's short cells below cuDNN, run as a packed (varlen) call on the Gluon VARLEN kernel.

Why: the dense forward's cells under 1.0x cuDNN are all short (D = 64 causal 512-4k: 0.91-0.97x; D = 64 plain 512 /
1k 0.93 / 0.94x; D = 128 causal 512 / 1k 0.88 / 0.96x; D = 128 plain 512 0.93x; session 48's grid). Their routes are
fwd_ws.py (Triton) or the dense Gluon kernels. A dense (B, N, H, D) contiguous batch is exactly a packed
(B * N, H, D) batch with cu_seqlens = 0, N, 2N, ...: the Gluon VARLEN kernel (sessions 49-51: its own block map,
longest first, half-width last tiles) can run it without a copy. Never measured on equal lengths against the dense
routes.
PREDICTION (before the run): the VARLEN kernel at D = 64 runs 2 consumers (the dense causal 2k route: fwd_ws.py; the
2-consumer dense Gluon kernel read 0.95x it at 2k in session 42), so varlen / dense route 0.93-1.00x at D = 64
causal 2k / 4k; at 512 / 1k (blocks of 1-8 tiles) 0.95-1.05x; D = 128 causal 512 (route fwd_ws.py, 0.87x cuDNN)
0.95-1.05x. Rule (written before the run): a cell routes through VARLEN only if the median of the per-round
ratios >= 1.03 and no round below 1.00, in bf16 and fp16 both.

    PYTHONPATH=src python bench/gpu/s52_dense_as_varlen_ab.py
"""
import statistics
import sys

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtriton import flash_attn_func, flash_attn_varlen_func

ROUNDS = 5
CASES = [(64, True, 512), (64, True, 1024), (64, True, 2048), (64, True, 4096), (64, False, 512),
         (64, False, 1024), (128, True, 512), (128, True, 1024), (128, False, 512), (128, True, 2048)]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=60)


def case(d, causal, n, dtype):
    h = 2048 // d
    b = 16384 // n
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
    cu = torch.arange(0, b + 1, device="cuda", dtype=torch.int32) * n
    qp, kp, vp = (x.view(b * n, h, d) for x in (q, k, v))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    runs = {"dense route": lambda: flash_attn_func(q, k, v, causal=causal),
            "varlen": lambda: flash_attn_varlen_func(qp, kp, vp, cu, cu, n, n, causal=causal),
            "cudnn": cudnn}
    o_d = runs["dense route"]()
    o_v = runs["varlen"]().view(b, n, h, d)
    torch.cuda.synchronize()
    diff = (o_d.float() - o_v.float()).abs().max().item()
    qd, kd, vd = (x[0, :, 0].double() for x in (q, k, v))
    s = qd @ kd.T * d ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = s.softmax(-1) @ vd
    err_v = (o_v[0, :, 0].double() - ref).abs().max().item()
    err_d = (o_d[0, :, 0].double() - ref).abs().max().item()
    flops = 4 * b * h * n * n * d / (2 if causal else 1)
    names = list(runs)
    res = {x: [] for x in names}
    for r in range(ROUNDS):
        for name in names[r % 3:] + names[:r % 3]:
            res[name].append(flops / bench(runs[name]) / 1e9)
    ratio = [a / c for a, c in zip(res["varlen"], res["dense route"])]
    print(f"D={d} {'causal' if causal else 'plain '} N={n} {str(dtype)[6:]} (B={b}, H={h}); |varlen - dense| {diff:.2e}; "
          f"max |O - f64| varlen {err_v:.2e} dense {err_d:.2e}")
    for name, xs in res.items():
        print(f"  {name:12s} {' / '.join(f'{x:.0f}' for x in xs)} (median {statistics.median(xs):.0f})")
    print(f"  varlen / dense per round: {' / '.join(f'{x:.3f}' for x in ratio)}; median {statistics.median(ratio):.3f}, "
          f"lowest {min(ratio):.3f}; varlen / cuDNN {statistics.median(a / c for a, c in zip(res['varlen'], res['cudnn'])):.3f}, "
          f"dense / cuDNN {statistics.median(a / c for a, c in zip(res['dense route'], res['cudnn'])):.3f}", flush=True)


if __name__ == "__main__":
    dtypes = [torch.bfloat16, torch.float16] if "--fp16" in sys.argv else [torch.bfloat16]
    for dtype in dtypes:
        for d, causal, n in CASES:
            case(d, causal, n, dtype)
