"""Session 26: why the eager causal forward at N = 512 (D = 128, B = 32, H = 16) reads 193
TFLOP/s in the grid (s26/call3) against 285 as a CUDA-graph replay and 287 eagerly in
session 25's grid (before launch plans rebound Gluon descriptors): host-bound, with a
host path of ~180 us a call where ~40-90 us was expected. Per case: the eager forward
(do_bench), the host time a call (100 calls issued without a sync, divided), plans.stats
deltas; the same for forward+backward. D = 64 causal 512 and D = 128 plain 512 as
controls (their eager rows matched their replays).

Prediction: a plan miss or an unreplayable launch on the causal 512 forward (host
~150-200 us a call, stats show 'unreplayable' or 'recorded' growing each call); the
controls replay (host ~40-60 us).

    PYTHONPATH=src python bench/gpu/s26_short_causal_probe.py
"""
import os
import time

os.environ.setdefault("FLASHTRITON_PLANS", "1")
import torch  # noqa: E402
import triton  # noqa: E402

import flashtriton  # noqa: E402
from flashtriton.launchers import plans  # noqa: E402


def host_us(fn, n=100):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6


def case(d, n, causal, b=None, h=None):
    h = h or 2048 // d
    b = b or 16384 // n
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn_like(q)
    fwd = lambda: flashtriton.flash_attn_func(q, k, v, causal=causal)  # noqa: E731

    def fwd_bwd():
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        torch.autograd.grad(out, (q, k, v), dout)

    for name, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
        before = dict(plans.stats)
        host, wall = host_us(fn)
        delta = {key: plans.stats[key] - before[key] for key in before}
        ms = triton.testing.do_bench(fn, warmup=25, rep=200)
        print(f"D={d} N={n} B={b} H={h} {'causal' if causal else 'plain'} {name}: do_bench {ms * 1e3:.0f} us, "
              f"host {host:.0f} us a call, wall {wall:.0f} us a call, plans over 101 calls {delta}", flush=True)
    with torch.no_grad():
        before = dict(plans.stats)
        host, wall = host_us(fwd)
        delta = {key: plans.stats[key] - before[key] for key in before}
        print(f"D={d} N={n} {'causal' if causal else 'plain'} fwd no_grad: host {host:.0f} us, wall {wall:.0f} us, "
              f"plans {delta}", flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), "FLASHTRITON_PLANS", os.environ["FLASHTRITON_PLANS"])
    for spec in ((128, 512, True), (64, 512, True), (128, 512, False), (128, 1024, True)):
        try:
            case(*spec)
        except Exception as exc:  # noqa: BLE001
            print(spec, "failed:", type(exc).__name__, str(exc)[:300], flush=True)
