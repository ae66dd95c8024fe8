#!/bin/bash
# Session 74, one call instead of two (device starts are scarce): the tf32x3 block_d 256 backward sweep (s73e.sh);
# s74_pick.py writes a >= 3% winner into this copy's DEFAULTS_FP32_X3; the fp32 GPU selection under x3 runs on it;
# then, on an H200 with time left, s74e.sh (call4 and the features float32 row). Outputs under $OUT.
#   bash bench/gpu/s74c.sh
export PYTHONUNBUFFERED=1
set -o pipefail   # the pick's exit status, not tee's, decides whether the tests run (session 74 fix)
out=${OUT:-/tmp}
start=$(date +%s)
date -u +%H:%M:%S | tee $out/s74c_start.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee $out/gpu.txt
OUT=$out bash bench/gpu/s73e.sh 200
if python bench/gpu/s74_pick.py $out/s72_tc_tables_bwd256.txt 2>&1 | tee $out/s74_pick.txt; then
  grep -n "256: Tile" src/flashtriton/kernels/configs.py | tee $out/configs_256.txt
  OUT=$out bash bench/gpu/fp32_tests.sh s74c_tests_x3 240 x3
fi
left=$(( 560 - ($(date +%s) - start) ))
echo "${left} s left"
if grep -q H200 $out/gpu.txt && [ $left -gt 120 ]; then OUT=$out bash bench/gpu/s74e.sh $left; fi
date -u +%H:%M:%S | tee $out/s74c_end.txt
