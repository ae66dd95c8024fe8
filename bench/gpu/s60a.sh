#!/bin/bash
# Session 60, call 1: the one-row fp32 backward with the lse in log2 units (forward.lse_log2) and the exponent as one
# FMA (common.exp2_one_rounding) - the grad probe, the forward probe, the fp32 / kvcache / prefill / varlen / paged /
# plans GPU tests, then the backward's speed.
export PYTHONUNBUFFERED=1
P=${PREFIX:-s60a}   # the outputs' prefix (s60b.sh runs this script again)
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=src timeout -s INT 150 python bench/gpu/s59_fp32_one_row_grad_probe.py 2>&1 | tee $OUT/${P}_grad_probe.txt | tail -20
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | tee $OUT/${P}_probe.txt | tail -3
PYTHONPATH=src timeout -s INT 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 190 \
  -k "not cpu and (fp32 or float32 or one_query or plan)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  tests/test_varlen.py tests/test_varlen_paged.py tests/test_plans.py > $OUT/${P}_tests.txt 2>&1; echo "tests rc $?"
tail -2 $OUT/${P}_tests.txt; grep -E "FAILED|ERROR" $OUT/${P}_tests.txt | head -10
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s60_fp32_one_row_bwd_speed.py 2>&1 | tee $OUT/${P}_speed.txt
