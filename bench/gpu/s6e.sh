#!/usr/bin/env bash
# Session 6, GPU call 5: prefill tests with the unmasked warp-specialized forward, the
# masking probe, and the A/B of the warp-specialized forward (D = 128 rows).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 200 python -m pytest tests/test_prefill.py tests/test_masks.py tests/test_ops.py tests/test_determinism.py \
  -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 -k "not cpu" > $OUT/pytest-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-prefill.txt | head -20; tail -1 $OUT/pytest-prefill.txt
timeout 100 python bench/gpu/s6_ws_mask_probe.py 2>&1 | grep -v Warning | tee $OUT/s6-ws-mask-probe.txt
S6_AB_DIMS=128 timeout 150 python bench/gpu/s6_ws_ab.py 2>&1 | grep -v Warning | tee $OUT/s6-ws-ab2.txt
