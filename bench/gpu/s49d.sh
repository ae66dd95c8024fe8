#!/bin/bash
# Session 49, call 4: VARLEN_FAST / plain order: the varlen GPU tests, the A/B (bench/gpu/s49_varlen_fast_ab.py), the
# feature benchmark's varlen case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 150 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 120 -x tests/test_fwd_gluon_varlen.py \
  tests/test_varlen.py 2>&1 | tail -6 | tee $OUT/pytest.txt
grep -q " failed\| error" $OUT/pytest.txt && exit 1
timeout 200 python bench/gpu/s49_varlen_fast_ab.py 2>&1 | tail -10 | tee $OUT/ab.txt
mkdir -p $OUT/feat
timeout 150 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -12 \
  | tee $OUT/features.txt
