#!/bin/bash
# Session 44, call 5: the whole D = 128 grid, bf16 then fp16, in one process each (every provider, same inputs), so
# the causal efficiency (causal / non-causal TFLOP/s from 8k) reads from one run: the table's 0.84 at 8k bf16 divides
# session 43's causal row by session 42's non-causal one.
export PYTHONPATH=$PWD/src
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout 290 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --tag s44-d128 2>&1 | tail -32
timeout 290 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --dtypes float16 \
  --tag s44-d128-fp16 2>&1 | tail -32
