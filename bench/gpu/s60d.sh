#!/bin/bash
# Session 60, call 4: one-row dense forwards on the decode kernel (policy.ONE_ROW_DECODE) - the route probe (the
# decode route, the prefill route of before, varlen and flash_attn_with_kvcache side by side), then the GPU tests of
# the files that run one-row calls.
export PYTHONUNBUFFERED=1
P=${PREFIX:-s60d}   # the outputs' prefix (s60e.sh runs this script again)
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 150 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/${P}_route_probe.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 330 python -m pytest -o addopts="" -q -rf -p no:warnings -n 12 --timeout 320 -k "not cpu" \
  -m "not gpu_alone" tests/test_one_row_route.py tests/test_fp32.py tests/test_prefill.py tests/test_kvcache.py \
  tests/test_plans.py tests/test_masks.py tests/test_ops.py tests/test_varlen.py tests/test_determinism.py > $OUT/${P}_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/${P}_tests.txt; grep -E "FAILED|ERROR" $OUT/${P}_tests.txt | head -20
