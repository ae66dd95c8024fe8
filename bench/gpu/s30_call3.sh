#!/usr/bin/env bash
# Session 30, call 3 (~6.5 min; prepared in session 29, after the bench/wip patches are
# applied): the causal D = 64 three-consumer forward A/B, the window forward's EARLY_Q A/B
# (issue 3) and its GPU tests (also in call 1's suite: here again only if call 1 failed them).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "causal 3wg A/B" timeout 200 env S30_N=2048,4096,16384 python bench/gpu/s30_gluon_causal_3wg_ab.py
step "window EARLY_Q A/B" timeout 260 python bench/gpu/s30_gluon_window_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 9000 $L
cd $OUT && tar czf s30-call3.tgz s30
