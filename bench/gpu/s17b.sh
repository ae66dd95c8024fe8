#!/usr/bin/env bash
# Session 17, second GPU call: backward TFLOP/s, one tile a program against persistent
# (TILE_STAGES 2 and 1), D = 128 and 64, N = 512 ... 16k, plain and causal (split path).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 560 python bench/gpu/s17_bwd_persistent_ab.py ab 2>&1 | grep -v Warn | tee $OUT/ab.txt
