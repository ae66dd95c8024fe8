#!/bin/bash
# tf32x3's block_d 256 backward on wider 1-stage tiles (s72_tc_tables.py bwd256), under a time guard. Outputs under
# $OUT.   bash bench/gpu/s73e.sh [SECONDS]
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
date -u +%H:%M:%S | tee $out/start.txt
g=${1:-200}
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout $g python bench/gpu/s72_tc_tables.py $(( g - 30 )) bwd256 2>&1 \
  | tee $out/s72_tc_tables_bwd256.txt
date -u +%H:%M:%S | tee $out/end.txt
