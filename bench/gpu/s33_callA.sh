#!/usr/bin/env bash
# Session 33, call A (~6 min; prepared in session 32). FIRST, locally:
#   git am -3 bench/wip/gluon-bwd-d256-opt.patch bench/wip/gluon-window-opt.patch
# their CPU tests (tests/test_bwd_gluon_d256.py, tests/test_fwd_gluon*.py), commit. Then here: the D = 256
# backward's schedule switches (dq_pipe / vec_early / p_early / dq_rs / dq_defer; off by default,
# the routed kernel's SASS unchanged): their smoke + A/B (prediction and routing rule in
# bench/gpu/s33_gluon_bwd_d256_opt_ab.py's docstring), then their GPU tests.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
R=$OUT/s33; mkdir -p $R
L=$R/callA.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "D = 256 backward switches A/B (smoke first)" timeout 260 python bench/gpu/s33_gluon_bwd_d256_opt_ab.py
step "D = 256 backward GPU tests" timeout 280 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 \
  --timeout 150 -m "gpu and not gpu_alone" tests/test_bwd_gluon_d256.py
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
cd $OUT && tar czf s33-callA.tgz s33
