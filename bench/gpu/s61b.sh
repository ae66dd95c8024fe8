#!/bin/bash
# Session 61, call 2: fp32 on the one-row route and the decode tiles sized by the
# caches' element size (launchers/decode.default_tile's elem: fp32 at D = 128 asked 278,544 bytes of shared memory in
# call 1) - the fp32 route probe down to 128 keys (its threshold), the bf16 probe again, then the GPU tests of the
# route, kvcache and fp32 files.
export PYTHONUNBUFFERED=1
P=${PREFIX:-s61b}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
PYTHONPATH=src timeout -s INT 120 python bench/gpu/s60_one_row_route_probe.py fp32 128,256,512,1024,2048,8192,32768 2>&1 \
  | tee $OUT/${P}_route_fp32.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s60_one_row_route_probe.py 2>&1 | tee $OUT/${P}_route_bf16.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 250 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 240 -k "not cpu" \
  -m "not gpu_alone" tests/test_one_row_route.py tests/test_kvcache.py tests/test_fp32.py > $OUT/${P}_tests.txt 2>&1
echo "tests rc $?"; tail -2 $OUT/${P}_tests.txt; grep -E "FAILED|ERROR" $OUT/${P}_tests.txt | head -20
