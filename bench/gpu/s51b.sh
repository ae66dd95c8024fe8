#!/bin/bash
# Session 51, call 2: the fused VARLEN backward's DROPOUT: its GPU tests (the VARLEN backward file, the dropout and
# varlen suites), then the A/B against the route before (bench/gpu/s51_bwd_varlen_dropout_ab.py).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 260 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 200 tests/test_bwd_gluon_varlen.py \
  tests/test_dropout.py tests/test_varlen.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -40 > $OUT/pytest.txt
tail -8 $OUT/pytest.txt
timeout 280 python bench/gpu/s51_bwd_varlen_dropout_ab.py 2>&1 | tail -12 | tee $OUT/dropout_ab.txt
