#!/usr/bin/env bash
# Session 16, call 8 (last ~270 s of device time): causal D = 128 on the persistent fwd_ws.py
# by default - the prefill tests that reach it, and three grid rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 70 python -m pytest tests/test_prefill.py tests/test_masks.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -p no:benchmark -n 8 --timeout 60 -k "causal and not cpu" 2>&1 | tail -3
timeout 115 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes --no-flex \
  --seqlens 1024 4096 16384 --tag s16-d128c 2>&1 | grep -A8 "^### bfloat16, D=128, causal" | head -9
