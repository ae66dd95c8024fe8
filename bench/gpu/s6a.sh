#!/usr/bin/env bash
# Session 6, GPU call 1: decode tests on the GPU (page boxes among them), then the
# page-16 sweep (s6_decode_boxes.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 150 python -m pytest tests/test_kvcache.py -o addopts="" -q -rf --tb=short -p no:warnings -n 8 --timeout 120 \
  -k "not cpu" > $OUT/pytest-kvcache.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-kvcache.txt | head -20; tail -1 $OUT/pytest-kvcache.txt
timeout 330 python bench/gpu/s6_decode_boxes.py 2>&1 | grep -v Warning | tee $OUT/s6-decode-boxes.txt
