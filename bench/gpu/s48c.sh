#!/bin/bash
# Session 48, call 3: re-time the fp16 D = 128 causal 512 / 1k cells (call 2's 512 cell: every provider's forward
# and forward+backward swung 20-60% between rounds, cuDNN's too), and the D = 64 causal 2k / 4k cells, five rounds.
export PYTHONPATH=$PWD/src
mkdir -p $OUT/r5
timeout 280 python -m flashtriton.bench.prefill --head-dims 128 --dtypes float16 --causal yes --seqlens 512 1024 \
  --rounds 5 --out $OUT/r5 --tag fp16-d128c-r5 2>&1 | tail -30 | tee $OUT/fp16-d128c.txt
timeout 280 python -m flashtriton.bench.prefill --head-dims 64 --dtypes bfloat16 float16 --causal yes \
  --seqlens 2048 4096 --rounds 5 --out $OUT/r5 --tag d64c-r5 2>&1 | tail -30 | tee $OUT/d64c.txt
