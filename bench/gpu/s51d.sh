#!/bin/bash
# Session 51, call 6: the paged forward on the Gluon VARLEN kernel (VARLEN_PAGED): its GPU tests with the paged,
# varlen and plans suites; the A/B (bench/gpu/s51_paged_ab.py); the feature benchmark's paged case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 240 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 200 tests/test_fwd_gluon_paged.py \
  tests/test_varlen_paged.py tests/test_fwd_gluon_varlen.py tests/test_varlen.py tests/test_plans.py 2>&1 \
  | grep -v "^    \|^$\|Warning\|warner" | tail -40 > $OUT/pytest.txt
tail -8 $OUT/pytest.txt
timeout 240 python bench/gpu/s51_paged_ab.py 2>&1 | tail -12 | tee $OUT/paged_ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases paged --rounds 3 --out $OUT/feat 2>&1 | tail -10 \
  | tee $OUT/features.txt
