#!/bin/bash
# Session 72's last GPU call (little device time left): s72d.sh's tests on the final tables, then as much of its
# timings as fits. Outputs under $OUT.   bash bench/gpu/s72e.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src timeout -s INT 45 python -m pytest tests/test_fp32.py -o addopts="" -q -rf -p no:warnings \
  -k "tf32_every_head_dim or tf32_knob" > $out/s72e_tf32.txt 2>&1; tail -2 $out/s72e_tf32.txt
bash bench/gpu/fp32_tests.sh s72e_tests_x3 125 x3
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 40 python bench/gpu/s72_tc_tables.py 25 call4 2>&1 \
  | tee $out/s72_tc_tables_call4.txt
