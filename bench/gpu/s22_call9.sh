#!/usr/bin/env bash
# Session 22, call 9 (~1 min): D = 64 causal short backward with in-kernel dK/dV descriptors (s22_bwd_desc_ab.py 6).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 400 python s22_bwd_desc_ab.py 6 2>&1 | grep -v Warn | tee $OUT/bwd-desc-ab6.txt)
