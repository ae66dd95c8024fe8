#!/bin/bash
# Session 74's first GPU call: the queued tf32x3 block_d 256 backward sweep (s73e.sh), then call4 (the block_d 256
# forward tiles, so far timed on the H100 only) and the features float32 row on the shipped tables, on an H200 only.
# Outputs under $OUT.   bash bench/gpu/s74a.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
start=$(date +%s)
date -u +%H:%M:%S | tee $out/s74a_start.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee $out/gpu.txt
OUT=$out bash bench/gpu/s73e.sh 200
# call4 and the features row were timed on an H100 in session 73; they are wanted on an H200 only.
if ! grep -q H200 $out/gpu.txt; then date -u +%H:%M:%S | tee $out/s74a_end.txt; exit 0; fi
PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 100 python bench/gpu/s72_tc_tables.py 70 call4 2>&1 \
  | tee $out/s72_tc_tables_call4.txt
left=$(( 560 - ($(date +%s) - start) ))
echo "features: ${left} s left"
if [ $left -gt 40 ]; then
  PYTHONPATH=$PWD/src timeout $left python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
    --out $out/features_fp32 2>&1 | tail -25
fi
date -u +%H:%M:%S | tee $out/s74a_end.txt
