#!/bin/bash
# Session 49, call 8: the paged varlen forward with TMA loads: its GPU tests, then the A/B against pointer loads.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 80 -x tests/test_varlen_paged.py 2>&1 \
  | tail -3 | tee $OUT/pytest.txt
grep -q " failed\| error" $OUT/pytest.txt && exit 1
timeout 100 python bench/gpu/s49_paged_tma_ab.py 2>&1 | tail -6 | tee $OUT/ab.txt
