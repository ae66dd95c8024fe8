#!/usr/bin/env bash
# Prepared in session 20 for session 21's first call (~5 min): the resumed step in one
# loop (s21_one_loop_ab.py: A/B, window, profile), its GPU test, the split-path tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 300 python bench/gpu/s21_one_loop_ab.py 2>&1 | grep -v Warn | tee $OUT/one-loop-ab.txt
timeout 200 python -m pytest tests/test_prefill.py -o addopts="" -q -rf -p no:warnings -n 8 --timeout 150 \
  -k "split or resume or warp_specialized_backward" 2>&1 | tail -3
