#!/usr/bin/env bash
# Session 9, call 1 (branch wip/s9, prepared in session 8): the MASKED forward on windows
# (A/B and stress), the D = 64 forward tile A/B, the reworked dropout forward (lse probe and
# stress: both force FLASHTRITON_WARP_SPEC=1), then the GPU suite (its forced tests run the
# window and dropout variants on the GPU for the first time).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 120 python bench/gpu/s9_window_ws_ab.py 2>&1 | grep -v Warn | tee $OUT/s9-window-ws-ab.txt
timeout 90 python bench/gpu/s9_d64_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/s9-d64-fwd-ab.txt
WORKERS=10 SECONDS_EACH=40 timeout 100 python bench/gpu/s9_masked_stress.py 2>&1 | grep -v Warn | tee $OUT/s9-masked-stress.txt
# the reworked dropout forward (keys inside the loop), forced: idle (row 0 of D = 256 was
# wrong every call in session 8) and under load
timeout 60 python bench/gpu/s8_lse_probe.py 2>&1 | grep -v Warn | tee $OUT/s9-lse-probe.txt
WORKERS=10 SECONDS_EACH=40 timeout 100 python bench/gpu/s8_ws_stress.py 2>&1 | grep -v Warn | tee $OUT/s9-ws-stress.txt
# the dropout backward on bwd_ws.py (off by default since session 8): gradients under load,
# long enough for >= 500 calls a case (session 8 ran 10-20)
BWD=1 WORKERS=10 SECONDS_EACH=150 timeout 220 python bench/gpu/s8_ws_stress.py 2>&1 | grep -v Warn | tee $OUT/s9-ws-stress-bwd.txt
timeout 220 python -m pytest tests -o addopts="" -q -rf --tb=short -p no:warnings -p no:benchmark -n 10 --timeout 150 \
  -k "not cpu" > $OUT/pytest-gpu.txt 2>&1
echo "pytest rc=$?"; grep -E "^FAILED|^ERROR" $OUT/pytest-gpu.txt | head -20; tail -1 $OUT/pytest-gpu.txt
