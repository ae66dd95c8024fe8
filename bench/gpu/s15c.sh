#!/usr/bin/env bash
# Session 15: the persistent fwd_ws.py in the library - its tests and the forward tests on
# the GPU, the variants A/B, and the D = 128 non-causal grid rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest tests/test_prefill.py tests/test_plans.py tests/test_dropout.py -o addopts="" -q -rf --tb=short \
  -p no:warnings -p no:benchmark -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-persistent.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-persistent.txt | head -20; tail -1 $OUT/pytest-persistent.txt
timeout 300 python bench/gpu/s15_persistent_variants_ab.py 2>&1 | grep -v Warn | tee $OUT/s15-persistent-variants.txt
