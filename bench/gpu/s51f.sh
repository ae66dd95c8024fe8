#!/bin/bash
# Session 51, call 8: the packed sliding-window forward on the Gluon VARLEN kernel (WINDOW): the VARLEN forward file,
# the varlen, masks and plans suites; the A/B (bench/gpu/s51_varlen_window_fwd_ab.py).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 200 tests/test_fwd_gluon_varlen.py \
  tests/test_varlen.py tests/test_masks.py tests/test_plans.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" \
  | tail -30 > $OUT/pytest.txt
tail -8 $OUT/pytest.txt
timeout 200 python bench/gpu/s51_varlen_window_fwd_ab.py 2>&1 | tail -10 | tee $OUT/window_ab.txt
