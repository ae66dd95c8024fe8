#!/usr/bin/env bash
# Session 8, call 3: the dropout flake probe, the GPU suite (D = 256 warp-specialized forward,
# D = 64 backward rules), the D = 256 prefill grid.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 python bench/gpu/s8_dropout_flake.py 2>&1 | grep -v Warn | tee $OUT/s8-dropout-flake.txt
timeout 230 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 256 --no-flex --graph-upto 2048 \
  --tag prefill-d256 2>&1 | grep -v Warn | tail -30
