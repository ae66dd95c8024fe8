#!/bin/bash
# Session 61, call 6: fp32 decode tiles without spills (offline: 0-76 B at 16 keys x 8 warps against 3.1-4.4 KB) -
# timed against the default, then the fp32 / route tests with the 16-key 8-warp tile forced for every decode call.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
PYTHONPATH=src timeout -s INT 90 python bench/gpu/s61_fp32_decode_tiles.py 2>&1 | tee $OUT/s61g_tiles.txt | grep -v Warn
FLASHTRITON_DECODE_TILE=16,8,3 PYTHONPATH=src timeout -s INT 60 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 \
  --timeout 55 -k "not cpu and (fp32 or float32 or one_query or one_key or dtype2)" tests/test_fp32.py \
  tests/test_one_row_route.py tests/test_kvcache.py > $OUT/s61g_tests.txt 2>&1
echo "tests rc $?"; tail -1 $OUT/s61g_tests.txt; grep -E "FAILED|ERROR" $OUT/s61g_tests.txt | head
