#!/bin/bash
# Session 50, call 4: the VARLEN forward's plain PERSISTENT variant: the varlen GPU suites, its A/B against one block
# a CTA (bench/gpu/s50_varlen_persistent_ab.py), then the feature benchmark's varlen case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_fwd_gluon_varlen.py \
  tests/test_varlen.py tests/test_varlen_paged.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -30 \
  > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
timeout 150 python bench/gpu/s50_varlen_persistent_ab.py 2>&1 | tail -8 | tee $OUT/pers_ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -8 \
  | tee $OUT/features.txt
