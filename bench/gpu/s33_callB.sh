#!/usr/bin/env bash
# Session 33, call B (~7 min; prepared in session 32): the window forward's longest-first deal and
# SPLIT_Q (issue 3; bench/wip/gluon-window-opt.md): GPU tests (SPLIT_Q changes the barrier
# protocol: a hang shows as a test timeout), then the A/B with the per-block cost probe
# (prediction and routing rule in bench/gpu/s33_window_opt_ab.py's docstring).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s33; mkdir -p $R
L=$R/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "window opt GPU tests" timeout 300 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 \
  -m gpu tests/test_fwd_gluon_window_opt.py
step "window opt A/B" timeout 230 python bench/gpu/s33_window_opt_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s33-callB.tgz s33
