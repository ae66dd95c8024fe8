#!/usr/bin/env bash
# Session 22, call 1 (~4 min): the short forwards' host time and kernels (s22_short_fwd_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
(cd bench/gpu && timeout 420 python s22_short_fwd_ab.py 2>&1 | grep -v Warn | tee $OUT/short-fwd-ab.txt)
