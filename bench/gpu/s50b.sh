#!/bin/bash
# Session 50, call 2: call 1's failures again (tests fixed: test_varlen's warp-specialized case switches the new
# route off; the sequences test runs the backward from one forward's out / lse), then the A/B and the feature case.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 120 tests/test_bwd_gluon_varlen.py \
  "tests/test_varlen.py::test_warp_specialized_varlen" 2>&1 | grep -v "^    \|^$" | tail -40 > $OUT/pytest.txt
tail -5 $OUT/pytest.txt
timeout 200 python bench/gpu/s50_bwd_varlen_ab.py 2>&1 | tail -20 | tee $OUT/ab.txt
mkdir -p $OUT/feat
timeout 120 python -m flashtriton.bench.features --cases varlen --rounds 3 --out $OUT/feat 2>&1 | tail -12 \
  | tee $OUT/features.txt
