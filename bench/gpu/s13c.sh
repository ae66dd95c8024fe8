#!/usr/bin/env bash
# Session 13, call 3: D = 64 causal forward tile (64, 64, 4, 3) taken: prefill and mask tests,
# the D = 64 causal grid rows; tile A/Bs (bench/gpu/s13_tiles_ab.py). ~7 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest tests/test_prefill.py tests/test_masks.py -o addopts="" -q -rf --tb=short \
  -p no:warnings -p no:benchmark -n 10 --timeout 120 -k "not cpu" > $OUT/pytest-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill.txt | head -20; tail -1 $OUT/pytest-prefill.txt
timeout 150 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --causal yes --no-flex \
  --graph-upto 2048 --tag prefill-d64c-s13 2>&1 | grep -v Warn | tail -12
timeout 250 python bench/gpu/s13_tiles_ab.py fwd128 fwd256 window 2>&1 | grep -v Warn | tee $OUT/s13-tiles-ab.txt
