#!/bin/bash
# Prepared in session 53 for session 54: the grid's D = 256 rows at 2k / 8k / 16k, both masks, bf16, five rounds (the
# D = 256 rows are sessions 35-44's single readings; FOLD changed the causal masked steps; causal efficiency at 8k
# read 0.85). Merge into prefill.json with prefill.merge([target, run], target).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT 540 python -m flashtriton.bench.prefill --head-dims 256 --causal both --seqlens 2048 8192 16384 \
  --dtypes bfloat16 --rounds 5 --out $OUT --tag s54-d256 2>&1 | grep -v "Warn\|warn" | tail -24
