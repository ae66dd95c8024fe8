#!/bin/bash
# Session 71's sixth GPU call: the fp32 GPU tests with FLASHTRITON_ALLOW_TF32=x3 on the swept tensor-core tiles
# (configs.DEFAULTS_FP32_TC, block_d 64 changed after call 4's run). Outputs under $OUT.
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
FLASHTRITON_ALLOW_TF32=x3 PYTHONPATH=$PWD/src timeout -s INT 170 python -m pytest tests -o addopts="" -q -rf \
  -p no:warnings -n 10 --timeout 120 -k "fp32 and not cpu" -m "not gpu_alone" > $out/s71e_tests_x3.txt 2>&1
echo "tests rc $?"; tail -1 $out/s71e_tests_x3.txt; grep -E "^(FAILED|ERROR)" $out/s71e_tests_x3.txt | head -30
