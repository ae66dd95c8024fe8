#!/bin/bash
# Session 71's fifth GPU call: the tensor-core fp32 tile sweep at D = 64 / 128 (call 4 hit an illegal memory access
# at D = 192 with 8-warp 16-row tiles, which poisoned the process: those are left out), then the features table's
# float32 row with tf32x3. Outputs under $OUT.
#   bash bench/gpu/s71d.sh
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
S71_DS="64 128" PYTHONPATH=$PWD/src:$PWD/tests:$PWD/bench/gpu timeout 200 python bench/gpu/s71_x3_tiles.py 170 2>&1 \
  | tee $out/s71_x3_tiles_d64_128.txt
PYTHONPATH=$PWD/src timeout 150 python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
  --out $out/feat 2>&1 | tail -9
