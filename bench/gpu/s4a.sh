#!/usr/bin/env bash
# Session 4, GPU call 1: the unverified graph-capture test, the B = 1 decode sweep,
# and the autotuning first-call cost (issue 4).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 60 python -m pytest tests/test_varlen.py -o addopts="" -q -p no:warnings -k "graph" 2>&1 | tail -3
timeout 200 python bench/gpu/s4_decode_sweep.py 2>&1 | grep -v Warning | tee $OUT/decode-sweep.txt
timeout 200 python -c "
from flashtriton.bench.tune import first_call_tuning_seconds as f
for d in (128, 64):
    print('D', d, 'cold first fwd+bwd, autotune on:', round(f(d, 4096), 1), 's; fixed defaults:', round(f(d, 4096, autotune=False), 1), 's', flush=True)
" 2>&1 | tee $OUT/first-call.txt
