"""Session 37 probe: why the grid's forward+backward TFLOP/s sits below what its forward and
backward times add up to for flashtriton (e.g. D = 256 causal N = 512: fwd 302, bwd 215, fwd+bwd
176 TFLOP/s, where t_fwd + t_bwd would give ~234), while FA2's and cuDNN's rows add up.

For each shape: t_fwd, t_bwd, t_fwd_bwd as the grid times them (bench.common.time_ms, do_bench,
L2 zeroed before each call) for flashtriton and cuDNN, the gap t_fb - (t_f + t_b); then one
profiled flashtriton forward+backward (torch.profiler, 3 calls): the kernels it launches, their GPU
time, the GPU-idle time between the first kernel's start and the last one's end, and the CUDA
runtime calls that block the host (synchronize / memcpy to host / event sync).

Prediction (before running): the gap is host time that the GPU waits for - per call a fixed cost
(something in the forward+backward path that the backward-only loop skips, e.g. a plan built per
autograd context, or a host sync), so ~0.1-0.2 ms at every shape: 30% of the N = 512 call, 5% of
the 8k one. Wrong if the gap scales with N (then it is on the GPU: a kernel the backward-only loop
does not run, or an L2 effect).

Result (session 37): neither - not reproduced. t_fb - t_f - t_b is -0.001 to +0.13 ms for ours and
-0.004 to +0.08 ms for cuDNN (bench/NOTES.md, "Session 37"): the grid rows were measured in a slower
state of their process.
"""
import json
import os
import sys

import torch

from flashtriton.bench import common, providers

SHAPES = [  # (B, H, N, D, causal)
    (32, 8, 512, 256, True),
    (16, 16, 1024, 128, True),
    (4, 16, 4096, 128, True),
    (2, 16, 8192, 128, False),
    (2, 32, 8192, 64, False),
]
out_dir = os.environ.get("OUT", "/tmp")


def modes(fn, q, k, v, dout, causal):
    out = fn(q, k, v, causal)
    t = {"fwd": common.time_ms(lambda: fn(q, k, v, causal), "cuda"),
         "bwd": common.time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), "cuda"),
         "fb": common.time_ms(lambda: torch.autograd.grad(fn(q, k, v, causal), (q, k, v), dout), "cuda")}
    t["gap"] = t["fb"] - t["fwd"] - t["bwd"]
    return t


def profile_fb(fn, q, k, v, dout, causal):
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        torch.autograd.grad(fn(q, k, v, causal), (q, k, v), dout)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.autograd.grad(fn(q, k, v, causal), (q, k, v), dout)
        torch.cuda.synchronize()
    evs = prof.events()
    kern = sorted([e for e in evs if e.device_type == torch.autograd.DeviceType.CUDA], key=lambda e: e.time_range.start)
    busy = sum(e.time_range.end - e.time_range.start for e in kern)
    span = kern[-1].time_range.end - kern[0].time_range.start if kern else 0
    names = {}
    for e in kern:
        names[e.name[:90]] = names.get(e.name[:90], 0) + (e.time_range.end - e.time_range.start)
    blocking = {}
    for e in evs:
        n = e.name
        if any(s in n for s in ("Synchronize", "MemcpyAsync", "Memcpy", "EventSynchronize", "item", "_local_scalar")):
            blocking[n] = blocking.get(n, 0) + 1
    gaps = []
    for a, b in zip(kern, kern[1:]):
        g = b.time_range.start - a.time_range.end
        if g > 5:
            gaps.append((round(g, 1), a.name[:50], b.name[:50]))
    gaps.sort(reverse=True)
    return {"kernels_per_call": len(kern) / 3, "gpu_busy_us_per_call": busy / 3, "span_us_3calls": span,
            "kernel_us": {k_: round(v_ / 3, 1) for k_, v_ in sorted(names.items(), key=lambda x: -x[1])},
            "host_blocking_calls": blocking, "largest_gaps_us": gaps[:12]}


def main():
    res = []
    from torch.nn.attention import SDPBackend
    ours, cudnn = providers.ours, providers._sdpa(SDPBackend.CUDNN_ATTENTION)

    for b, h, n, d, causal in SHAPES:
        q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
        row = {"shape": f"B={b} H={h} N={n} D={d} causal={causal}"}
        for name, fn in (("ours", ours), ("cudnn", cudnn)):
            row[name] = {k_: round(v_, 4) for k_, v_ in modes(fn, q, k, v, dout, causal).items()}
        row["ours_profile"] = profile_fb(ours, q, k, v, dout, causal)
        print(json.dumps(row, indent=1), flush=True)
        res.append(row)
    with open(os.path.join(out_dir, "s37_fwd_bwd_gap.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
