#!/usr/bin/env bash
# Session 30, call 3 (~4 min; prepared in session 29, after bench/wip/gluon-window-lever.patch
# is applied): the window forward's EARLY_Q A/B (issue 3) and its GPU tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "window EARLY_Q A/B" timeout 200 python bench/gpu/s30_gluon_window_ab.py
step "EARLY_Q tests" timeout 120 python -m pytest -q -o addopts="" -p no:warnings -n 8 -m gpu tests/test_fwd_gluon_window_early_q.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
cd $OUT && tar czf s30-call3.tgz s30
