#!/bin/bash
# Session 72's third GPU call: plain tf32's own tile table and tf32x3's block_d 128 entries (s72_tc_tables.py), the
# fp32 GPU tests under x3 on the new tables, and the tf32 smoke test at every head dim. Outputs under $OUT.
#   bash bench/gpu/s72c.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 220 python bench/gpu/s72_tc_tables.py 190 2>&1 \
  | tee $out/s72_tc_tables.txt
bash bench/gpu/fp32_tests.sh s72c_tests_x3 150 x3
PYTHONPATH=$PWD/src timeout -s INT 90 python -m pytest tests/test_fp32.py -o addopts="" -q -rf -p no:warnings \
  -k "tf32_every_head_dim" > $out/s72c_tf32_smoke.txt 2>&1; tail -3 $out/s72c_tf32_smoke.txt
