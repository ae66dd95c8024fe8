#!/bin/bash
# Session 60, call 5: the route with its threshold and 16-bit rule (policy.ONE_ROW_DECODE_MIN_NK): the route probe
# (as routed, either route forced, varlen, flash_attn_with_kvcache; Nk 1k-32k), then the GPU tests of the files that
# run one-row calls.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 150 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/s60e_route_probe.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 330 python -m pytest -o addopts="" -q -rf -p no:warnings -n 12 --timeout 320 -k "not cpu" \
  -m "not gpu_alone" tests/test_one_row_route.py tests/test_fp32.py tests/test_prefill.py tests/test_kvcache.py \
  tests/test_plans.py tests/test_masks.py tests/test_ops.py tests/test_varlen.py tests/test_determinism.py > $OUT/s60e_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/s60e_tests.txt; grep -E "FAILED|ERROR" $OUT/s60e_tests.txt | head -20
