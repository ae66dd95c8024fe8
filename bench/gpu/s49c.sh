#!/bin/bash
# Session 49, call 3: the Gluon VARLEN forward: its GPU tests and the varlen / validation suites, the A/B against the
# route before it over five length ranges (5 rotated rounds), then the feature benchmark's varlen and paged cases.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 200 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 -x tests/test_fwd_gluon_varlen.py \
  tests/test_varlen.py tests/test_varlen_paged.py tests/test_fwd_gluon.py 2>&1 | tail -15 | tee $OUT/pytest.txt
grep -q " failed\| error" $OUT/pytest.txt && exit 1
timeout 150 python bench/gpu/s49_varlen_ab.py 2>&1 | tail -14 | tee $OUT/ab.txt
mkdir -p $OUT/feat
timeout 200 python -m flashtriton.bench.features --cases varlen paged --rounds 3 --out $OUT/feat 2>&1 | tail -30 \
  | tee $OUT/features.txt
