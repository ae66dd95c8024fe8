"""Session 42, call 6: the routed causal O_STAGE forward in eager mode (launch plans replaying the SCHEDULED
deal, which call 5's grid missed: 90 / 195 TFLOP/s at 1k / 2k eager against 400 in graph replays).

Run: PYTHONPATH=src python bench/gpu/s42_eager_check.py
"""
import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtriton import flash_attn_func
from flashtriton.launchers import plans


def main():
    for dtype in (torch.bfloat16, torch.float16):
        for n in (1024, 2048):
            b, h, d = 16384 // n, 16, 128
            q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=dtype) for _ in range(3))
            fl = 2 * b * h * n * n * d
            before = dict(plans.stats)
            ms = triton.testing.do_bench(lambda: flash_attn_func(q, k, v, causal=True), warmup=50, rep=300)
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ms_c = triton.testing.do_bench(
                    lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True),
                    warmup=50, rep=300)
            st = {x: plans.stats[x] - before[x] for x in before}
            print(f"{str(dtype)[6:]} causal N={n}: flashtriton eager {fl / ms / 1e9:.0f} TFLOP/s, cuDNN "
                  f"{fl / ms_c / 1e9:.0f} ({ms_c / ms:.3f}x); plans {st}", flush=True)


if __name__ == "__main__":
    main()
