#!/usr/bin/env bash
# Session 22, call 4 (~3 min): host-made descriptors in the short backward (s22_bwd_desc_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 400 python s22_bwd_desc_ab.py 2>&1 | grep -v Warn | tee $OUT/bwd-desc-ab.txt)
