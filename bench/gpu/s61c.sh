#!/bin/bash
# Session 61, call 3: fp32 one-row calls from 256 keys on the decode kernel (policy.ONE_ROW_DECODE_MIN_NK_FP32) and
# the one-row fp32 backward's delta summed as dP (common.row_dots) - the GPU tests of the fp32 / route / kvcache /
# varlen files, the one-row fp32 grad probe with every one-row forward routed and as shipped, the backward's speed.
export PYTHONUNBUFFERED=1
P=${PREFIX:-s61c}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
FORCE='import sys, runpy, torch
from flashtriton.launchers import policy
policy.ONE_ROW_DECODE_MIN_NK = policy.ONE_ROW_DECODE_MIN_NK_FP32 = 1
script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name="__main__")'
PYTHONPATH=src timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 230 -k "not cpu" \
  -m "not gpu_alone" tests/test_fp32.py tests/test_one_row_route.py tests/test_kvcache.py tests/test_varlen.py \
  > $OUT/${P}_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/${P}_tests.txt; grep -E "FAILED|ERROR" $OUT/${P}_tests.txt | head -20
PYTHONPATH=src timeout -s INT 110 python -c "$FORCE" bench/gpu/s59_fp32_one_row_grad_probe.py 2>&1 \
  | tee $OUT/${P}_grad_probe_routed.txt | tail -6
PYTHONPATH=src timeout -s INT 110 python bench/gpu/s59_fp32_one_row_grad_probe.py 2>&1 | tee $OUT/${P}_grad_probe.txt | tail -6
PYTHONPATH=src timeout -s INT 100 python bench/gpu/s60_fp32_one_row_bwd_speed.py 2>&1 | tee $OUT/${P}_bwd_speed.txt | tail -12
