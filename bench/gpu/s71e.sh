#!/bin/bash
# Session 71's sixth GPU call: the fp32 GPU tests with FLASHTRITON_ALLOW_TF32=x3 on the swept tensor-core tiles
# (configs.DEFAULTS_FP32_TC, block_d 64 changed after call 4's run). Outputs under $OUT.
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
bash bench/gpu/fp32_tests.sh s71e_tests_x3 170 x3
