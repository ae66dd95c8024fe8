#!/usr/bin/env bash
# Session 34, call B (~5 min; prepared in session 33), after call A with the same patches applied: the
# window forward's STEP_LEAN (QFREE_LATE, P32_CARRY; prediction +1-4%, 0.73-0.76x causal: the A/B's
# docstring, bench/wip/gluon-window-gap.md), its GPU tests, then its A/B (which also times the plain
# kernel at 1k / 2k / 4k and refits both cost models). Route by the docstring's rule.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
L=$OUT/callB.log
step() { echo "== $1 $(date -u +%H:%M:%S)" >> $L; shift; "$@" 2>&1 | grep -v Warn >> $L; }
step "STEP_LEAN GPU tests" timeout 150 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 \
  -m "gpu and not gpu_alone" tests/test_fwd_gluon_step_lean.py
step "STEP_LEAN A/B" timeout 180 python bench/gpu/s34_window_ab.py
echo "== end $(date -u +%H:%M:%S)" >> $L
grep -E "^\||^== |passed|failed|FAIL|Error|probe fit|fit" $L | tail -60
