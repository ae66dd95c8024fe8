"""Session 25, call 6: why the feature benchmark's eager window forward (16k, window
(1024, 0), B = 1, H = 16, D = 128) measured 0.445 ms with the Gluon WINDOW route against
session 22's 0.334 ms on fwd_ws.py, when the kernel-only A/B had the Gluon kernel 1.14x
faster; and the causal 4k (B = 2) forward 0.422 ms against 0.288. For each case, routed
and with the Gluon table emptied: do_bench median (the features' timing), the host time a
call (50 calls without a sync, perf_counter), and the same with the inputs not requiring
grad. Then the fused backward at D = 64 causal 2k (a routing threshold not measured).

    PYTHONPATH=src python bench/gpu/s25_route_probe.py
"""
import time

import torch

from flashtriton import flash_attn_func
from flashtriton.bench.common import time_ms
from flashtriton.launchers import plans, policy


def host_us(fn, n=50):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6


def case(name, b, n, kw, table, key):
    for grad in (True, False):
        q, k, v = (torch.randn(b, n, 16, 128, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
                   for _ in range(3))
        fn = lambda: flash_attn_func(q, k, v, **kw)  # noqa: E731
        res = []
        for routed in (True, False):
            saved = dict(table)
            if not routed:
                table.pop(key, None)
            plans.clear()
            try:
                ms = time_ms(fn, "cuda")
                h, wall = host_us(fn)
            finally:
                table.clear()
                table.update(saved)
            res.append(f"{'gluon' if routed else 'library'} {ms * 1e3:.0f} us (host {h:.0f} us a call, "
                       f"wall {wall:.0f})")
        print(f"{name} grad={grad}: " + "; ".join(res), flush=True)


case("window (1024, 0) 16k B=1", 1, 16384, dict(window_size=(1024, 0)), policy.GLUON_FWD_WINDOW_MIN_N, 128)
case("causal 4k B=2", 2, 4096, dict(causal=True), policy.GLUON_FWD_CAUSAL_MIN_N, 128)
case("plain 4k B=2", 2, 4096, dict(), policy.GLUON_FWD_MIN_N, 128)
