#!/usr/bin/env bash
# Session 31, call A (~7 min; prepared in session 30). FIRST, on the local machine:
#   git am -3 bench/wip/fused-bwd-d64-dqm.patch bench/wip/gluon-window-lean-mask.patch
# (this order; both switches off), their CPU tests, commit. Then: both patches' GPU tests and
# session 30's review tests (the D = 64 window split cases, the compile guards), then the two
# A/Bs (predictions in their docstrings).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s31; mkdir -p $R
L=$R/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "patch GPU tests" timeout 150 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 120 \
  -m "gpu and not gpu_alone" tests/test_bwd_gluon_dqm.py tests/test_fwd_gluon_window_lean_mask.py
step "review tests (s30)" timeout 90 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 80 \
  tests/test_prefill.py tests/test_fwd_gluon_3wg.py -k "split_backward or compile_guards or pointer_loads or grid_limit"
step "dqm A/B (D = 64 wide fused backward)" timeout 220 python bench/gpu/s31_fused_bwd_dqm_ab.py
step "lean-mask A/B (window forward)" timeout 170 python bench/gpu/s31_window_lean_mask_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s31-callA.tgz s31
