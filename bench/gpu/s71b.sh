#!/bin/bash
# Session 71's second GPU call: the fp32 GPU tests with FLASHTRITON_ALLOW_TF32=x3 (Triton's tf32x3 dots; every fp32
# test that does not set the knob itself), then bench/gpu/s71_tf32x3.py (accuracy and times: ieee / tf32x3 / tf32)
# in the time left. Outputs under $OUT.
#   bash bench/gpu/s71b.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
bash bench/gpu/fp32_tests.sh s71b_tests_x3 170 x3
left=$((540 - SECONDS)); echo "timing budget ${left}s"
PYTHONPATH=$PWD/src:$PWD/tests timeout $left python bench/gpu/s71_tf32x3.py $((left - 60)) 2>&1 | tee $out/s71_tf32x3.txt
