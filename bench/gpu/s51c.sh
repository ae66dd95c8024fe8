#!/bin/bash
# Session 51, call 3: the Gluon VARLEN forward's DROPOUT (its GPU tests with the varlen and dropout suites), then the
# A/Bs of bench/gpu/s51_varlen_fwd_ab.py (dropout at D = 128; D = 64 without dropout).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 200 tests/test_fwd_gluon_varlen.py \
  tests/test_dropout.py tests/test_varlen.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -40 > $OUT/pytest.txt
tail -8 $OUT/pytest.txt
timeout 300 python bench/gpu/s51_varlen_fwd_ab.py 2>&1 | tail -16 | tee $OUT/fwd_ab.txt
