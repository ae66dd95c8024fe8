#!/bin/bash
# Session 73, call 2: tf32x3's block_d 256 forward on 128 x 64 x 8 s1 (call 1: 4.42 against 6.80 ms at D = 192,
# H100): the fp32 GPU tests under x3 on it, then call4's timings again. Outputs under $OUT.
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
date -u +%H:%M:%S | tee $out/start.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
bash bench/gpu/fp32_tests.sh s73b_tests_x3 ${1:-200} x3
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 70 python bench/gpu/s72_tc_tables.py 50 call4 2>&1 \
  | tee $out/s72_tc_tables_call4.txt
date -u +%H:%M:%S | tee $out/end.txt
