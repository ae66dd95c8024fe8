#!/bin/bash
# Session 63, call 3: fp32 decode tiles at D = 64 / 32 (offline: the default spills 4.3 KB at D = 64), then the fp32 /
# kvcache GPU tests with (64, 8, 3) forced for every decode call.
export PYTHONUNBUFFERED=1
PYTHONPATH=src timeout -s INT 70 python bench/gpu/s63_fp32_decode_d64.py 2>&1 | tee $OUT/s63c_tiles.txt | grep -v Warn
FLASHTRITON_DECODE_TILE=64,8,3 PYTHONPATH=src timeout -s INT 80 python -m pytest -o addopts="" -q -rf -p no:warnings \
  -n 8 -k "not cpu and (fp32 or float32 or one_query or dtype2)" tests/test_fp32.py tests/test_kvcache.py \
  > $OUT/s63c_tests.txt 2>&1
echo "tests rc $?"; tail -1 $OUT/s63c_tests.txt; grep -E "FAILED|ERROR" $OUT/s63c_tests.txt | head
