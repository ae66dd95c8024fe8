#!/usr/bin/env bash
# Session 22, call 11 (the last ~300 device seconds): bwd.py's dK/dV as two launches at
# D = 256 up to 2k (s22_dkdv_parts_ab.py --quick).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 200 python s22_dkdv_parts_ab.py --quick 2>&1 | grep -v Warn | tee $OUT/dkdv-parts-ab.txt)
