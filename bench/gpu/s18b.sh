#!/usr/bin/env bash
# Prepared in session 17 (needs bench/wip/dkdv-lse-ptr.patch applied): H2 for the dK/dV
# NaN at D = 128, N = 16k - the per-iteration 256-byte 1-D TMA loads of lse / delta. The
# same single-process stress with the descriptor loads and with pointer loads (LSE_PTR),
# then the backward A/B of the two. Prediction if H2 holds: ~1% of calls NaN with
# descriptors, 0 with pointers, timing within 2%. ~8 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python bench/gpu/s18_long_stress.py 90 128:16384:0:0:uncap 2>&1 | grep -v Warn | tee $OUT/desc.txt
S18_LSE_PTR=1 timeout 200 python bench/gpu/s18_long_stress.py 90 128:16384:0:0:uncap 2>&1 | grep -v Warn | tee $OUT/ptr.txt
timeout 150 python - <<'PY' 2>&1 | grep -v Warn | tee $OUT/ab.txt
import torch, flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans, policy
policy.BWD_WS_MAX_N.clear()
for n in (2048, 4096, 16384):
    b, h, d = 16384 // n, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v)
    dout = torch.randn_like(out)
    g = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    res = {}
    for rep in range(2):
        for flag in ((False, True) if rep == 0 else (True, False)):
            backward.WS_DKDV_LSE_PTR = flag
            plans.clear()
            res.setdefault(flag, []).append(attention_flops(b, h, n, n, d, False, "bwd") / time_ms(g, "cuda") / 1e9)
    print(f"N={n} backward TFLOP/s descriptors {res[False]} pointers {res[True]}", flush=True)
PY
