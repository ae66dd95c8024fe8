#!/bin/bash
# Session 74, on the warm H100 after s74c.sh: tf32x3's block_d 256 dK dV sweep (s72_tc_tables.py dkdv256); a >= 3%
# winner goes into this copy's DEFAULTS_FP32_X3 (s74_pick.py) and the fp32 selection under x3 runs on it.
#   bash bench/gpu/s74d.sh        outputs under $OUT
export PYTHONUNBUFFERED=1
set -o pipefail   # the pick's exit status, not tee's, decides whether the tests run (session 74 fix)
out=${OUT:-/tmp}
date -u +%H:%M:%S | tee $out/s74d_start.txt
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 200 python bench/gpu/s72_tc_tables.py 170 dkdv256 2>&1 \
  | tee $out/s72_tc_tables_dkdv256.txt
if python bench/gpu/s74_pick.py $out/s72_tc_tables_dkdv256.txt 2>&1 | tee $out/s74_pick.txt; then
  grep -n "DEFAULTS_FP32_TC\[\"d" src/flashtriton/kernels/configs.py | tee $out/configs_x3.txt
  OUT=$out bash bench/gpu/fp32_tests.sh s74d_tests_x3 200 x3
fi
date -u +%H:%M:%S | tee $out/s74d_end.txt
