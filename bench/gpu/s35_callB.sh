#!/usr/bin/env bash
# Session 35, call B: the D = 256 causal dQ pass's launch order (BAND), then the dQ kernel's GPU tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "dq band A/B" timeout 240 python bench/gpu/s35_dq_band_ab.py
step "dq tests" timeout 200 python -m pytest -q -o addopts="" -x tests/test_bwd_gluon_dq.py -k "gpu"
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\| |^== |bitwise|rror|passed|failed" $L | tail -40
