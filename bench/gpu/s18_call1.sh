#!/usr/bin/env bash
# Session 18, call 1 (~8 min): H2 (bench/wip/dkdv-lse-ptr.patch) - the D = 128 16k dK/dV
# NaN stress with descriptor lse / delta loads and with pointer loads, 60 s each; the A/B
# of the two; then 20 s single-process stresses of every warp-specialized kind on by
# default (session 17's s18a.sh cases, shortened). As run, the variants were the wip
# patch's S18_LSE_PTR / WS_DKDV_LSE_PTR; here they are their successors S18_VEC_PTR /
# WS_DKDV_VEC_PTR (0 = descriptors, 1 = pointers), and "uncap" is a no-op since the cap
# (policy.BWD_WS_MAX_N) went.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
S18_VEC_PTR=0 timeout 100 python bench/gpu/s18_long_stress.py 60 128:16384:0:0:uncap 2>&1 | grep -v Warn | tee $OUT/desc.txt
S18_VEC_PTR=1 timeout 100 python bench/gpu/s18_long_stress.py 60 128:16384:0:0:uncap 2>&1 | grep -v Warn | tee $OUT/ptr.txt
cat > /tmp/ab.py <<'PY'
import torch, flashtriton
from flashtriton.bench.common import attention_flops, time_ms
from flashtriton.launchers import backward, plans
for n in (2048, 4096, 16384):
    b, h, d = 16384 // n, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    out = flashtriton.flash_attn_func(q, k, v)
    dout = torch.randn_like(out)
    g = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
    res = {}
    for rep in range(2):
        for flag in ((False, True) if rep == 0 else (True, False)):
            backward.WS_DKDV_VEC_PTR = flag
            plans.clear()
            res.setdefault(flag, []).append(attention_flops(b, h, n, n, d, False, "bwd") / time_ms(g, "cuda") / 1e9)
    print(f"N={n} backward TFLOP/s descriptors {res[False]} pointers {res[True]}", flush=True)
PY
timeout 100 python /tmp/ab.py 2>&1 | grep -v Warn | tee $OUT/ab.txt
timeout 250 python bench/gpu/s18_long_stress.py 18 128:8192:0:0:uncap 128:4096:0:0 128:2048:0:0 128:4096:1:0 \
  128:4096:0:0.1 64:16384:0:0 64:2048:0:0 64:16384:1:0 256:16384:1:0 2>&1 | grep -v Warn | tee $OUT/kinds.txt
