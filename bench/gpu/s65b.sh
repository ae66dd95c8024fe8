#!/bin/bash
# Session 65, FP32_TILES[32] = (64, 4, 4): the fp32 D = 32 / 64 decode tiles timed (the "default" column is the new
# tile at D = 32), then the GPU kvcache / fp32 / route tests on it. Any card (a tile choice, not an H200 figure).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 60 python bench/gpu/s63_fp32_decode_d64.py 2>&1 | tee $out/s65b_tiles_d32.txt | grep -v Warn
timeout -s INT 240 python -m pytest -o addopts="" -q -rf -p no:warnings -n 8 --timeout 200 -k "not cpu" \
  -m "not gpu_alone" tests/test_kvcache.py tests/test_fp32.py tests/test_one_row_route.py > $out/s65b_tests.txt 2>&1
echo "tests rc $?"; tail -1 $out/s65b_tests.txt; grep -E "^(FAILED|ERROR)" $out/s65b_tests.txt | head -20
