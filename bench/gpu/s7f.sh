#!/usr/bin/env bash
# Next session (written in session 7, not yet run; add 64 to prefill.BWD_WARP_SPEC_TILES
# and D = 64 cases to the warp-specialized backward tests first): the backward at D = 64 (s7_d64_bwd_ab.py), then its
# tests and the other warp-specialized tests on the GPU.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 70 python bench/gpu/s7_d64_bwd_ab.py 2>&1 | grep -v Warn | tee $OUT/s7-d64-bwd-ab.txt
timeout 50 python -m pytest tests/test_prefill.py tests/test_varlen.py -o addopts="" -q -rf --tb=line -p no:warnings \
  -p no:benchmark -n 10 --timeout 50 -k "warp_specialized_backward or split_backward" > $OUT/pytest-gpu-ws.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^E " $OUT/pytest-gpu-ws.txt | head; tail -1 $OUT/pytest-gpu-ws.txt
