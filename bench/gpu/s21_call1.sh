#!/usr/bin/env bash
# Prepared in session 20 for session 21's first call (~7 min): the resumed step in one
# loop (s21_one_loop_ab.py: A/B, window, profile), the delta preprocess folded into dQ
# (s21_fused_delta_ab.py), and their GPU tests with the split-path tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 300 python bench/gpu/s21_one_loop_ab.py 2>&1 | grep -v Warn | tee $OUT/one-loop-ab.txt
timeout 150 python bench/gpu/s21_fused_delta_ab.py 2>&1 | grep -v Warn | tee $OUT/fused-delta-ab.txt
timeout 120 python -m pytest tests/test_prefill.py tests/test_varlen.py -o addopts="" -q -rf -p no:warnings -n 8 \
  --timeout 100 -k "split or resume or warp_specialized_backward or fused_delta" 2>&1 | tail -3
