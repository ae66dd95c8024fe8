#!/usr/bin/env bash
# Session 16, call 6: the whole GPU suite on the flat-descriptor tree, then the rare
# corrupted outputs under 3 processes (call 5: one persistent call of ~1100 had NaN rows):
# which kernels, which tiles, NaN or finite.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 250 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
export S16_CASE=d128-nc-2k
mkdir -p /tmp/q6
timeout 100 python bench/gpu/s16_stress2.py quiet /tmp/q6 2>&1 | grep -v Warn
for i in 1 2 3; do timeout 150 python bench/gpu/s16_stress2.py stress /tmp/q6 100 > $OUT/stress6-$i.txt 2>&1 & done; wait
cat $OUT/stress6-*.txt | grep -v Warn
