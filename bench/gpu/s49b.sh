#!/bin/bash
# Session 49, call 2: flash_attn_varlen_func with block_table (paged KV) on the H200: its tests and those it
# touches, then the feature benchmark's paged case (new) and the varlen case in three rotated rounds.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 240 python -m pytest -o addopts="" -q -p no:warnings -n 8 --timeout 150 tests/test_varlen_paged.py \
  tests/test_validation.py tests/test_varlen.py tests/test_kvcache.py 2>&1 | tail -15 | tee $OUT/pytest.txt
mkdir -p $OUT/feat
start=$(date +%s)
timeout 300 python -m flashtriton.bench.features --cases paged varlen --rounds 3 --out $OUT/feat 2>&1 | tail -40 \
  | tee $OUT/features.txt
echo "features took $(( $(date +%s) - start )) s" | tee -a $OUT/features.txt
