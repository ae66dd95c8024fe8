#!/bin/bash
# Session 50, call 8: the window route's default table (policy.GLUON_BWD_FUSED_VARLEN_MIN_N["window"]) on the GPU:
# the VARLEN backward's tests (its route test now expects windows routed) and the varlen suite.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_bwd_gluon_varlen.py \
  tests/test_varlen.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -6 $OUT/pytest.txt
