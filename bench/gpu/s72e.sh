#!/bin/bash
# Session 72's planned fourth GPU call (never ran: no machine started; bench/NOTES.md "Session 72"), on the shipped
# tables: the tf32 GPU tests, the fp32 GPU tests under x3, then tf32's forward 128 x 64 x 8 s1 at block_d 256 (D = 256,
# and as tf32x3 at D = 192: s72_tc_tables.py call4), then tf32x3's block_d 64 1-stage tiles (bd64). Outputs under $OUT.
#   bash bench/gpu/s72e.sh [TESTS_GUARD_S]     (default 240: the H100 needs more than 150 s for the fp32 tests)
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src timeout -s INT 60 python -m pytest tests/test_fp32.py -o addopts="" -q -rf -p no:warnings \
  -k "tf32_every_head_dim or tf32_knob" > $out/s72e_tf32.txt 2>&1; tail -2 $out/s72e_tf32.txt
bash bench/gpu/fp32_tests.sh s72e_tests_x3 ${1:-240} x3
for part in call4 bd64; do
  PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 70 python bench/gpu/s72_tc_tables.py 50 $part 2>&1 \
    | tee $out/s72_tc_tables_$part.txt
done
