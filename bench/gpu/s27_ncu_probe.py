"""Session 27: first try of Nsight Compute on the device (never used before in this project).
The rows that trail cuDNN most in the grid (s27 call 2): D = 64 forward (0.91-0.94x) and
backward (0.91-0.93x) at 1k-2k, D = 128 causal forward at 2k (0.90x). This runs, for each
case given as D:N:causal, warm-up calls outside the profiled range, then ONE forward and ONE
backward inside cudaProfilerStart / Stop, so `ncu --profile-from-start off` reports exactly
those kernels.

Question for ncu (prediction written before the run): the D = 64 kernels are issue-bound
(SM throughput > 70%, tensor pipe < 50%, top stall "math pipe throttle" or "wait" on the
softmax's MUFU / FMA), not memory-bound (DRAM < 30% at these lengths: K / V of one head,
N x 64 x 2 bytes, stay in L2); the D = 128 causal forward at 2k loses to its tail (grid
B x H x N / 128 = 512 CTAs on 132 SMs, ~3.9 waves, the diagonal blocks short).

Run on the H200 (repo root):
    ncu --clock-control none --profile-from-start off --section SpeedOfLight \
        --section WarpStateStats --section Occupancy --section LaunchStats \
        python bench/gpu/s27_ncu_probe.py 64:2048:0 128:2048:1
"""
import sys

import torch

import flashtriton


def one_case(d: int, n: int, causal: bool, b: int = 4, h: int = 16):
    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, generator=g)
    for _ in range(3):          # compile, tune-free defaults, plans recorded
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        out.backward(dout)
    torch.cuda.synchronize()
    print(f"case D={d} N={n} causal={causal} B={b} H={h}", flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    out = flashtriton.flash_attn_func(q, k, v, causal=causal)
    out.backward(dout)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    for spec in sys.argv[1:] or ["64:2048:0"]:
        d, n, c = (int(x) for x in spec.split(":"))
        one_case(d, n, bool(c))
