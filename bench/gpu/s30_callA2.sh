#!/usr/bin/env bash
# Session 30, call A2: call A's wide D = 64 backward A/B again (cuDNN now timed as the grid
# times it: graph_backward_ms; the first try's backward-only capture failed), and the
# EARLY_Q route test fixed after call A.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/callA2.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "early-q route test" timeout 60 python -m pytest -o addopts="" -q -rf -p no:warnings -m gpu tests/test_fwd_gluon_window_early_q.py -k flash_attn_func_takes_early_q
step "wide bwd A/B" timeout 300 python bench/gpu/s30_fused_bwd_d64_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-callA2.tgz s30
