"""Session 11, call 2: where the slow backwards spend their time, and one A/B each.

For each case: the backward alone (torch.autograd.grad with retain_graph, forward done once),
do_bench median, with FLASHTRITON_WARP_SPEC unset (auto) and =1 (the split path: the
warp-specialized dK/dV and dQ take the fully visible tiles, bwd.py resumes with the masked
ones), plus the CUDA time of each kernel (torch.profiler, summed over 5 calls).

Predictions (bench/NOTES.md, "Session 11"):
- window (1024, 0), D = 128, N = 16k: the split measured 1.67 ms against 1.38 in session 7
  with the wrong-dK kernel; since then the dK/dV kernel got its 2-D descriptor (629 TFLOP/s
  for its four matmuls). Expect the split still slower (~1.5 ms): the resumed kernels do
  both edges at 8 warps and spill.
- D = 128 causal N = 2k (split from 4k): level within 5%.
- D = 256: causal runs at 0.87x its non-causal TFLOP/s where FA2 holds 1.0x; expect the dQ
  kernel (128 x 32 tiles, 4 masked tiles a block) to carry most of the difference.
"""
import os
import sys

import torch
import triton

import flashtriton
from flashtriton.bench.common import attention_flops

CASES = [
    # label, B, N, H, D, causal, window
    ("window(1024,0) D128 16k", 1, 16384, 16, 128, False, (1024, 0)),
    ("causal D128 2k", 8, 2048, 16, 128, True, (-1, -1)),
    ("causal D128 4k", 4, 4096, 16, 128, True, (-1, -1)),
    ("full D256 8k", 2, 8192, 8, 256, False, (-1, -1)),
    ("causal D256 8k", 2, 8192, 8, 256, True, (-1, -1)),
]


def band_flops(b, n, h, d, window):
    rows = torch.arange(n)
    lo = (rows - window[0]).clamp(min=0)
    keys = (rows - lo + 1).sum().item()
    return 4 * b * h * d * keys * 2.5


def main():
    for label, b, n, h, d, causal, window in CASES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn_like(q)
        os.environ.pop("FLASHTRITON_WARP_SPEC", None)
        out = flashtriton.flash_attn_func(q, k, v, causal=causal, window_size=window)
        flops = (band_flops(b, n, h, d, window) if window[0] >= 0
                 else attention_flops(b, h, n, n, d, causal) * 2.5)
        ref = None
        for mode in ("auto", "1"):
            os.environ["FLASHTRITON_WARP_SPEC"] = mode
            f = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
            g = f()
            if ref is None:
                ref = g
            err = max((a.float() - r.float()).abs().max().item() for a, r in zip(g, ref))
            ms = triton.testing.do_bench(f, warmup=50, rep=300)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    f()
                torch.cuda.synchronize()
            kern = {}
            for e in prof.key_averages():
                if e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0:
                    kern[e.key[:40]] = e.self_device_time_total / 5 / 1e3
            ks = ", ".join(f"{k_} {t:.3f}" for k_, t in sorted(kern.items(), key=lambda x: -x[1])[:5])
            print(f"{label:26s} WARP_SPEC={mode:4s} bwd {ms:.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s"
                  f"  (max |diff| vs auto {err:.2e})  kernels ms: {ks}", flush=True)
        del q, k, v, dout, out, ref
    sys.exit(0)


if __name__ == "__main__":
    main()
