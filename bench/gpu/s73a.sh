#!/bin/bash
# Session 73's first GPU call: session 72's queued call (bench/gpu/s72e.sh: the tf32 GPU tests, now with tf32's
# block_d 256 forward at 128 x 64 x 8 s1; the fp32 tests under x3; call4 and bd64 timings), then the features
# float32 row on the shipped tables. Outputs under $OUT.   bash bench/gpu/s73a.sh [TESTS_GUARD_S]
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
start=$(date +%s)
date -u +%H:%M:%S | tee $out/start.txt
bash bench/gpu/s72e.sh ${1:-200}
left=$(( 560 - ($(date +%s) - start) ))
echo "features: ${left} s left"
if [ $left -gt 40 ]; then
  PYTHONPATH=$PWD/src timeout $left python -m flashtriton.bench.features --cases float32 --rounds 3 --no-flex \
    --out $out/features_fp32 2>&1 | tail -25
fi
date -u +%H:%M:%S | tee $out/end.txt
