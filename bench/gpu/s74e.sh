#!/bin/bash
# Session 74's H200 call (short budget): call4 (the block_d 256 forward tiles, timed on the H100 only) and the
# features float32 row on today's tables, under a time guard.   bash bench/gpu/s74e.sh [SECONDS]   outputs: $OUT
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
start=$(date +%s)
g=${1:-230}
date -u +%H:%M:%S | tee $out/s74e_start.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee $out/gpu.txt
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 90 python bench/gpu/s72_tc_tables.py 60 call4 2>&1 \
  | tee $out/s72_tc_tables_call4.txt
left=$(( g - ($(date +%s) - start) ))
echo "features: ${left} s left"
if [ $left -gt 40 ]; then
  PYTHONPATH=$PWD/src timeout $left python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
    --out $out/features_fp32 2>&1 | tail -25
fi
date -u +%H:%M:%S | tee $out/s74e_end.txt
