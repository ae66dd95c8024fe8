#!/usr/bin/env bash
# Session 9, call 2 (branch wip/s9, prepared in session 8): the dropout kernels under load.
# The reworked dropout forward (keys inside the loop), forced: idle (row 0 of D = 256 was
# wrong in every call in session 8) and under load; then the dropout backward on bwd_ws.py
# (off by default since session 8), gradients under load, >= 500 calls a case.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 60 python bench/gpu/s8_lse_probe.py 2>&1 | grep -v Warn | tee $OUT/s9-lse-probe.txt
WORKERS=10 SECONDS_EACH=40 timeout 100 python bench/gpu/s8_ws_stress.py 2>&1 | grep -v Warn | tee $OUT/s9-ws-stress.txt
BWD=1 WORKERS=10 SECONDS_EACH=150 timeout 220 python bench/gpu/s8_ws_stress.py 2>&1 | grep -v Warn | tee $OUT/s9-ws-stress-bwd.txt
