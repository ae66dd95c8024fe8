#!/usr/bin/env bash
# Session 20, call 3 (~4 min): does the split backward (halved resumed tiles) pay at
# shorter causal sequences and at D = 64 (s20_split_short_ab.py)?
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 400 python bench/gpu/s20_split_short_ab.py 2>&1 | grep -v Warn | tee $OUT/split-short-ab.txt
