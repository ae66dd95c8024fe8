#!/bin/bash
# Prepared in session 53 for session 54 (after s54a.sh): the 2-consumer O_STAGE kernel at D = 64 causal 8k under the
# grid protocol (s52_short_routes_grid.py, its rule; bf16 then fp16), then issue 3's window row (bench.features
# window: FOLD's +1.2% on the window kernel predicts ~0.79 / 0.73 / 0.71x causal against 0.78 / 0.72 / 0.70).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 150 python bench/gpu/s52_short_routes_grid.py --cells 64:1:8192 2>&1 | grep -v "Warn\|warn" \
  | tee $OUT/s54b_routes_bf16.txt
timeout -s INT 150 python bench/gpu/s52_short_routes_grid.py --fp16 --cells 64:1:8192 2>&1 | grep -v "Warn\|warn" \
  | tee $OUT/s54b_routes_fp16.txt
timeout -s INT 240 python -m flashtriton.bench.features --cases window --out $OUT 2>&1 | grep -v "Warn\|warn" | tail -12
