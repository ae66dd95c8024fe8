"""Session 17: the default backward at D = 128, N = 16k (bwd_ws.py one tile a program)
gave NaN gradients in 11-16 of ~66 calls with three processes sharing the GPU (call 4).
Does FLASHTRITON_WARP_SPEC=0 (bwd.py / fwd.py only) avoid it? Run 3 at once:

    for i in 1 2 3; do FLASHTRITON_WARP_SPEC=0 python bench/gpu/s17_ws_off_stress.py 40 & done; wait

Fixed inputs (B = 1, H = 16, N = 16k, D = 128, bf16), forward + backward each call; prints
the calls, those with NaN anywhere in (out, dq, dk, dv), and those differing bitwise from
the process's first result."""
import os
import sys
import time

import torch

import flashtriton

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
# S17_PAD_MB: a block allocated first and kept, so that this process's later allocations
# (the descriptor scratch among them) sit at other virtual addresses than its siblings'
pad = torch.empty(int(os.environ.get("S17_PAD_MB", "0")) << 20, dtype=torch.uint8, device="cuda")
gen = torch.Generator(device="cuda").manual_seed(17)
q, k, v = (torch.randn(1, 16384, 16, 128, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
           for _ in range(3))
dout = torch.randn(1, 16384, 16, 128, device="cuda", dtype=torch.bfloat16, generator=gen)


def step():
    out = flashtriton.flash_attn_func(q, k, v)
    return (out.detach(), *torch.autograd.grad(out, (q, k, v), dout))


first = [t.clone() for t in step()]
nan_parts = [0, 0, 0, 0]                          # out, dq, dk, dv
calls = nan = differ = 0
t_end = time.time() + seconds
while time.time() < t_end:
    got = step()
    calls += 1
    flags = [bool(t.isnan().any()) for t in got]
    nan += any(flags)
    nan_parts = [a + b for a, b in zip(nan_parts, flags)]
    differ += not all(torch.equal(a, b) for a, b in zip(got, first))
from flashtriton.launchers import sharing  # noqa: E402
t0 = time.perf_counter()
sharing._gpu_shared_seen.clear()
shared_now = sharing.gpu_shared(q.device)
probe_us = (time.perf_counter() - t0) * 1e6
try:
    import pynvml  # noqa: F401
    nvml = "pynvml importable"
except ImportError:
    nvml = "NO pynvml"
print(f"[{nvml}; gpu_shared at the end {shared_now}, probe {probe_us:.0f} us] FLASHTRITON_WARP_SPEC={os.environ.get('FLASHTRITON_WARP_SPEC', 'auto')} "
      f"pad {os.environ.get('S17_PAD_MB', '0')} MB scratch {os.environ.get('FLASHTRITON_DESC_SCRATCH', '-')}: first result NaN "
      f"{any(bool(t.isnan().any()) for t in first)}; calls {calls}, with NaN {nan} (out / dq / dk / dv {nan_parts}), differing from the first {differ}",
      flush=True)
