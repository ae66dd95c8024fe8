#!/bin/bash
# Session 71's fourth GPU call: the fp32 GPU tests with FLASHTRITON_ALLOW_TF32=x3 and the tensor-core fp32 tiles
# (configs.DEFAULTS_FP32_TC), then bench/gpu/s71_x3_tiles.py in the time left. Outputs under $OUT.
#   bash bench/gpu/s71c.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
bash bench/gpu/fp32_tests.sh s71c_tests_x3 150 x3
left=$((470 - SECONDS)); echo "timing budget ${left}s"
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout $left python bench/gpu/s71_x3_tiles.py $((left - 60)) 2>&1 \
  | tee $out/s71_x3_tiles.txt
