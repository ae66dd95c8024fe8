#!/usr/bin/env bash
# Session 36, call A: the D = 256 causal split backward with the dQ kernel's BAND order (whole backwards),
# then the split path's GPU tests (the new band test included).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> $L
step "band A/B" timeout 330 python bench/gpu/s36_d256_dq_band_ab.py
step "split tests" timeout 200 python -m pytest -q -o addopts="" -x tests/test_bwd_gluon_d256_split.py -k "gpu or band"
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\| |^== |bitwise|finite|rror|passed|failed" $L | tail -40
