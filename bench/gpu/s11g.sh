#!/usr/bin/env bash
# Session 11, call 7: D = 64 masked calls take the query-rows dK/dV (64, 64, 4, 3). The prefill,
# mask, varlen and dropout tests on the GPU, and the D = 64 bf16 grid (no Flex).
# Prediction: D = 64 causal backward +4-9% at 512-4k (2k: 208 -> ~225, FA2 222).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 170 python -m pytest tests/test_prefill.py tests/test_masks.py tests/test_varlen.py tests/test_dropout.py -o addopts="" \
  -q -rf --tb=short -p no:warnings -n 12 --timeout 140 -k "not cpu" > $OUT/pytest-d64.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-d64.txt | head -20; tail -1 $OUT/pytest-d64.txt
timeout 110 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --causal yes --no-flex --graph-upto 0 \
  --tag prefill-d64-s11 2>&1 | grep -v Warning | tail -12
