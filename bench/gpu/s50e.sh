#!/bin/bash
# Session 50, call 5: the VARLEN forward's VARLEN_HEADS_FAST: the Gluon VARLEN forward's GPU tests, its A/B
# (bench/gpu/s50_varlen_heads_ab.py), then the feature benchmark's varlen case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 120 tests/test_fwd_gluon_varlen.py \
  2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
timeout 200 python bench/gpu/s50_varlen_heads_ab.py 2>&1 | tail -10 | tee $OUT/heads_ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -8 \
  | tee $OUT/features.txt
