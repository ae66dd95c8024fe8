#!/bin/bash
# Session 50, call 6: the session's final code on the GPU: the varlen, plans, dropout, determinism, ops and fused
# backward suites (the routes this session changed), then the feature benchmark's varlen case (three rounds).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 330 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 250 tests/test_fwd_gluon_varlen.py \
  tests/test_bwd_gluon_varlen.py tests/test_varlen.py tests/test_varlen_paged.py tests/test_plans.py \
  tests/test_dropout.py tests/test_determinism.py tests/test_ops.py tests/test_bwd_gluon.py 2>&1 \
  | grep -v "^    \|^$\|Warning\|warner" | tail -30 > $OUT/pytest.txt
tail -4 $OUT/pytest.txt
mkdir -p $OUT/feat
timeout 150 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -8 \
  | tee $OUT/features.txt
