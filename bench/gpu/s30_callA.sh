#!/usr/bin/env bash
# Session 30, call A (~8 min; replaces s30_call1/2, which would not fit with the fourth
# patch, fused-bwd-d128, in the 30-minute budget): the four applied patches' GPU tests (the
# whole suite runs after routing, call C), then the wide D = 64 fused backward A/B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s30; mkdir -p $R
L=$R/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "patch GPU tests" timeout 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 10 --timeout 150 -m "gpu and not gpu_alone" \
  tests/test_fwd_gluon_causal_3wg.py tests/test_bwd_gluon_wide.py tests/test_fwd_gluon_window_early_q.py tests/test_bwd_gluon_defer.py tests/test_fwd_gluon_3wg.py
step "wide bwd A/B" timeout 320 python bench/gpu/s30_fused_bwd_d64_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s30-callA.tgz s30
