#!/usr/bin/env bash
# Session 33, call F (~6.5 min, the device time left): the two helpers' offline levers, A/B first (they
# decide), then their GPU tests. (1) VEC_STAGE, the fused D = 128 backward's lse / delta staged with
# one barrier (9 -> 7 BAR.SYNC a tile; bench/gpu/s33_bwd128_ab.py, prediction in its docstring);
# (2) the window forward's EPI_DEFER / Q_PREFETCH (bench/gpu/s33_window_f_ab.py, the F probe off).
# Needs bench/wip/gluon-bwd128-s33.patch and gluon-window-f.patch applied (git am -3); both measured slower
# in session 33 and reverted (bench/NOTES.md, "Session 33", call F).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callF.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "VEC_STAGE A/B" timeout 160 python bench/gpu/s33_bwd128_ab.py
step "window F A/B" env S33F_PROBE=0 timeout 110 python bench/gpu/s33_window_f_ab.py
step "VEC_STAGE GPU tests" timeout 70 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 60 \
  -m "gpu and not gpu_alone" tests/test_bwd_gluon_vec_stage.py
step "window F GPU tests" timeout 70 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 60 \
  -m "gpu and not gpu_alone" tests/test_fwd_gluon_window_f.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\||^== |passed|failed|FAIL|Error" $L | tail -60
