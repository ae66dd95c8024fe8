#!/usr/bin/env bash
# Session 26, call 1 (prepared in session 25; ~7-8 min): the fused backward's replay
# (FUSED_REPLAYABLE, off by default) checked and timed; then the whole GPU suite (the
# session-25 changes after its call 4: plans rebinding Gluon descriptors, the dq
# accumulator kernels, the D = 64 causal fused threshold, the review's test fixes).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
echo "== replay check $(date -u +%H:%M:%S)"
timeout 150 python bench/gpu/s26_fused_replay_check.py 2>&1 | grep -v Warn
echo "== tests $(date -u +%H:%M:%S)"
timeout 420 bash bench/gpu/tests.sh
echo "== end $(date -u +%H:%M:%S)"
