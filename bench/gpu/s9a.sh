#!/usr/bin/env bash
# Session 9, call 1 (branch wip/s9, prepared in session 8): the MASKED forward on windows
# (A/B and stress), the D = 64 forward tile A/B, then the GPU suite (its forced tests run the
# window and dropout variants on the GPU for the first time). The dropout stress: s9b.sh.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 python bench/gpu/s9_window_ws_ab.py 2>&1 | grep -v Warn | tee $OUT/s9-window-ws-ab.txt
timeout 90 python bench/gpu/s9_d64_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/s9-d64-fwd-ab.txt
WORKERS=10 SECONDS_EACH=40 timeout 100 python bench/gpu/s9_masked_stress.py 2>&1 | grep -v Warn | tee $OUT/s9-masked-stress.txt
timeout 220 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
