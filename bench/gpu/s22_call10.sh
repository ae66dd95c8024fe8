#!/usr/bin/env bash
# Session 22, call 10 (~3 min): the short causal backward's bwd.py tiles (s22_short_bwd_tiles_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 230 python s22_short_bwd_tiles_ab.py 2>&1 | grep -v Warn | tee $OUT/short-bwd-tiles-ab.txt)
