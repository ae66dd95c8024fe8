#!/bin/bash
# Session 48, call 2: the fp16 grid, D = 64 and 128, every provider timed in three rotated rounds (median).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
mkdir -p $OUT/r3
start=$(date +%s)
timeout 560 python -m flashtriton.bench.prefill --head-dims 64 128 --dtypes float16 --rounds 3 --out $OUT/r3 \
  --tag prefill-fp16-r3 2>&1 | tail -80 | tee $OUT/grid-fp16.txt
echo "grid took $(( $(date +%s) - start )) s" | tee -a $OUT/grid-fp16.txt
