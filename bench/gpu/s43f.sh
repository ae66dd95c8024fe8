#!/bin/bash
# Session 43, call 7: the D = 128 causal grid rows 4k / 8k after routing O_STAGE there, bf16 then fp16.
export PYTHONPATH=src
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes \
  --seqlens 4096 8192 --tag s43-d128c-8k 2>&1 | tail -12
timeout 200 python -m flashtriton bench --suite prefill --out $OUT -- --head-dims 128 --causal yes \
  --seqlens 4096 8192 --dtypes float16 --tag s43-d128c-8k-fp16 2>&1 | tail -12
