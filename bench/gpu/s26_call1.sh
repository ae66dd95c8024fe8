#!/usr/bin/env bash
# Session 26, call 1 (~9 min; the session-25 plan's calls 1 and 3 merged to save a cold
# start): the fused backward's replay (FUSED_REPLAYABLE, off by default) checked and timed;
# then the two dropout kernels (patches applied at c013248): smokes (a hang = a barrier
# bug: the last line is its "launching"), their GPU tests, their A/Bs. Each step under its
# own timeout (sum 570 s), the log written as it goes; the whole suite runs in call 2.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/call1.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "replay check" timeout 110 python bench/gpu/s26_fused_replay_check.py
step "fwd dropout smoke" timeout 90 python bench/gpu/s26_gluon_dropout_fwd_ab.py smoke
step "bwd dropout smoke" timeout 90 python bench/gpu/s26_gluon_fused_dropout_ab.py smoke
step "tests" timeout 120 python -m pytest tests/test_fwd_gluon.py tests/test_bwd_gluon.py -o addopts="" -q -rf \
  -p no:warnings -n 8 -m gpu -k dropout
step "fwd dropout ab" timeout 75 python bench/gpu/s26_gluon_dropout_fwd_ab.py ab
step "bwd dropout ab" timeout 85 python bench/gpu/s26_gluon_fused_dropout_ab.py ab
echo "== end $(date -u +%H:%M:%S)" >> $L
tail -c 11000 $L
