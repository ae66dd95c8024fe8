#!/usr/bin/env bash
# Session 18, call 4 (~7 min): the GPU suite again with FLASHTRITON_GPU_SHARED=0 (tests/
# conftest.py: call 3's three failures were the sharing guard taking the warp-specialized
# kernels away from the suite's parallel workers), then the full decode bench (eager rows
# after session 17's kvcache host change).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 10 --timeout 150 -k "not cpu" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest.txt | head -20; tail -1 $OUT/pytest.txt
timeout 220 python -m flashtriton.bench.decode --out $OUT/decode 2>&1 | grep -v Warn | tail -40
