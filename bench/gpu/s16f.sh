#!/usr/bin/env bash
# Session 16, call 7: the persistent tests with the deal rule, then the deal A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 100 python -m pytest tests/test_prefill.py -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark \
  -n 4 --timeout 90 -k "persistent or warp_spec" 2>&1 | tail -3
timeout 300 python bench/gpu/s16_deal_ab.py 2>&1 | grep -v Warn | tee $OUT/deal-ab.txt
