#!/usr/bin/env bash
# Session 26, call 3 (prepared in session 25; <= 10 min). First apply the dropout patches here:
#   git am -3 bench/wip/gluon-fwd-dropout.patch bench/wip/gluon-fused-dropout.patch
# Then: each kernel's smoke (a hang = a barrier bug: the last line is its "launching"),
# their GPU tests, their A/Bs. Each step under its own timeout, the log written as it goes.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/call3.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "fwd dropout smoke" timeout 150 python bench/gpu/s26_gluon_dropout_fwd_ab.py smoke
step "bwd dropout smoke" timeout 150 python bench/gpu/s26_gluon_fused_dropout_ab.py smoke
step "tests" timeout 200 python -m pytest tests/test_fwd_gluon.py tests/test_bwd_gluon.py -o addopts="" -q -rf \
  -p no:warnings -n 8 -m gpu -k dropout
step "fwd dropout ab" timeout 120 python bench/gpu/s26_gluon_dropout_fwd_ab.py ab
step "bwd dropout ab" timeout 150 python bench/gpu/s26_gluon_fused_dropout_ab.py ab
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 8000 $L
