#!/usr/bin/env bash
# Prepared in session 39 (offline) for session 40: ONE_LOOP (bench/wip/gluon-fwd-one-loop.patch applied first:
# `git am -3 bench/wip/gluon-fwd-one-loop.patch`). GPU tests, then the A/B (bench/gpu/s40_one_loop_ab.py, its
# prediction and routing rule in the docstring). Logs under $OUT.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; out=${OUT:-/tmp}
timeout 200 python -m pytest -q -o addopts="" -p no:warnings -m gpu -x tests/test_fwd_gluon_one_loop.py \
  > $out/s40_one_loop_tests.txt 2>&1; echo "tests rc $?"; tail -3 $out/s40_one_loop_tests.txt
timeout 330 python bench/gpu/s40_one_loop_ab.py > $out/s40_one_loop_ab.txt 2>&1; echo "ab rc $?"
grep -E "^\||WRONG|differ|Error" $out/s40_one_loop_ab.txt | cut -c1-400
