#!/bin/bash
# Prepared in session 55 for session 56: the fp32 one-row score slices (bench/wip/fp32-one-row-slices.md: prediction
# and rule) on a copy of this tree with the patch applied: the probe at Nq = 1 against cuBLAS, then the fp32 tests.
export PYTHONUNBUFFERED=1
ROOT=$PWD
rm -rf /tmp/slices && mkdir -p /tmp/slices && cp -r src tests bench /tmp/slices/
(cd /tmp/slices && git apply $ROOT/bench/wip/fp32-one-row-slices.patch) || exit 3
cd /tmp/slices
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | grep "^D=" | tee $OUT/s56a_probe.txt
PYTHONPATH=src timeout -s INT 200 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 150 \
  -k "not cpu and (fp32 or float32 or one_query)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  > $OUT/s56a_tests.txt 2>&1; echo "tests rc $?"; tail -3 $OUT/s56a_tests.txt
grep -E "FAILED|ERROR" $OUT/s56a_tests.txt | head -10
