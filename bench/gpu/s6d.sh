#!/usr/bin/env bash
# Session 6, GPU call 4: the whole GPU test suite with the warp-specialized forward on
# (the default on Hopper), then its A/B against the previous forward and cuDNN / FA2.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 230 python -m pytest tests -o addopts="" -v -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 250 python bench/gpu/s6_ws_ab.py 2>&1 | grep -v Warning | tee $OUT/s6-ws-ab.txt
