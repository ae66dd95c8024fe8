#!/usr/bin/env bash
# Session 25, call 2 (prepared in session 24; <= 10 min): the GPU suite with the three
# patches applied. The new Gluon test files (~600 GPU cases, compile-heavy) run apart
# from the rest so that one slow part cannot take the other's time; the rest of the
# suite (tests.sh without them) in call 3 if this one runs long.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
out=$OUT
timeout 560 python -m pytest tests/test_fwd_gluon.py tests/test_bwd_gluon.py tests/test_bwd_gluon_dq.py \
  tests/test_gluon_schedule.py -o addopts="" -q -rf -p no:warnings -n 10 --timeout 200 \
  > $out/pytest-gluon.txt 2>&1
grep -E "FAILED|ERROR|passed|failed" $out/pytest-gluon.txt | grep -v "^\[gw" | tail -25
