#!/bin/bash
# Session 50, call 1: the fused Gluon backward's VARLEN variant: its GPU tests and the varlen / plans suites (the
# route's default table sends every D = 128 packed backward there), the A/B against the route before it
# (bench/gpu/s50_bwd_varlen_ab.py), then the feature benchmark's varlen case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 240 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 200 tests/test_bwd_gluon_varlen.py \
  tests/test_varlen.py tests/test_plans.py tests/test_determinism.py 2>&1 | tail -25 | tee $OUT/pytest.txt
grep -q " failed\| error" $OUT/pytest.txt && exit 1
timeout 200 python bench/gpu/s50_bwd_varlen_ab.py 2>&1 | tail -20 | tee $OUT/ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -12 \
  | tee $OUT/features.txt
