#!/usr/bin/env bash
# Session 10, call 4 (final tree): the launch-path micro-benchmark, the dropout timing
# (D = 256 hashing per tile again), the feature benchmark's dropout rows, the GPU suite.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 60 python bench/gpu/s10_launch.py 2>&1 | grep -v Warn | tee $OUT/s10-launch.txt
TIMING_ONLY=1 timeout 120 python bench/gpu/s10_dropout.py 2>&1 | grep -v Warn | grep "^fwd " | tee $OUT/s10-dropout-timing-4.txt
timeout 120 python -m flashtriton.bench.features --cases dropout --out $OUT 2>&1 | grep -v Warn | grep "^| dropout\|^| determ"
timeout 240 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
