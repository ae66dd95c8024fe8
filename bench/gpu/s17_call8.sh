#!/usr/bin/env bash
# Session 17, call 8: one process alone gave NaN in 5 of 293 calls (call 7). Which part?
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 70 python bench/gpu/s17_ws_off_stress.py 50 2>&1 | grep -v Warn
