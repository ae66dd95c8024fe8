#!/usr/bin/env bash
# Session 18, call 2 (~6 min): after call 1 (descriptor lse / delta loads 102 / 3454 NaN
# calls at D = 128, 16k one tile a program; pointer loads 0 / 3254 but ~8% slower), two
# more variants of launchers.backward.WS_DKDV_LSE_LOAD: "host" (1-D descriptors made on
# the host, TMA kept) and "ptr_late" (pointer loads after the first dot: no spill). Stress
# each at 16k, A/B all four at 2k-16k, and stress the ragged one-tile shape (N = 4000).
# A record, not runnable since: "host" and "ptr_late" (WS_DKDV_LSE_LOAD) were removed after
# this run; ptr_late's placement became VEC_PTR's (launchers.backward.WS_DKDV_VEC_PTR).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
S18_LSE_LOAD=host timeout 100 python bench/gpu/s18_long_stress.py 60 128:16384:0:0:uncap 2>&1 | grep -v Warn | tee $OUT/host.txt
S18_LSE_LOAD=ptr_late timeout 80 python bench/gpu/s18_long_stress.py 40 128:16384:0:0:uncap 2>&1 | grep -v Warn | tee $OUT/ptr_late.txt
timeout 150 python - <<'PY' 2>&1 | grep -v Warn | tee $OUT/ab.txt
import torch, flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans, policy
policy.BWD_WS_MAX_N.clear()
modes = ("desc", "ptr", "ptr_late", "host")
for n in (2048, 4096, 8192, 16384):
    b, h, d = 16384 // n, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v)
    dout = torch.randn_like(out)
    g = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    res = {}
    for rep in range(2):
        for mode in (modes if rep == 0 else modes[::-1]):
            backward.WS_DKDV_LSE_LOAD = mode
            plans.clear()
            res.setdefault(mode, []).append(round(attention_flops(b, h, n, n, d, False, "bwd") / time_ms(g, "cuda") / 1e9, 1))
    print(f"N={n} backward TFLOP/s " + "  ".join(f"{m} {res[m]}" for m in modes), flush=True)
PY
timeout 60 python bench/gpu/s18_long_stress.py 20 128:4000:0:0 2>&1 | grep -v Warn | tee $OUT/ragged.txt
S18_LSE_LOAD=host timeout 60 python bench/gpu/s18_long_stress.py 20 128:4096:0:0 2>&1 | grep -v Warn | tee $OUT/host4k.txt
