#!/bin/bash
# Session 51, call 9: the paged forward with a sliding window (VARLEN_PAGED + WINDOW, the loader's key0): the paged
# test files and the VARLEN forward file; the A/B (bench/gpu/s51_paged_window_ab.py).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_fwd_gluon_paged.py \
  tests/test_varlen_paged.py tests/test_fwd_gluon_varlen.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" \
  | tail -20 > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
timeout 150 python bench/gpu/s51_paged_window_ab.py 2>&1 | tail -6 | tee $OUT/paged_window_ab.txt
