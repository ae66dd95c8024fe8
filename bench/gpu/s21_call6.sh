#!/usr/bin/env bash
# Session 21, call 6 (~6 min): the GPU suite on the session's final tree, then the split
# path's reach (s21_split_reach_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-compute-apps=pid,name --format=csv
timeout 330 bash bench/gpu/tests.sh 2>&1 | tail -8
(cd bench/gpu && timeout 120 python s21_split_reach_ab.py 2>&1 | grep -v Warn | tee $OUT/split-reach-ab.txt)
