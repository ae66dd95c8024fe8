#!/bin/bash
# Session 51, call 1: the VARLEN forward's VARLEN_HALF (a plain block's last key tile, at most half full, computed
# 64 keys wide): the varlen GPU suites, the A/B (bench/gpu/s51_varlen_half_ab.py), the feature benchmark's varlen case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout 220 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_fwd_gluon_varlen.py \
  tests/test_varlen.py 2>&1 | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -6 $OUT/pytest.txt
timeout 200 python bench/gpu/s51_varlen_half_ab.py 2>&1 | tail -10 | tee $OUT/half_ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -8 \
  | tee $OUT/features.txt
