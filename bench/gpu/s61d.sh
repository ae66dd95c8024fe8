#!/bin/bash
# Session 61, call 4: call 3's backward change (delta summed as dP) reverted - the GPU tests of the fp32 / route /
# varlen / kvcache files (kvcache's large default-path cases apart, 2 workers: 8 ran the H100 out of memory in call
# 3), the one-row fp32 grad probe as shipped, the one-row fp32 backward's speed.
export PYTHONUNBUFFERED=1
P=${PREFIX:-s61d}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=src timeout -s INT 200 python -m pytest -o addopts="" -q -rf -rx -p no:warnings -n 8 --timeout 190 -k "not cpu and not default_paths" \
  -m "not gpu_alone" tests/test_fp32.py tests/test_one_row_route.py tests/test_kvcache.py tests/test_varlen.py \
  > $OUT/${P}_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/${P}_tests.txt; grep -E "FAILED|ERROR|XPASS|XFAIL" $OUT/${P}_tests.txt | head -20
PYTHONPATH=src timeout -s INT 100 python -m pytest -o addopts="" -q -rf -p no:warnings -n 2 --timeout 90 -k "default_paths" \
  tests/test_kvcache.py > $OUT/${P}_tests_large.txt 2>&1
echo "large tests rc $?"; tail -2 $OUT/${P}_tests_large.txt; grep -E "FAILED|ERROR" $OUT/${P}_tests_large.txt | head
PYTHONPATH=src timeout -s INT 110 python bench/gpu/s59_fp32_one_row_grad_probe.py 2>&1 | tee $OUT/${P}_grad_probe.txt | grep -E "FAIL|total"
PYTHONPATH=src timeout -s INT 100 python bench/gpu/s60_fp32_one_row_bwd_speed.py 2>&1 | tee $OUT/${P}_bwd_speed.txt | tail -5
