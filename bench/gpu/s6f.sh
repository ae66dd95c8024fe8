#!/usr/bin/env bash
# Session 6, GPU call 6: prefill / mask / varlen tests with the warp-specialized forward
# (unmasked calls) and the rows-first grid, then the A/B at D = 128 and 64.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest tests/test_prefill.py tests/test_masks.py tests/test_ops.py tests/test_determinism.py \
  tests/test_varlen.py tests/test_dropout.py -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 \
  --timeout 150 -k "not cpu" > $OUT/pytest-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill.txt | head -20; tail -1 $OUT/pytest-prefill.txt
S6_AB_DIMS=128,64 timeout 250 python bench/gpu/s6_ws_ab.py 2>&1 | grep -v Warning | tee $OUT/s6-ws-ab3.txt
