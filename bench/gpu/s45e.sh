#!/bin/bash
# Session 45, call 5: the fp16 D = 64 grid (both masks, one process: session 39's fp16 D = 64 causal rows were the
# oldest in prefill-fp16.md, and the causal efficiency should read from one run).
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 280 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 64 --dtypes float16 \
  --tag s45-d64-fp16 2>&1 | tail -20
