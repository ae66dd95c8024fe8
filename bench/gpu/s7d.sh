#!/usr/bin/env bash
# Session 7, call 5: the GPU tests with the varlen warp-specialized forward and backward
# (kernels/fwd_ws_varlen.py, bwd_ws_varlen.py), then the feature rows (varlen, window,
# dropout) and the varlen rows again with FLASHTRITON_WARP_SPEC=0 (fwd.py / bwd.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 220 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 130 python -m flashtriton.bench.features --cases varlen window dropout --out $OUT 2>&1 | grep -v Warning \
  | grep -E "^\| (varlen|dropout|determ|window)|Error|error" | cut -c1-200
mkdir -p $OUT/ws0
FLASHTRITON_WARP_SPEC=0 timeout 60 python -m flashtriton.bench.features --cases varlen --out $OUT/ws0 2>&1 | grep -v Warning \
  | grep -E "^\| varlen|Error|error" | cut -c1-200
