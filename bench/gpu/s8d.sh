#!/usr/bin/env bash
# Session 8, call 6: dropout forwards off the warp-specialized kernel; the backward stress
# (10 processes, gradients against FLASHTRITON_WARP_SPEC=0), the GPU suite, the dropout
# feature rows.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
BWD=1 WORKERS=10 SECONDS_EACH=40 timeout 120 python bench/gpu/s8_ws_stress.py 2>&1 | grep -v Warn | tee $OUT/s8-ws-stress-bwd.txt
timeout 230 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 150 python -m flashtriton.bench.features --cases dropout --out $OUT 2>&1 | grep -v Warn | tail -12
