#!/bin/bash
# Session 61, call 5: the one-key fp32 strict xfails on the GPU (test_fp32.ONE_KEY_LIMITS) and the route tests.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 150 python -m pytest -o addopts="" -q -rf -rxX -p no:warnings -n 8 --timeout 140 -k "not cpu" \
  -m "not gpu_alone" tests/test_fp32.py tests/test_one_row_route.py > $OUT/s61e_tests.txt 2>&1
echo "tests rc $?"; tail -1 $OUT/s61e_tests.txt; grep -E "FAILED|ERROR|XPASS|XFAIL" $OUT/s61e_tests.txt | head -20
