#!/usr/bin/env bash
# Session 22, call 5 (~2 min): host-made descriptors in the D = 128 backward beyond 1k (s22_bwd_desc_ab.py 5).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 400 python s22_bwd_desc_ab.py 5 2>&1 | grep -v Warn | tee $OUT/bwd-desc-ab5.txt)
