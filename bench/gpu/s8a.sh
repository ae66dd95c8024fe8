#!/usr/bin/env bash
# Session 8, call 1 (branch wip/s8: D = 64 in BWD_WARP_SPEC_TILES): the GPU suite (it
# includes test_warp_specialized_varlen_in_cuda_graph, written after session 7's last
# run), the D = 64 warp-specialized backward A/B, and the masked dK/dV probe.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 220 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
timeout 100 python bench/gpu/s7_d64_bwd_ab.py 2>&1 | grep -v Warn | tee $OUT/s8-d64-bwd-ab.txt
timeout 100 python bench/gpu/s8_dkdv_mask_probe.py 2>&1 | grep -v Warn | tee $OUT/s8-dkdv-mask-probe.txt
