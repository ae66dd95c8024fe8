#!/bin/bash
# Session 43, call 2: the D = 128 causal grid rows 512-4k, bf16 then fp16 (the fixed SCHEDULED / O_STAGE routes).
export PYTHONPATH=src
timeout 270 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes \
  --seqlens 512 1024 2048 4096 --tag s43-d128c 2>&1 | tail -25
timeout 270 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes \
  --seqlens 512 1024 2048 4096 --dtypes float16 --tag s43-d128c-fp16 2>&1 | tail -25
