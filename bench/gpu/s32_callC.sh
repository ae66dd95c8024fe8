#!/usr/bin/env bash
# Session 32, call C (~2.5 min; prepared in session 31): the window forward with 64-key tiles (issue
# 3; prediction in bench/gpu/s32_window_bn64_ab.py's docstring). No new kernel code.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s32; mkdir -p $R
L=$R/callC.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "window BLOCK_N 64 A/B" timeout 240 python bench/gpu/s32_window_bn64_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s32-callC.tgz s32
