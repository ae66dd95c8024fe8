#!/usr/bin/env bash
# Prepared in session 17: session 18's first call. Single-process long stresses of every
# warp-specialized kind the default takes, and of the capped D = 128 16k backward, with
# the NaN located (bench/NOTES.md "Session 17", next GPU session item 1-2). ~9 minutes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 560 python bench/gpu/s18_long_stress.py 40 128:16384:0:0:uncap 128:8192:0:0:uncap 128:4096:0:0 \
  128:2048:0:0 128:4096:1:0 128:4096:0:0.1 64:16384:0:0 64:2048:0:0 64:16384:1:0 256:16384:1:0 2>&1 \
  | grep -v Warn | tee $OUT/long-stress.txt
