"""Session 19: why the grid's forward+backward TFLOP/s sometimes reads below the backward's
alone (D = 128 8k non-causal 558 / 437 / 423, D = 64 16k causal 415 / 355 / 325; the sum
of the fwd and bwd times predicts 466 and ~370; cuDNN's rows add up).

Default: for each case, do_bench times of fwd, bwd (retain_graph), fwd+bwd; then the
profiler's per-kernel device time inside one fwd+bwd call against inside fwd and bwd
alone, to see whether a kernel is slower (L2 / placement) or the GPU idles between
kernels (host, sync). Prediction: a kernel is not slower; the gap is idle time from a
host-side sync or a plan miss between the forward and the backward.

"seq": the grid's sequence of shapes for flashtriton alone (the gap shows only with many
rows in one process; the 8k row alone adds up, 468 TFLOP/s, s19 call 6), per row the three
times and the caching allocator's device allocations / frees / retries during the fwd+bwd
timing. Prediction: the allocator frees and re-allocates device memory inside the timed
fwd+bwd calls (fragmentation after earlier rows), which synchronizes.

    PYTHONPATH=src python bench/gpu/s19_fwdbwd_gap.py [seq]
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

import flashtriton
from flashtriton.bench.common import attention_flops

ALLOC_KEYS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")


def case(b, n, h, d, causal):
    """(fwd, bwd with retain_graph, fwd+bwd) callables on fresh inputs, and the forward's out."""
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
    fwd = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)  # noqa: E731
    out = fwd()
    bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
    both = lambda: torch.autograd.grad(fwd(), (q, k, v), dout)  # noqa: E731
    return fwd, bwd, both


def kernels(fn, reps=5):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = {}
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" or getattr(e, "self_device_time_total", 0) > 0:
            t = getattr(e, "self_device_time_total", 0) / reps
            if t > 1:
                rows[e.key[:60]] = (round(t, 1), e.count // reps)
    return rows


def gap():
    for b, n, h, d, causal in ((2, 8192, 16, 128, False), (1, 16384, 32, 64, True), (1, 16384, 16, 128, True)):
        fwd, bwd, both = case(b, n, h, d, causal)
        t = {name: do_bench(f, warmup=25, rep=200, return_mode="median") for name, f in
             (("fwd", fwd), ("bwd", bwd), ("both", both), ("fwd2", fwd), ("bwd2", bwd), ("both2", both))}
        print(f"B={b} N={n} H={h} D={d} causal={causal}: ms " + " ".join(f"{k_}={v_:.3f}" for k_, v_ in t.items())
              + f"  both - (fwd + bwd) = {t['both'] - t['fwd'] - t['bwd']:+.3f}", flush=True)
        # wall time of back-to-back calls without any flush (host ahead of the GPU?)
        for name, f in (("fwd", fwd), ("bwd", bwd), ("both", both)):
            f()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                f()
            e.record()
            torch.cuda.synchronize()
            print(f"  back-to-back {name}: {s.elapsed_time(e) / 20:.3f} ms", flush=True)
        for name, f in (("fwd", fwd), ("bwd", bwd), ("both", both)):
            print(f"  kernels in {name}: {kernels(f)}", flush=True)


def seq():
    for d in (64, 128):
        for causal in (False, True):
            for n in (8192, 16384):
                b, h = 16384 // n, 2048 // d
                fwd, bwd, both = case(b, n, h, d, causal)
                t = {}
                for name, f in (("fwd", fwd), ("bwd", bwd), ("both", both)):
                    s0 = torch.cuda.memory_stats()
                    t[name] = do_bench(f, warmup=25, rep=100, return_mode="median")
                    s1 = torch.cuda.memory_stats()
                    if name == "both":
                        delta = {key: s1.get(key, 0) - s0.get(key, 0) for key in ALLOC_KEYS}
                fl = attention_flops(b, h, n, n, d, causal, "fwd_bwd")
                print(f"D={d} N={n} causal={causal}: ms fwd {t['fwd']:.3f} bwd {t['bwd']:.3f} both {t['both']:.3f}"
                      f" (sum {t['fwd'] + t['bwd']:.3f}; {fl / t['both'] / 1e9:.0f} TFLOP/s)  allocator in both: "
                      f"{delta}  reserved {torch.cuda.memory_reserved() / 2**30:.1f} GiB", flush=True)
                del fwd, bwd, both


if __name__ == "__main__":
    seq() if sys.argv[1:2] == ["seq"] else gap()
