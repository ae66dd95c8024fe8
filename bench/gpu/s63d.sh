#!/bin/bash
# Session 63, call 4: FP32_TILES with D = 64 (32, 8, 3): the fp32 / kvcache GPU tests on the defaults, the D = 64
# timing once more.
export PYTHONUNBUFFERED=1
PYTHONPATH=src timeout -s INT 80 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 \
  -k "not cpu and (fp32 or float32 or one_query or dtype2)" tests/test_fp32.py tests/test_kvcache.py \
  > $OUT/s63d_tests.txt 2>&1
echo "tests rc $?"; tail -1 $OUT/s63d_tests.txt; grep -E "FAILED|ERROR" $OUT/s63d_tests.txt | head
PYTHONPATH=src timeout -s INT 40 python bench/gpu/s63_fp32_decode_d64.py 2>&1 | tee $OUT/s63d_tiles.txt | grep -v Warn | head -4
