#!/usr/bin/env bash
# Session 8, call 2: the GPU suite with D = 64's (128, 128) warp-specialized backward tiles,
# the D = 256 warp-specialized forward probe, and the D = 64 prefill grid.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 100 python bench/gpu/s8_d256_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/s8-d256-fwd-ab.txt
timeout 220 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --no-flex --graph-upto 2048 \
  --tag prefill-d64 2>&1 | grep -v Warn | tail -30
