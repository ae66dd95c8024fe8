#!/bin/bash
# Session 53, call 4 (FOLD applied): the short causal cells' candidate routes under the grid protocol
# (s52_short_routes_grid.py, its rule), then the grid's bf16 causal D = 64 / 128 rows 1k-16k, five rounds.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 120 python bench/gpu/s52_short_routes_grid.py --cells 64:1:2048 64:1:4096 128:1:512 2>&1 \
  | grep -v "Warn\|warn" | tee $OUT/s53d_routes.txt
timeout -s INT 420 python -m flashtriton.bench.prefill --head-dims 64 128 --causal yes \
  --seqlens 1024 2048 4096 8192 16384 --dtypes bfloat16 --rounds 5 --out $OUT --tag s53-causal-bf16 2>&1 \
  | grep -v "Warn\|warn" | tail -24
