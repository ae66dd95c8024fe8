#!/bin/bash
# Session 72's second GPU call: the new block_d 256 tensor-core fp32 tiles at D = 256, causal, plain tf32, and
# 1-stage tiles at block_d 128 (s72_x3_tiles2.py); then the fp32 GPU tests under x3 on the new table.
# Outputs under $OUT.   bash bench/gpu/s72b.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader | tee $out/gpu.txt
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 250 python bench/gpu/s72_x3_tiles2.py 220 2>&1 \
  | tee $out/s72_x3_tiles2.txt
bash bench/gpu/fp32_tests.sh s72b_tests_x3 200 x3
