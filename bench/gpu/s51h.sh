#!/bin/bash
# Session 51, call 10: the final code (after the review) on the suites the session touched: the Gluon VARLEN /
# PAGED forward files, the VARLEN backward file, varlen, paged varlen, dropout, plans, ops, determinism.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 280 python -m pytest -o addopts="" -q -p no:warnings -n 12 --timeout 200 tests/test_fwd_gluon_varlen.py \
  tests/test_fwd_gluon_paged.py tests/test_bwd_gluon_varlen.py tests/test_varlen.py tests/test_varlen_paged.py \
  tests/test_dropout.py tests/test_plans.py tests/test_ops.py tests/test_determinism.py 2>&1 \
  | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -6 $OUT/pytest.txt
