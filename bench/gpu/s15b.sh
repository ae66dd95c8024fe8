#!/usr/bin/env bash
# Session 15, call 4: the direct launch actually taken (plans._no_launch_hooks): plan and
# decode tests on the GPU, the host A/B, the eager-decode probe again.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_plans.py tests/test_kvcache.py tests/test_ops.py -o addopts="" -q -rf --tb=short \
  -p no:warnings -p no:benchmark -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-plans.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-plans.txt | head -20; tail -1 $OUT/pytest-plans.txt
timeout 200 python bench/gpu/s15_direct_ab.py 2>&1 | grep -v Warn | tee $OUT/s15-direct-ab.txt
timeout 120 python bench/gpu/s14_decode_eager.py 2>&1 | grep -v Warn | tee $OUT/s15-decode-eager-b.txt
