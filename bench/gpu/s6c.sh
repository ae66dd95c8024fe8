#!/usr/bin/env bash
# Session 6, GPU call 3: the Hopper warp-specialization probe (s6_ws_probe.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout 400 python bench/gpu/s6_ws_probe.py 2>&1 | grep -v Warning | tee $OUT/s6-ws-probe.txt
