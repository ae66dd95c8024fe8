#!/usr/bin/env bash
# Session 15, call 7: the snake deal of the persistent fwd_ws.py: its tests on the GPU, the
# masked A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short \
  -p no:warnings -p no:benchmark -n 10 --timeout 150 -k "persistent or warp_specialized_forward or warp_spec" > $OUT/pytest-snake.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-snake.txt | head -20; tail -1 $OUT/pytest-snake.txt
timeout 300 python bench/gpu/s15_persistent_variants_ab.py snake 2>&1 | grep -v Warn | tee $OUT/s15-persistent-snake.txt
