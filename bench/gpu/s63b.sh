#!/bin/bash
# Session 63, call 2: fp32 decode tiles as defaults (launchers/decode.FP32_TILES: D = 128 (32, 8, 3), D = 256 (16, 8,
# 3)): the timing script again (its "default" column is now the new tile), then the fp32 / route / kvcache GPU tests
# on the defaults, and the kvcache fp32 long-cache regressions (gpu marker).
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s61_fp32_decode_tiles.py 2>&1 | tee $OUT/s63b_tiles.txt | grep -v Warn
PYTHONPATH=src timeout -s INT 150 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 \
  -k "not cpu and (fp32 or float32 or one_query or one_key or dtype2)" tests/test_fp32.py \
  tests/test_one_row_route.py tests/test_kvcache.py > $OUT/s63b_tests.txt 2>&1
echo "tests rc $?"; tail -1 $OUT/s63b_tests.txt; grep -E "FAILED|ERROR" $OUT/s63b_tests.txt | head
PYTHONPATH=src timeout -s INT 100 python -m pytest -o addopts="" -q -rf -p no:warnings -n 2 \
  tests/test_kvcache.py -k "fp32_long_cache or fp32_tiles or float32" > $OUT/s63b_kv.txt 2>&1
echo "kv rc $?"; tail -1 $OUT/s63b_kv.txt; grep -E "FAILED|ERROR" $OUT/s63b_kv.txt | head
