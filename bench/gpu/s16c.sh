#!/usr/bin/env bash
# Session 16, call 3: which kernels break when 3 processes share the GPU (s16_stress2.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p /tmp/q
timeout 150 python bench/gpu/s16_stress2.py quiet /tmp/q 2>&1 | grep -v Warn
for i in 1 2 3; do timeout 200 python bench/gpu/s16_stress2.py stress /tmp/q 36 > $OUT/stress2-$i.txt 2>&1 & done; wait
cat $OUT/stress2-*.txt | grep -v Warn
echo "--- one process under the same loop (control)"
timeout 100 python bench/gpu/s16_stress2.py stress /tmp/q 24 2>&1 | grep -v Warn
