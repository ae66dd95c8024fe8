#!/bin/bash
# Session 64, call 1: on an H200, session 61 / 63's queued re-timings (the one-row route in bf16 and fp32 with the
# fp32 threshold at 64 keys; the fp32 decode tiles), then the window row; on an H100, the decode / route / fp32 /
# kvcache GPU test files whole (the first whole run of them since session 58's suite; sessions 60-63 changed them).
export PYTHONUNBUFFERED=1
python -c "import torch, triton; print(torch.__version__, triton.__version__)"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
if echo "$gpu" | grep -q H200; then
  PYTHONPATH=src timeout -s INT 80 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/s64a_route_bf16.txt | grep -v Warn
  PYTHONPATH=src timeout -s INT 80 python bench/gpu/s60_one_row_route_probe.py fp32 64,128,256,1024,8192,32768 2>&1 \
    | tee $OUT/s64a_route_fp32.txt | grep -v Warn
  PYTHONPATH=src timeout -s INT 90 python bench/gpu/s61_fp32_decode_tiles.py 2>&1 | tee $OUT/s64a_tiles.txt | grep -v Warn
  PYTHONPATH=src timeout -s INT 40 python bench/gpu/s63_fp32_decode_d64.py 2>&1 | tee $OUT/s64a_tiles_d64.txt | grep -v Warn
  PYTHONPATH=src timeout -s INT 180 python -m flashtriton.bench.features --cases window --out $OUT 2>&1 \
    | grep -v "Warn\|warn" | tail -12
else
  PYTHONPATH=src timeout -s INT 500 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 200 \
    -k "not cpu" -m "not gpu_alone" tests/test_kvcache.py tests/test_kvcache_checks.py tests/test_one_row_route.py \
    tests/test_fp32.py tests/test_merge.py tests/test_varlen_paged.py tests/test_fwd_gluon_paged.py > $OUT/s64a_tests.txt 2>&1
  echo "tests rc $?"; tail -1 $OUT/s64a_tests.txt; grep -E "FAILED|ERROR" $OUT/s64a_tests.txt | head -20
fi
