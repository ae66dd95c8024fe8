#!/usr/bin/env bash
# Session 22, call 7 (~3 min): the window backward's tiles with host-made descriptors,
# FlexAttention in the same process (s22_window_tiles_ab.py).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
(cd bench/gpu && timeout 300 python s22_window_tiles_ab.py 2>&1 | grep -v Warn | tee $OUT/window-tiles-ab.txt)
