#!/usr/bin/env bash
# Session 18, call 3 (~9 min): the new default (bwd_ws.py at any length, the dK/dV loop's
# vectors by pointers beyond launchers.backward.WS_DKDV_DESC_MAX_ROWS): stress at 16k and
# 8k with dropout; grid rows D = 128 8k / 16k; the GPU suite; bwd.py at 8k / 16k for the
# comparison the old cap made; the features dropout row.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python bench/gpu/s18_long_stress.py 25 128:16384:0:0 128:8192:0:0.1 2>&1 | grep -v Warn | tee $OUT/stress.txt
timeout 170 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --no-flex \
  --seqlens 8192 16384 --tag s18-d128-long 2>&1 | grep -v Warn | grep "^|\|^###"
timeout 230 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -20; tail -1 $OUT/pytest.txt
FLASHTRITON_WARP_SPEC=0 timeout 60 python - <<'PY' 2>&1 | grep -v Warn | tee $OUT/bwdpy.txt
import torch, flashtriton
from flashtriton.bench.common import attention_flops, time_ms
for n in (8192, 16384):
    b, h, d = 16384 // n, 16, 128
    q, k, v = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(3))
    for causal in (False, True):
        out = flashtriton.flash_attn_func(q, k, v, causal=causal)
        dout = torch.randn_like(out)
        g = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        print(f"bwd.py N={n} causal={causal}: {attention_flops(b, h, n, n, d, causal, 'bwd') / time_ms(g, 'cuda') / 1e9:.1f} TFLOP/s", flush=True)
PY
timeout 80 python -m flashtriton.bench.features --cases dropout --out $OUT/features 2>&1 | grep -v Warn | tail -9
