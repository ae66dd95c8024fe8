#!/usr/bin/env bash
# Session 12, call 6: fwd_short_masked = (64, 64, 4, 3) at D = 128 (call 5's A/B: causal
# forward 185 / 273 -> 241 / 340 TFLOP/s at N = 512 / 1k as graphs); configs.default_table.
# Prefill and mask tests on the GPU (every tuner tile now patched into every table a call
# reads), the same question from 2k (128c-long), and the D = 128 causal grid rows.
# Prediction: eager causal forward at 512 / 1k 138 / 218 -> ~150 / ~260 (host-bound at 512).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 170 python -m pytest tests/test_prefill.py tests/test_masks.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -n 12 --timeout 150 -k "not cpu" > $OUT/pytest-prefill-masks.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill-masks.txt | head -20; tail -1 $OUT/pytest-prefill-masks.txt
timeout 60 python bench/gpu/s12_fwd_short_ab.py 128c-long 2>&1 | grep -v Warn | tee $OUT/s12-fwd-128c-long.txt
timeout 100 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes --no-flex \
  --graph-upto 2048 --tag prefill-d128c-s12 2>&1 | grep -v Warning | tail -22
