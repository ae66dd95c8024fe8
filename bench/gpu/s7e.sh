#!/usr/bin/env bash
# Session 7, call 7: the masked warp-specialized backward A/B (s7_masked_ab.py), then the
# prefill and varlen GPU tests (the masked path forced in test_warp_specialized_masked_backward).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python bench/gpu/s7_masked_ab.py 2>&1 | grep -v Warn | tee $OUT/s7-masked-ab.txt
timeout 150 python -m pytest tests/test_prefill.py tests/test_varlen.py -o addopts="" -q -rf --tb=short -p no:warnings \
  -p no:benchmark -n 10 --timeout 120 -k "not cpu" > $OUT/pytest-gpu-prefill.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR|^E " $OUT/pytest-gpu-prefill.txt | head -20; tail -1 $OUT/pytest-gpu-prefill.txt
