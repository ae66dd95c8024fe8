#!/bin/bash
# Session 74's second GPU call, after bwd256's winner entered DEFAULTS_FP32_X3: the fp32 GPU selection under x3 on
# the new table, then the new block_d 256 backward pair against session 73's (s72_tc_tables.py bwd256check).
# Outputs under $OUT.   bash bench/gpu/s74b.sh [TESTS_GUARD_S]
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
date -u +%H:%M:%S | tee $out/s74b_start.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee $out/gpu.txt
OUT=$out bash bench/gpu/fp32_tests.sh s74b_tests_x3 ${1:-240} x3
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 200 python bench/gpu/s72_tc_tables.py 170 bwd256check 2>&1 \
  | tee $out/s72_tc_tables_bwd256check.txt
date -u +%H:%M:%S | tee $out/s74b_end.txt
