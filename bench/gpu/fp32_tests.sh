#!/bin/bash
# The fp32 GPU test selection (-k "fp32 and not cpu", 10 workers) under a time guard, with FLASHTRITON_ALLOW_TF32
# as given (every fp32 test that does not set the knob itself runs under it). Log: $OUT/<name>.txt.
#   bash bench/gpu/fp32_tests.sh NAME SECONDS [KNOB]      (session 71: KNOB x3)
out=${OUT:-/tmp}
FLASHTRITON_ALLOW_TF32=${3:-0} PYTHONPATH=$PWD/src timeout -s INT $2 python -m pytest tests -o addopts="" -q -rf \
  -p no:warnings -n 10 --timeout 120 -k "fp32 and not cpu" -m "not gpu_alone" > $out/$1.txt 2>&1
echo "tests rc $?"; tail -1 $out/$1.txt; grep -E "^(FAILED|ERROR)" $out/$1.txt | head -30
