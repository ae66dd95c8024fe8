#!/usr/bin/env bash
# The whole test suite on the GPU, one line per test as it finishes (so a time limit
# never hides which tests failed), failures summarised at the end. Log under $OUT.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python -m pytest tests -v -rf -p no:warnings -p no:benchmark -n 12 --timeout=300 2>&1 \
  | tee $OUT/pytest-gpu.txt | grep -E "FAILED|ERROR|passed|failed" | tail -40
