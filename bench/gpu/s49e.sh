#!/bin/bash
# Session 49, calls 5-6: VARLEN_FAST and the plain order apart (s49_varlen_fast_ab.py --split), with the cached box
# layouts (forward_gluon._box_layout); then the feature benchmark's varlen case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 100 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 90 -x tests/test_fwd_gluon_varlen.py \
  tests/test_fwd_gluon.py tests/test_varlen.py tests/test_plans.py -k "varlen or matches_reference or plan" 2>&1 | tail -4 | tee $OUT/pytest.txt
grep -q " failed\| error" $OUT/pytest.txt && exit 1
timeout 250 python bench/gpu/s49_varlen_fast_ab.py --split 2>&1 | tail -14 | tee $OUT/ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -8 \
  | tee $OUT/features.txt
