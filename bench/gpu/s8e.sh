#!/usr/bin/env bash
# Session 8, call 7: the causal warp-specialized forward (fwd_ws.py CAUSAL): its A/B, then the
# GPU suite (run with -n 10, i.e. under load).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 80 python bench/gpu/s8_causal_ws_ab.py 2>&1 | grep -v Warn | tee $OUT/s8-causal-ws-ab.txt
timeout 200 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
