#!/bin/bash
# Session 60, call 2: call 1's script (s60a.sh) again with the fp32 few-rows forward tile (configs.FP32_FEW_ROWS):
# the grad probe, the forward probe, the fp32 / kvcache / prefill / varlen / paged / plans GPU tests, the speed.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=src timeout -s INT 150 python bench/gpu/s59_fp32_one_row_grad_probe.py 2>&1 | tee $OUT/s60b_grad_probe.txt | tail -20
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | tee $OUT/s60b_probe.txt | tail -3
PYTHONPATH=src timeout -s INT 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 190 \
  -k "not cpu and (fp32 or float32 or one_query or plan)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  tests/test_varlen.py tests/test_varlen_paged.py tests/test_plans.py > $OUT/s60b_tests.txt 2>&1; echo "tests rc $?"
tail -2 $OUT/s60b_tests.txt; grep -E "FAILED|ERROR" $OUT/s60b_tests.txt | head -10
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s60_fp32_one_row_bwd_speed.py 2>&1 | tee $OUT/s60b_speed.txt
