"""Session 38 probe: two timing anomalies, in one process, with nvidia-smi sampling clocks / power in the
background (bench/gpu/s38b.sh writes $OUT/s38_smi.csv; this prints epoch seconds for each timing).

(A) Graph replays that read ~15% slow now and then (session 38's DQ_FOLD A/B: the last timing of a case,
    e.g. 2.811 -> 3.296 ms for the same graph-replayed backward; bench/results/nvidia-h200/s38/). Here:
    ours' and cuDNN's forward+backward (D = 128, N = 4k, B = 4, H = 16, bf16) as CUDA graphs, timed 12
    times each, alternating, (A1) one graph each re-used, (A2) a fresh capture a timing, as the A/B scripts
    do. PREDICTION: if the slow timings come with lower SM clocks (power capping) they are the GPU's, not
    ours; if they come only with fresh captures, they are the capture's memory.
(B) The grid's eager forward+backward that reads ~8% slow in the first shape after another shape (session
    37: D = 64 4k after 8k, GPU-idle stalls of ~2 ms between the forward and the backward). Here: after
    bench_shape at 8k, then at 4k (the slow state), 40 eager forward+backward calls each timed on the host
    with the GPU held busy (torch.cuda._sleep), so a call that waits on the GPU shows as a ~100 ms call;
    then cProfile over 30 calls, the top functions by own time. The same after a second 4k bench_shape
    (the healed state). PREDICTION: the slow state's calls cost ms more host time in one function.

    PYTHONPATH=src python bench/gpu/s38_timing_probe.py          # S38_PART=A or B for one part
"""
import cProfile
import io
import os
import pstats
import time

import torch
from triton.testing import do_bench

from flashtriton.bench import common, prefill, providers


def stamp():
    return f"{time.time():.3f}"


def part_a():
    b, n, h, d = 4, 4096, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    fns = {name: (lambda fn=fn: torch.autograd.grad(fn(q, k, v, False), (q, k, v), dout))
           for name, fn in (("ours", providers.ours), ("cudnn", providers.gpu_providers(include_flex=False)["sdpa-cudnn"]))}
    flops = common.attention_flops(b, h, n, n, d, False, "fwd_bwd")
    graphs = {name: common.capture_graph(fn)[0] for name, fn in fns.items()}
    order = ["ours", "cudnn", "ours", "ours", "cudnn", "cudnn"] * 4
    for mode in ("A1 reused", "A2 fresh"):
        for i, name in enumerate(order):
            g = graphs[name] if mode == "A1 reused" else common.capture_graph(fns[name])[0]
            t0 = stamp()
            ms = do_bench(g.replay, warmup=25, rep=100, return_mode="median")
            print(f"{mode} {i:2d} {name:5s} {t0} {stamp()} {ms:.3f} ms {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
            del g


def host_calls(tag, fb, calls=40):
    """Each call's host us with the GPU busy; any call that waits on the GPU shows as ~100 ms."""
    for _ in range(3):
        fb()
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))                 # ~1 s of GPU spin at ~1.8 GHz
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fb()
        ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    ms = do_bench(fb, warmup=25, rep=100, return_mode="median")
    print(f"B {tag}: do_bench fwd+bwd {ms:.3f} ms; host us a call: " + " ".join(f"{t:.0f}" for t in ts), flush=True)
    prof = cProfile.Profile()
    torch.cuda._sleep(int(2e9))
    prof.enable()
    for _ in range(30):
        fb()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(14)
    print(f"B {tag}: cProfile, 30 calls, by own time\n" + "\n".join(s.getvalue().splitlines()[6:24]), flush=True)


def part_b():
    h, d = 32, 64
    alone = {"flashtriton": providers.ours}

    def fb_of(n):
        q, k, v = (torch.randn(16384 // n, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn_like(q)
        return lambda: torch.autograd.grad(providers.ours(q, k, v, False), (q, k, v), dout)

    for tag, n in (("8k first", 8192), ("4k after 8k", 4096), ("4k again", 4096)):
        rows = prefill.bench_shape(alone, 16384 // n, n, h, d, False, torch.bfloat16)
        r = rows[0]
        print(f"B {tag} bench_shape {stamp()}: fwd {r['fwd_ms']:.3f} bwd {r['bwd_ms']:.3f} fb {r['fwd_bwd_ms']:.3f} ms"
              f" gap {100 * (r['fwd_bwd_ms'] - r['fwd_ms'] - r['bwd_ms']) / r['fwd_bwd_ms']:+.1f}%", flush=True)
        if n == 4096:
            host_calls(tag, fb_of(n))


def main():
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, GPU_SHARED="
          f"{os.environ.get('FLASHTRITON_GPU_SHARED', 'auto')}", flush=True)
    part = os.environ.get("S38_PART", "AB")
    if "B" in part:
        part_b()
    if "A" in part:
        part_a()


if __name__ == "__main__":
    main()
