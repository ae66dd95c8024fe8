#!/bin/bash
# Prepared in session 55 for session 56 (a session without a GPU: extended in session 56 for the next one): the fp32
# one-row score slices (bench/wip/fp32-one-row-slices.md: prediction and rule). First the decode probe on this tree
# as it is (does flash_attn_with_kvcache have the one-query gap too?), then, on a copy with the patch applied, the
# prefill probe at Nq = 1 against cuBLAS, the decode probe again, and the fp32 tests.
export PYTHONUNBUFFERED=1
ROOT=$PWD
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s56_kvcache_fp32_probe.py cuda 2>&1 | grep "^kvcache" \
  | tee $OUT/s56a_kvcache_probe_head.txt
rm -rf /tmp/slices && mkdir -p /tmp/slices && cp -r src tests bench /tmp/slices/
(cd /tmp/slices && git apply $ROOT/bench/wip/fp32-one-row-slices.patch) || exit 3
cd /tmp/slices
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | grep "^D=" | tee $OUT/s56a_probe.txt
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s56_kvcache_fp32_probe.py cuda 2>&1 | grep "^kvcache" \
  | tee $OUT/s56a_kvcache_probe.txt
PYTHONPATH=src timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 200 \
  -k "not cpu and (fp32 or float32 or one_query)" tests/test_fp32.py tests/test_kvcache.py tests/test_prefill.py \
  > $OUT/s56a_tests.txt 2>&1; echo "tests rc $?"; tail -3 $OUT/s56a_tests.txt
grep -E "FAILED|ERROR" $OUT/s56a_tests.txt | head -10
