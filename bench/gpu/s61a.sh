#!/bin/bash
# Session 61, call 1: the decode kernel's one-row fp32 path (exp2_one_rounding, dot_apart in kernels/decode.py's
# _update) held to tests/test_fp32.py with every one-row call routed (bench/gpu/s61_route_every_one_row.py), the fp32
# probes routed, the route timed in bf16 (re-time on this card) and fp32, the routed varlen call's host time, then the
# route / kvcache / varlen GPU tests as the code stands.
export PYTHONUNBUFFERED=1
P=${PREFIX:-s61a}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
FORCE='import sys, runpy
from flashtriton.launchers import policy
policy.ONE_ROW_DECODE_MIN_NK = policy.ONE_ROW_DECODE_MIN_NK_FP32 = 1
script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name="__main__")'
ROUTE_COUNT_FILE=$OUT/${P}_routed_counts.txt PYTHONPATH=src:bench/gpu timeout -s INT 120 python -m pytest -o addopts="" \
  -q -rf -p no:warnings -n 8 --timeout 110 -p s61_route_every_one_row -k "not cpu" tests/test_fp32.py \
  > $OUT/${P}_fp32_tests_routed.txt 2>&1; echo "routed fp32 tests rc $?"
tail -2 $OUT/${P}_fp32_tests_routed.txt; grep -E "FAILED|ERROR" $OUT/${P}_fp32_tests_routed.txt | head; cat $OUT/${P}_routed_counts.txt
PYTHONPATH=src timeout -s INT 60 python -c "$FORCE" bench/gpu/s55_fp32_probe.py cuda 1 2>&1 | tee $OUT/${P}_s55_probe_routed.txt | tail -3
PYTHONPATH=src timeout -s INT 60 python bench/gpu/s56_kvcache_fp32_probe.py cuda 2>&1 | tee $OUT/${P}_s56_probe.txt | tail -3
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s60_one_row_route_probe.py fp32 2>&1 | tee $OUT/${P}_route_fp32.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/${P}_route_bf16.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 40 python bench/gpu/s61_route_host_profile.py > $OUT/${P}_host_profile.txt 2>&1
grep "value_checks" $OUT/${P}_host_profile.txt
PYTHONPATH=src timeout -s INT 130 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 120 -k "not cpu" \
  -m "not gpu_alone" tests/test_one_row_route.py tests/test_kvcache.py > $OUT/${P}_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/${P}_tests.txt; grep -E "FAILED|ERROR" $OUT/${P}_tests.txt | head -20
