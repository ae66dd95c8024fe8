#!/usr/bin/env bash
# Session 36, call B: the fused D = 128 / 64 causal backward's BAND order (A/B), then its GPU tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> $L
step "fused band A/B" timeout 330 python bench/gpu/s36_fused_band_ab.py
step "band tests" timeout 150 python -m pytest -q -o addopts="" -p no:warnings -n 4 tests/test_bwd_gluon_fused_band.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\| |^== |bitwise|float64|rror|passed|failed" $L | tail -40
