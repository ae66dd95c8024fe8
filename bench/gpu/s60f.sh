#!/bin/bash
# Session 60, call 6: one-row varlen calls on the decode kernel too (one query a sequence), the threshold at 2048 -
# the route probe, then the GPU tests of the route, kvcache, varlen, fp32 and plans files (8 workers: 12 ran an H100
# out of memory in call 5).
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 150 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/s60f_route_probe.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 230 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 220 -k "not cpu" \
  -m "not gpu_alone" tests/test_one_row_route.py tests/test_kvcache.py tests/test_varlen.py tests/test_fp32.py \
  tests/test_plans.py > $OUT/s60f_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/s60f_tests.txt; grep -E "FAILED|ERROR" $OUT/s60f_tests.txt | head -20
