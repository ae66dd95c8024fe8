#!/bin/bash
# Session 51, call 7: the offline-compile fix (PAGE_SIZE unbound in an offline signature) checked with the Gluon
# VARLEN forward file; VARLEN_HALF at D = 64 (now routed from 250), bench/gpu/s51_varlen_half_ab.py with S51_HALF_D64=1.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_fwd_gluon_varlen.py \
  tests/test_fwd_gluon_paged.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -20 > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
S51_HALF_D64=1 timeout 200 python bench/gpu/s51_varlen_half_ab.py 2>&1 | tail -8 | tee $OUT/half_d64.txt
