#!/usr/bin/env bash
# (Record of the call: the tail="loop" decode option (bench/gpu/s4_decode_tail.py) and
# FLASHTRITON_DROPOUT_HASH_COLUMNS it timed were removed after it; see bench/NOTES.md.)
# Session 4, GPU call 3: dropout key loads issued before the dots (A/B against hashing
# the column keys in the forward), the decode tail in the pipelined loop, and the tests
# of both.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 14 --timeout 120 \
  -k "not cpu and (dropout or kvcache)" > $OUT/pytest-s4c.txt 2>&1
echo "pytest rc=$?"; grep -E "FAILED|ERROR|Error" $OUT/pytest-s4c.txt | head -20; tail -2 $OUT/pytest-s4c.txt
timeout 100 python bench/gpu/s4_decode_tail.py 2>&1 | grep -v Warning
for h in 0 1; do
  echo "FLASHTRITON_DROPOUT_HASH_COLUMNS=$h"
  FLASHTRITON_DROPOUT_HASH_COLUMNS=$h timeout 90 python -m flashtriton.bench.features --cases dropout --out $OUT/feat$h 2>&1 | grep -v Warning | grep -E "^\| (dropout)|Error|error" | cut -c1-250
done
