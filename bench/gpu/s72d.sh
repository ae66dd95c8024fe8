#!/bin/bash
# Session 72's fourth GPU call, on the final tables: the tf32 GPU tests and the fp32 GPU tests under x3; then tf32's
# block_d 256 forward (128 x 64 x 8 s1) at D = 256 and as tf32x3 at D = 192 (s72_tc_tables.py call4); then the
# features table's float32 row. Outputs under $OUT.   bash bench/gpu/s72d.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src timeout -s INT 60 python -m pytest tests/test_fp32.py -o addopts="" -q -rf -p no:warnings \
  -k "tf32_every_head_dim or tf32_knob" > $out/s72d_tf32.txt 2>&1; tail -3 $out/s72d_tf32.txt
bash bench/gpu/fp32_tests.sh s72d_tests_x3 170 x3
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 70 python bench/gpu/s72_tc_tables.py 50 call4 2>&1 \
  | tee $out/s72_tc_tables_call4.txt
PYTHONPATH=$PWD/src timeout 100 python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
  --out $out/feat 2>&1 | tail -7
