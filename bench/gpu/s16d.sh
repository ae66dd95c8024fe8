#!/usr/bin/env bash
# Session 16, call 5: call 3's stress again, comparing (out, lse) of our kernels.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 S16_LSE=1
mkdir -p /tmp/q5
timeout 100 python bench/gpu/s16_stress2.py quiet /tmp/q5 2>&1 | grep -v Warn
for i in 1 2 3; do timeout 150 python bench/gpu/s16_stress2.py stress /tmp/q5 30 > $OUT/stress5-$i.txt 2>&1 & done; wait
cat $OUT/stress5-*.txt | grep -v Warn
