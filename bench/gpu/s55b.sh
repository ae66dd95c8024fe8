#!/bin/bash
# Session 55, call 2: the accuracy fuzz on the GPU kernels (first run there), then s54b.sh's bf16 half (the
# 2-consumer O_STAGE at D = 64 causal 8k) and issue 3's window row.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 150 python bench/cpu/s54_cpu_accuracy_fuzz.py 55 110 any triton > $OUT/s55b_fuzz.txt 2>&1
tail -25 $OUT/s55b_fuzz.txt
timeout -s INT 150 python bench/gpu/s52_short_routes_grid.py --cells 64:1:8192 2>&1 | grep -v "Warn\|warn" \
  | tee $OUT/s55b_routes_bf16.txt
timeout -s INT 240 python -m flashtriton.bench.features --cases window --out $OUT 2>&1 | grep -v "Warn\|warn" | tail -12
