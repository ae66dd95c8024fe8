#!/usr/bin/env bash
# Session 32, call A (~6 min; prepared in session 31). FIRST, on the local machine:
#   git am -3 bench/wip/gluon-fwd-d256.patch      (the D = 256 Gluon forward, not routed)
# its CPU tests (tests/test_fwd_gluon_d256.py, tests/test_fwd_gluon.py), commit. Then here: its GPU
# tests (45; SPLIT_EMPTY has never run: a hang shows as the step's timeout), then its A/B
# (prediction and routing rule in the script's docstring). Session 32 added call C's window
# BLOCK_N 64 A/B here (one cold start fewer); the step timeouts sum to 580 s.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s32; mkdir -p $R
L=$R/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "D = 256 Gluon forward GPU tests" timeout 170 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 \
  -m "gpu and not gpu_alone" tests/test_fwd_gluon_d256.py
step "D = 256 Gluon forward A/B" timeout 230 python bench/gpu/s32_gluon_fwd_d256_ab.py
step "window BLOCK_N 64 A/B" timeout 180 python bench/gpu/s32_window_bn64_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s32-callA.tgz s32
