#!/bin/bash
# Session 72's third GPU call: plain tf32's own tile table and tf32x3's block_d 128 entries (s72_tc_tables.py), the
# fp32 GPU tests under x3 on the new tables, and the tf32 GPU test at every head dim. Outputs under $OUT.
#   bash bench/gpu/s72c.sh   (as run: timing guard 220 s)
bash bench/gpu/sweep_then_fp32_tests.sh s72_tc_tables.py 190 s72c_tests_x3 150
PYTHONPATH=$PWD/src timeout -s INT 90 python -m pytest tests/test_fp32.py -o addopts="" -q -rf -p no:warnings \
  -k "tf32_every_head_dim" > ${OUT:-/tmp}/s72c_tf32_smoke.txt 2>&1; tail -3 ${OUT:-/tmp}/s72c_tf32_smoke.txt
