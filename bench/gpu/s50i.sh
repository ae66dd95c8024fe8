#!/bin/bash
# Session 50, call 9: after the review's plan-key fix (the effective window in the fused VARLEN route's key; the
# window's unbounded side total_q + total_k): the VARLEN backward's GPU tests.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_bwd_gluon_varlen.py \
  2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -6 $OUT/pytest.txt
